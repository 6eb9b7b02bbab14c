"""Turn what the user typed into a model archive on disk.

What a location means is :func:`mmsctl.names.model_location`'s one rule:

1. ``name=location`` (MMS's ``--models`` form): the given name wins;
2. a path (``./squeezenet``, ``models/x.mar``, ``resnet.mar``: a ``/``, a leading ``.``
   or ``~``, or an archive suffix), or a ``file://`` URL: that file or folder;
3. an ``http(s)://`` URL (cached by URL);
4. any other word is a model-zoo name or alias, any case (``squeezenet`` →
   ``squeezenet_v1.1``), even where a folder of that name is in the current folder:
   the cache first, then the mirror (``MMSCTL_ZOO_URL`` / setting ``zoo_url``,
   an http(s) base URL or a folder holding ``<name>.mar``), else the MMS zoo.

With a mirror set, names outside the catalog are looked up there too, so a site
mirror can carry its own models. Offline (``MMSCTL_OFFLINE=1`` / setting
``offline``, or the zoo host unreachable) only the cache and a folder mirror are used.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional
from urllib.parse import unquote, urlsplit

from mmsctl.config import setting
from mmsctl.errors import (
    ConfigError,
    DownloadError,
    InputNotFoundError,
    ModelNotFoundError,
    OfflineError,
    UsageError,
)
from mmsctl.names import MODEL_NAME_PATTERN, model_location, split_named
from mmsctl.zoo import cache
from mmsctl.zoo.catalog import ZooEntry, lookup, unknown_model_message

if TYPE_CHECKING:
    from mmsctl.zoo.download import DownloadOptions

__all__ = [
    "ResolvedModel",
    "cached_model",
    "check_name",
    "is_offline",
    "mirror_url",
    "pull_model",
    "resolve_model",
    "resolve_name",
    "resolve_url",
]

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})


@dataclass(frozen=True)
class ResolvedModel:
    """A model archive on disk and how it was found.

    Attributes:
        name: the model's name: the one given with ``name=location``, else the
            zoo's canonical name, else the file or folder name without its suffix.
        path: the archive file or folder (``open_archive`` reads it).
        source: ``local`` (a path the user gave), ``cache`` (reused, no network),
            ``mirror`` (a file in a mirror folder, used in place) or ``download``
            (fetched just now into the cache).
        origin: the URL or path it came from.
        entry: the zoo catalog entry, where the name is one.
    """

    name: str
    path: Path
    source: str
    origin: str = ""
    entry: Optional[ZooEntry] = None


def is_offline(offline: Optional[bool] = None) -> bool:
    """*offline* if given, else the ``offline`` setting (``MMSCTL_OFFLINE``)."""
    if offline is not None:
        return offline
    value = (setting("offline") or "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"setting offline={value!r} is not a yes/no value (use 1 or 0)")


def mirror_url() -> Optional[str]:
    """The zoo mirror (``MMSCTL_ZOO_URL`` / setting ``zoo_url``), or None."""
    value = (setting("zoo_url") or "").strip()
    return value or None


def _download_options(progress: bool, allow: Optional[Callable[[str], bool]] = None,
                      max_bytes: Optional[int] = None) -> DownloadOptions:
    from mmsctl.archive.unpack import Limits
    from mmsctl.zoo.download import DownloadOptions

    def number(key: str, default: float) -> float:
        raw = setting(key)
        if raw is None or raw.strip() == "":
            return default
        try:
            return float(raw)
        except ValueError:
            raise ConfigError(f"setting {key}={raw!r} is not a number") from None

    timeout = number("zoo_timeout", 30.0)
    return DownloadOptions(
        timeout=timeout,
        connect_timeout=min(10.0, timeout),
        retries=int(number("zoo_retries", 2)),
        progress=progress,
        allow=allow,
        max_bytes=max_bytes if max_bytes is not None else Limits.from_settings().max_total_bytes,
    )


def resolve_model(
    location: str, *, offline: Optional[bool] = None, progress: bool = True
) -> ResolvedModel:
    """Find or fetch the archive that *location* names.

    Args:
        location: a zoo name, a local path, an http(s) URL, or ``name=location``.
        offline: never touch the network (default: the ``offline`` setting).
        progress: show a download bar on stderr when it is a terminal.

    Returns:
        The archive's path, its model name and where it came from.

    Raises:
        ModelNotFoundError: an unknown name (with a did-you-mean where one is close).
        InputNotFoundError: a path that does not exist.
        OfflineError: offline (or the network unreachable) and not cached.
        DownloadError: the download failed (HTTP status, refused, timeout, cut short).

    Example:
        >>> resolve_model("squeezenet").path  # doctest: +SKIP
        PosixPath('~/.cache/mmsctl/archives/squeezenet_v1.1.mar')
    """
    return _resolve(location, offline=offline, progress=progress, refresh=False)


def resolve_url(
    url: str, *, progress: bool = True, allow: Optional[Callable[[str], bool]] = None,
    max_bytes: Optional[int] = None,
) -> ResolvedModel:
    """An http(s) URL only (never a path or a name): the cached copy, else a download.

    Args:
        allow: every URL fetched, redirects included, must pass it (the server's ``allowed_urls``).
        max_bytes: refuse a larger archive (default: the ``max_archive_size`` setting).
    """
    if not _is_url(url):
        raise UsageError(f"not an http(s) URL: {url!r}")
    return _resolve_url(url, offline=None, progress=progress, refresh=False, allow=allow, max_bytes=max_bytes)


def resolve_name(
    name: str, *, offline: Optional[bool] = None, progress: bool = True,
    allow: Optional[Callable[[str], bool]] = None, max_bytes: Optional[int] = None,
) -> ResolvedModel:
    """A zoo name or alias only (never a path or a URL): the cache, the mirror, or the zoo.

    Args:
        allow: a download (from an http(s) mirror or the zoo) must pass it.
        max_bytes: refuse a larger archive (default: the ``max_archive_size`` setting).

    Raises:
        ModelNotFoundError: not a name the zoo (or the mirror) knows.
    """
    if not MODEL_NAME_PATTERN.match(name):
        raise ModelNotFoundError(f"{name!r} is not a model name")
    return _resolve_name(name, offline=offline, progress=progress, refresh=False, allow=allow, max_bytes=max_bytes)


def pull_model(
    location: str, *, offline: Optional[bool] = None, progress: bool = True, force: bool = False
) -> ResolvedModel:
    """Like :func:`resolve_model`; with *force*, a cached zoo/URL archive is downloaded again."""
    return _resolve(location, offline=offline, progress=progress, refresh=force)


def check_name(name: str) -> None:
    """Refuse a zoo name nothing could resolve, before anything is started for it (``serve start --models``):
    not in the catalog, not cached, and no mirror that may hold it (a mirror folder is looked in).

    Raises:
        ModelNotFoundError: an unknown name, with a did-you-mean where one is close.
    """
    if lookup(name) is not None or cached_model(name) is not None:
        return
    mirror = mirror_url()
    if mirror is not None and _is_url(mirror):
        return  # an http(s) mirror may have names the catalog does not: the download says
    folder = _mirror_folder(mirror) if mirror is not None else None
    if folder is not None and any((folder / f).exists() for f in (f"{name}.mar", f"{name}.model", f"{name}.tar.gz",
                                                                   name)):
        return
    where = "the model zoo" if folder is None else f"the model zoo or the mirror folder {folder}"
    raise ModelNotFoundError(unknown_model_message(name).replace("the model zoo", where),
                             hint="see `mmsctl zoo list` for every name")


def cached_model(location: str) -> Optional[ResolvedModel]:
    """The cached archive for a zoo name, alias or URL, without any network; None if not cached."""
    loc = split_named(location.strip())[1]
    if _is_url(loc):
        path = cache.url_path(loc)
        return ResolvedModel(_url_name(loc), path, "cache", loc) if path.is_file() else None
    entry = lookup(loc)
    filename = entry.filename if entry else f"{loc}.mar"
    path = cache.zoo_path(filename)
    if not path.is_file():
        return None
    meta = cache.read_meta(path)
    return ResolvedModel(entry.name if entry else loc, path, "cache", meta.get("url") or "", entry)


def _is_url(text: str) -> bool:
    return text.lower().startswith(("http://", "https://"))


def _url_name(url: str) -> str:
    return cache.archive_stem(cache.url_path(url).name)


def _resolve(location: str, *, offline: Optional[bool], progress: bool, refresh: bool) -> ResolvedModel:
    loc = location.strip()
    if not loc:
        raise UsageError("empty model location: give a zoo name, a path or a URL")

    where = model_location(loc)
    if where.name is not None:
        return replace(_resolve(where.value, offline=offline, progress=progress, refresh=refresh), name=where.name)

    if where.kind == "url":
        return _resolve_url(loc, offline=offline, progress=progress, refresh=refresh)

    if where.kind == "path":
        path = Path(unquote(urlsplit(loc).path)) if loc.lower().startswith("file://") else Path(loc).expanduser()
        if not path.exists():
            raise InputNotFoundError(f"{path}: no such file or folder")
        return ResolvedModel(cache.archive_stem(path.resolve().name), path, "local", loc)

    if not MODEL_NAME_PATTERN.match(loc):
        raise ModelNotFoundError(f"{loc!r} is not a zoo name, a path or a URL",
                                 hint="a local file or folder is written with a slash: ./NAME")
    try:
        return _resolve_name(loc, offline=offline, progress=progress, refresh=refresh)
    except ModelNotFoundError as exc:
        if where.shadowed is not None:  # the user probably meant the folder here
            exc.hint = f"{where.local_spelling} is a local {_kind(where.shadowed)}: write {where.local_spelling} for it"
        raise


def _kind(path: str) -> str:
    return "folder" if Path(path).is_dir() else "file"


def _resolve_url(url: str, *, offline: Optional[bool], progress: bool, refresh: bool,
                 allow: Optional[Callable[[str], bool]] = None, max_bytes: Optional[int] = None) -> ResolvedModel:
    from mmsctl.zoo.download import Unreachable, download

    name = _url_name(url)
    target = cache.url_path(url)
    if target.is_file() and not refresh:
        return ResolvedModel(name, target, "cache", url)
    if is_offline(offline):
        raise OfflineError(
            f"{url} is not cached and mmsctl is offline (MMSCTL_OFFLINE); "
            "unset it to download, or give a local file"
        )
    try:
        download(url, target, options=_download_options(progress, allow, max_bytes))
    except Unreachable as exc:
        raise OfflineError(f"{exc.message}: {url} is not cached (no network?)") from exc
    return ResolvedModel(name, target, "download", url)


def _offline_message(what: str, filename: str, reason: str, *, folder_only: bool = False) -> str:
    mirror = "a folder" if folder_only else "an http(s) URL or a folder"
    return (
        f"{what} is not cached and {reason}; point MMSCTL_ZOO_URL (or zoo_url in config.toml) "
        f"at a mirror: {mirror} holding {filename}"
    )


def _resolve_name(loc: str, *, offline: Optional[bool], progress: bool, refresh: bool,
                  allow: Optional[Callable[[str], bool]] = None, max_bytes: Optional[int] = None) -> ResolvedModel:
    from mmsctl.zoo.download import Unreachable, download

    entry = lookup(loc)
    name = entry.name if entry else loc
    filename = entry.filename if entry else f"{loc}.mar"
    target = cache.zoo_path(filename)
    if target.is_file() and not refresh:
        return ResolvedModel(name, target, "cache", cache.read_meta(target).get("url") or "", entry)

    mirror = mirror_url()
    if mirror is not None and not _is_url(mirror):
        return _from_folder(_mirror_folder(mirror), loc, name, filename, entry)

    if mirror is not None:
        url = mirror.rstrip("/") + "/" + filename
    elif entry is not None:
        url = entry.url
    else:
        raise ModelNotFoundError(unknown_model_message(loc), hint="see `mmsctl zoo list` for every name")
    if is_offline(offline):
        reason = "mmsctl is offline (MMSCTL_OFFLINE)"
        # Offline refuses http(s) mirrors too: only a folder can help here.
        raise OfflineError(_offline_message(name, filename, reason, folder_only=True),
                           hint=_offline_hint(offline))
    try:
        download(url, target, options=_download_options(progress, allow, max_bytes))
    except Unreachable as exc:
        raise OfflineError(_offline_message(name, filename, exc.message + " (no network?)")) from exc
    except DownloadError as exc:
        if entry is None and " 404 " in exc.message:
            raise ModelNotFoundError(
                unknown_model_message(loc).replace("not in the model zoo", f"not in the mirror {mirror}"),
                hint="see `mmsctl zoo list` for the zoo's names",
            ) from exc
        raise
    return ResolvedModel(name, target, "download", url, entry)


def _offline_hint(offline: Optional[bool]) -> Optional[str]:
    if offline is None:
        return "or unset MMSCTL_OFFLINE (setting `offline`) to download from the MMS model zoo"
    return None


def _mirror_folder(mirror: str) -> Path:
    if mirror.lower().startswith("file://"):
        return Path(unquote(urlsplit(mirror).path))
    return Path(mirror).expanduser()


def _from_folder(
    folder: Path, loc: str, name: str, filename: str, entry: Optional[ZooEntry]
) -> ResolvedModel:
    if not folder.is_dir():
        raise ConfigError(
            f"zoo mirror {folder} is not a folder",
            hint="MMSCTL_ZOO_URL / zoo_url must be an http(s) URL or an existing folder",
        )
    candidates = [filename]
    for extra in (f"{loc}.mar", f"{name}.model", f"{name}.tar.gz", name):
        if extra not in candidates:
            candidates.append(extra)
    for candidate in candidates:
        path = folder / candidate
        if path.exists():
            return ResolvedModel(name, path, "mirror", str(path), entry)
    if entry is None:
        raise ModelNotFoundError(
            unknown_model_message(loc).replace("not in the model zoo", f"not in the mirror folder {folder}"),
            hint="see `mmsctl zoo list` for the zoo's names",
        )
    raise ModelNotFoundError(
        f"{filename} is not in the mirror folder {folder}",
        hint=f"copy {filename} there, or unset MMSCTL_ZOO_URL to use the MMS model zoo",
    )
