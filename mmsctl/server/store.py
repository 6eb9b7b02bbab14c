"""Where a register ``url`` points: the model store, an allowed http(s) URL, or a zoo name.

:func:`normalise_location` reads the ``url`` once into a :class:`Location`, and that one
value is both checked and opened: surrounding whitespace is stripped before anything looks
at it, control characters are refused, and only what it names is fetched (a zoo name is
never read as a URL or a path, a URL never as a name). A request may name:

- a file or folder in the model store (relative; ``..`` is refused, as in MMS), or an
  absolute path inside it; never the store itself, and symlinks are resolved once into the
  path that is opened, which must still be inside the store; without a model store, an
  absolute path;
- an http(s) URL that matches one of ``allowed_urls`` (regular expressions matched against
  the whole URL, ignoring case, as TorchServe does), redirects included;
- a zoo name (``squeezenet``), from the cache, a mirror folder, or a download that must
  match ``allowed_urls`` too.

Start-up models (``--models``, ``load_models``) come from the operator, not a request: they
may also be absolute paths outside the model store. Archives are opened (and extracted) with
``mmsctl.archive.open_archive`` under the server's archive limits; this runs in a thread, off
the event loop.
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Literal
from urllib.parse import unquote, urlsplit

from mmsctl.names import MODEL_NAME_PATTERN
from mmsctl.server.config import ServerConfig
from mmsctl.server.errors import BadRequest, DownloadFailed, InternalServerError, InvalidModel, ModelNotFound

if TYPE_CHECKING:
    from mmsctl.archive import ModelArchive

__all__ = ["Location", "normalise_location", "resolve_archive", "url_allowed"]

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*)://")


@dataclass(frozen=True)
class Location:
    """A register ``url`` as it is checked and then used: an absolute path, an http(s) URL or a zoo name."""

    kind: Literal["path", "url", "zoo"]
    value: str


def url_allowed(url: str, config: ServerConfig) -> bool:
    """Whether *url* matches one of ``allowed_urls`` as a whole (ignoring case, like TorchServe)."""
    return any(re.fullmatch(pattern, url, re.IGNORECASE) for pattern in config.allowed_urls)


def _inside(path: Path, folder: Path) -> bool:
    return os.path.commonpath([str(path), os.path.normpath(str(folder))]) == os.path.normpath(str(folder))


def _in_store(path: Path, store: Path, text: str) -> Location:
    """The one resolved path that a request's *path* in the model store is opened by.

    Symlinks are resolved here, once: the result is neither the store itself (``url=.``) nor
    outside it, and a folder model holds no symlink that leads outside it either.
    """
    real_store = store.resolve()
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):  # gone meanwhile, or a symlink loop
        raise ModelNotFound(f"Model not found: {text} (no such file or folder)") from None
    if real == real_store:
        raise BadRequest(f"Invalid url {text!r}: it names the model store itself, not a model in it.")
    if not _inside(real, real_store):
        raise BadRequest(f"Invalid url {text!r}: it leads outside the model store (a symlink).")
    if real.is_dir():
        for folder, dirs, files in os.walk(real):  # symlinked folders are listed, not entered
            for name in dirs + files:
                entry = Path(folder, name)
                if entry.is_symlink() and not _inside(Path(os.path.realpath(entry)), real_store):
                    raise BadRequest(f"Invalid url {text!r}: {entry.relative_to(real)} in it is a symlink "
                                     "that leads outside the model store.")
    return Location("path", str(real))


def _well_formed(url: str) -> bool:
    """Whether an http(s) URL has a host, and a port number in range where it names one."""
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises ValueError for a port that is not a number in range
    except ValueError:
        return False
    return bool(parts.hostname)


def normalise_location(url: str, config: ServerConfig, *, trusted: bool = False) -> Location:
    """Read a register ``url`` once into what will be opened, or refuse it.

    Args:
        url: the request's ``url`` (or a start-up model's location).
        config: the model store and ``allowed_urls``.
        trusted: the operator's own start-up model: absolute paths outside the store are fine.

    Raises:
        BadRequest: empty, control characters, a scheme other than http(s)/file, or a URL that
            ``allowed_urls`` does not match.
        ModelNotFound: (also) an http(s) URL without a host or with a bad port (MMS's ``Invalid model url``).
        BadRequest: (also) the model store itself (``url=.``), or a path in it that a symlink
            leads out of it.
        ModelNotFound: a relative path that climbs out, a path outside the model store, or
            nothing by that name.
    """
    text = url.strip()
    if not text:
        raise BadRequest("Parameter url is required.")
    if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in text):
        raise BadRequest(f"Invalid url {text!r}: control characters.")
    scheme = _SCHEME.match(text)
    if scheme:
        name = scheme.group(1).lower()
        if name in ("http", "https"):
            if not _well_formed(text):
                raise ModelNotFound(f"Invalid model url: {text}")  # MMS's answer, whatever allowed_urls says
            if not url_allowed(text, config):
                allowed = ", ".join(config.allowed_urls) or "none"
                raise BadRequest(f"URL not allowed: {text} (allowed_urls: {allowed})")
            return Location("url", text)
        if name != "file":
            raise BadRequest(f"Unsupported URL scheme {name}:// in url: {text} "
                             "(use a name in the model store or an http(s) URL)")
        parts = urlsplit(text)
        if parts.netloc not in ("", "localhost"):
            raise BadRequest(f"Invalid file URL (it names a host): {text}")
        text = unquote(parts.path)
    if ".." in PurePosixPath(text).parts:
        raise ModelNotFound(f"Relative path is not allowed in url: {text}")
    store = Path(config.model_store) if config.model_store else None
    if os.path.isabs(text):
        path = Path(os.path.normpath(text))
        if store is not None and not trusted:
            if not _inside(path, store):
                raise ModelNotFound(f"Model not found in model store: {text} (a path outside the model store)")
            return _in_store(path, store, text)
        if not path.exists():
            raise ModelNotFound(f"Model not found: {text} (no such file or folder)")
        return Location("path", str(path))
    if store is not None and (store / text).exists():
        return Location("path", str(store / text)) if trusted else _in_store(store / text, store, text)
    if MODEL_NAME_PATTERN.fullmatch(text):
        return Location("zoo", text)
    if store is not None:
        raise ModelNotFound(f"Model not found in model store: {text}")
    raise ModelNotFound(f"Model not found: {text} (no model store is configured: give an absolute path)")


def _fetch(location: Location, config: ServerConfig) -> Path:
    """The archive on disk for a URL or zoo name (downloads run through ``allowed_urls``).

    A failed download is MMS's 400 ``Failed to download model from: URL`` (``, code: N`` for an HTTP error
    status), with the reason in the body's ``cause``.
    """
    from mmsctl.errors import MmsError, NotFoundError, ZooError
    from mmsctl.zoo.download import DownloadStatusError
    from mmsctl.zoo.resolve import resolve_name, resolve_url

    def allow(url: str) -> bool:
        return url_allowed(url, config)

    try:
        if location.kind == "url":
            resolved = resolve_url(location.value, progress=False, allow=allow, max_bytes=config.max_archive_size)
        else:
            resolved = resolve_name(location.value, progress=False, allow=allow, max_bytes=config.max_archive_size)
    except NotFoundError:
        where = "model store" if config.model_store else "model zoo"
        raise ModelNotFound(f"Model not found in {where}: {location.value}") from None
    except ZooError as exc:
        code = f", code: {exc.status}" if isinstance(exc, DownloadStatusError) else ""
        raise DownloadFailed(f"Failed to download model from: {location.value}{code}", cause=exc.message) from None
    except MmsError as exc:
        raise InvalidModel(exc.message) from None
    return Path(resolved.path)


def _open(path: Path, config: ServerConfig) -> ModelArchive:
    from mmsctl.archive import Limits, open_archive
    from mmsctl.errors import MmsError

    limits = Limits(max_total_bytes=config.max_archive_size, max_members=config.max_archive_members)
    try:
        return open_archive(path, limits=limits)  # extracted once into the cache, keyed by content
    except MmsError as exc:
        raise InvalidModel(exc.message) from None
    except OSError as exc:  # the cache folder, not the request: the server's problem
        raise InternalServerError(f"Cannot extract {path.name}: {exc.strerror or exc}") from None


def resolve_archive(url: str, config: ServerConfig, *, trusted: bool = False) -> ModelArchive:
    """Find and open the archive a register ``url`` names (see :func:`normalise_location`).

    Raises:
        ApiException: 404 ModelNotFoundException / 400 Bad/InvalidModel/Download, as MMS.
    """
    location = normalise_location(url, config, trusted=trusted)
    path = Path(location.value) if location.kind == "path" else _fetch(location, config)
    return _open(path, config)
