"""Where a register ``url`` points: the model store, an allowed http(s) URL, or a zoo name.

MMS resolves ``url`` against ``model_store`` and refuses relative paths that
climb out of it; we do the same, then fall back to ``mmsctl.zoo.resolve_model``
for zoo names (``squeezenet``). Archives are opened (and extracted) with
``mmsctl.archive.open_archive``; this runs in a thread, off the event loop.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from mmsctl.server.config import ServerConfig
from mmsctl.server.errors import BadRequest, DownloadFailed, InvalidModel, ModelNotFound

if TYPE_CHECKING:
    from mmsctl.archive import ModelArchive

__all__ = ["resolve_archive"]


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


def _open(path: Path) -> ModelArchive:
    from mmsctl.archive import open_archive
    from mmsctl.errors import MmsError

    try:
        return open_archive(path)  # extracted once into the cache, keyed by content
    except MmsError as exc:
        raise InvalidModel(exc.message) from None


def resolve_archive(url: str, config: ServerConfig) -> ModelArchive:
    """Find and open the archive a register ``url`` names.

    Raises:
        ApiException: 404 ModelNotFoundException / 400 Bad/InvalidModel/Download, as MMS.
    """
    if not url:
        raise BadRequest("Parameter url is required.")
    return _open(_locate(url, config))
