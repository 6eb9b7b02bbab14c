"""Where a register ``url`` points: the model store, an allowed http(s) URL, or a zoo name.

MMS resolves ``url`` against ``model_store`` and refuses relative paths that
climb out of it; we do the same, then fall back to ``mmsctl.zoo.resolve_model``
for zoo names (``squeezenet``). Archives are opened (and extracted) with
``mmsctl.archive.open_archive``; this runs in a thread, off the event loop.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from mmsctl.server.config import ServerConfig
from mmsctl.server.errors import BadRequest, DownloadFailed, InvalidModel, ModelNotFound

__all__ = ["ArchiveInfo", "resolve_archive"]


@dataclass
class ArchiveInfo:
    """What the server keeps about an opened archive (picklable)."""

    source: str
    root: Path
    model_name: Optional[str]
    handler: Optional[str]
    runtime: str = "python"
    engine: Optional[str] = None
    model_version: Optional[str] = None


def _is_url(url: str) -> bool:
    return bool(re.match(r"^https?://", url, re.I))


def _locate(url: str, config: ServerConfig) -> Path:
    if _is_url(url):
        if not any(re.fullmatch(p, url) for p in config.allowed_urls):
            raise BadRequest(
                f"URL not allowed: {url} (allowed_urls: {', '.join(config.allowed_urls) or 'none'})"
            )
        return _from_zoo(url)
    if url.startswith("file://"):
        url = url[len("file://"):]
    if ".." in Path(url).parts:
        raise ModelNotFound(f"Relative path is not allowed in url: {url}")
    if config.model_store:
        candidate = Path(config.model_store) / url
        if candidate.exists():
            return candidate
    if Path(url).is_absolute() and Path(url).exists():
        return Path(url)
    try:
        return _from_zoo(url)
    except ModelNotFound:
        if config.model_store:
            raise ModelNotFound(f"Model not found in model store: {url}") from None
        if "/" in url:
            raise ModelNotFound(f"Model not found: {url} (no such file or folder)") from None
        raise ModelNotFound(
            f"Model not found: {url} (not a zoo model, and no model store is configured)") from None


def _from_zoo(location: str) -> Path:
    from mmsctl.errors import MmsError, NotFoundError, ZooError
    from mmsctl.zoo import resolve_model

    try:
        return Path(resolve_model(location, progress=False).path)
    except NotFoundError:
        raise ModelNotFound(f"Model not found in model store: {location}") from None
    except ZooError as exc:
        raise DownloadFailed(f"Failed to download model from: {location}: {exc.message}") from None
    except MmsError as exc:
        raise InvalidModel(exc.message) from None


def _open(path: Path) -> ArchiveInfo:
    from mmsctl.archive import open_archive
    from mmsctl.errors import MmsError

    try:
        archive = open_archive(path)  # extracted once into the cache, keyed by content
    except MmsError as exc:
        raise InvalidModel(exc.message) from None
    manifest = archive.manifest
    return ArchiveInfo(
        source=str(path),
        root=archive.root,
        model_name=archive.model_name or None,
        handler=archive.handler or None,
        runtime=manifest.runtime or "python",
        engine=manifest.engine_name or None,
        model_version=manifest.model_version or None,
    )


def resolve_archive(url: str, config: ServerConfig) -> ArchiveInfo:
    """Find and open the archive a register ``url`` names.

    Raises:
        ApiException: 404 ModelNotFoundException / 400 Bad/InvalidModel/Download, as MMS.
    """
    if not url:
        raise BadRequest("Parameter url is required.")
    return _open(_locate(url, config))
