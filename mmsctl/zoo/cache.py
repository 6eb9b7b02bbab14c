"""The download cache: where fetched archives live, and how files land there atomically.

Layout under ``mmsctl.config.cache_dir()/archives`` (``cache_dir()/extracted`` holds
the unpacked copies, see :mod:`mmsctl.archive.model_archive`)::

    squeezenet_v1.1.mar               a zoo archive, by its file name
    squeezenet_v1.1.mar.meta.json     where it came from, size, sha256, when
    urls/<sha256(url)[:16]>/x.mar     an archive fetched from an explicit URL
    .squeezenet_v1.1.mar.<pid>.<rand>.part   a download in progress

A download writes a ``.part`` file beside its target and renames it into place
with ``os.replace`` only when complete, so a cut connection, a Ctrl-C or a
crash never leaves a half archive under the real name. ``.part`` files of dead
processes are swept by the next download of the same file and by ``zoo clean``.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

from mmsctl.atomic import write_atomic
from mmsctl.config import cache_dir
from mmsctl import names

__all__ = [
    "ARCHIVE_SUFFIXES",
    "CacheEntry",
    "archive_stem",
    "archives_dir",
    "clean",
    "entries",
    "new_part_file",
    "publish",
    "read_meta",
    "remove",
    "sweep_parts",
    "url_path",
    "zoo_path",
]

#: File endings of the archive forms mmsctl reads.
ARCHIVE_SUFFIXES = names.ARCHIVE_SUFFIXES
_META = ".meta.json"
_PART = ".part"


@dataclass
class CacheEntry:
    """One archive in the cache."""

    name: str
    path: Path
    size: int
    url: Optional[str] = None
    sha256: Optional[str] = None
    downloaded_at: Optional[float] = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["path"] = str(self.path)
        return data


def archives_dir() -> Path:
    """The folder holding cached archives (created on demand by writers, not here)."""
    return cache_dir() / "archives"


def zoo_path(filename: str) -> Path:
    """Where a zoo or mirror archive called *filename* is cached."""
    return archives_dir() / filename


def url_path(url: str) -> Path:
    """Where the archive at an explicit URL is cached (keyed by the URL, keeping its file name)."""
    key = hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]
    basename = url.split("?", 1)[0].split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1] or "archive.mar"
    return archives_dir() / "urls" / key / basename


def archive_stem(filename: str) -> str:
    """``resnet-18.mar`` → ``resnet-18``; ``x.tar.gz`` → ``x``."""
    lower = filename.lower()
    for suffix in ARCHIVE_SUFFIXES:
        if lower.endswith(suffix):
            return filename[: -len(suffix)]
    return filename


def _meta_path(path: Path) -> Path:
    return path.with_name(path.name + _META)


def read_meta(path: Path) -> dict[str, Any]:
    """The metadata saved beside a cached archive (empty if none or unreadable)."""
    try:
        data = json.loads(_meta_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def new_part_file(target: Path) -> Path:
    """A fresh, private ``.part`` path beside *target* (its folder is created)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    sweep_parts(target)
    return target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}{_PART}")


def publish(part: Path, target: Path, *, url: Optional[str], sha256: Optional[str]) -> Path:
    """Move a complete ``.part`` file to *target* atomically and record where it came from."""
    os.replace(part, target)
    meta = {
        "url": url,
        "sha256": sha256,
        "size": target.stat().st_size,
        "downloaded_at": time.time(),
    }
    write_atomic(_meta_path(target), json.dumps(meta, indent=2))
    return target


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def _part_pid(part: Path) -> Optional[int]:
    # .<name>.<pid>.<rand>.part
    pieces = part.name[: -len(_PART)].rsplit(".", 2)
    if len(pieces) != 3:
        return None
    try:
        return int(pieces[1])
    except ValueError:
        return None


def sweep_parts(target: Optional[Path] = None) -> int:
    """Remove ``.part`` files left by dead processes (for *target*, or everywhere). Returns bytes freed."""
    root = archives_dir()
    if target is not None:
        candidates: Iterator[Path] = target.parent.glob(f".{_glob_escape(target.name)}.*{_PART}")
    elif root.is_dir():
        candidates = root.rglob(f"*{_PART}")
    else:
        return 0
    freed = 0
    for part in candidates:
        pid = _part_pid(part)
        if pid is not None and _pid_alive(pid):
            continue
        try:
            size = part.stat().st_size
            part.unlink()
            freed += size
        except OSError:
            pass
    return freed


def _glob_escape(text: str) -> str:
    import glob

    return glob.escape(text)


def _is_archive_file(path: Path) -> bool:
    name = path.name
    return (
        path.is_file()
        and not name.startswith(".")
        and not name.endswith(_META)
        and not name.endswith(_PART)
    )


def entries() -> list[CacheEntry]:
    """Every archive in the cache, sorted by name."""
    root = archives_dir()
    if not root.is_dir():
        return []
    found: list[CacheEntry] = []
    for path in root.rglob("*"):
        if not _is_archive_file(path):
            continue
        meta = read_meta(path)
        found.append(
            CacheEntry(
                name=archive_stem(path.name),
                path=path,
                size=path.stat().st_size,
                url=meta.get("url"),
                sha256=meta.get("sha256"),
                downloaded_at=meta.get("downloaded_at"),
            )
        )
    found.sort(key=lambda e: (e.name.casefold(), str(e.path)))
    return found


def remove(path: Path, *, extracted: bool = True) -> int:
    """Delete one cached archive and its metadata (and, with *extracted*, the copy
    ``predict``/``serve`` extracted from it); returns the bytes freed."""
    freed = 0
    if extracted:
        from mmsctl.archive.model_archive import clean_extracted, extracted_copy

        copy = extracted_copy(path)
        if copy is not None:
            freed += clean_extracted(copy)[1]
    for victim in (path, _meta_path(path)):
        try:
            freed += victim.stat().st_size
            victim.unlink()
        except FileNotFoundError:
            pass
    parent = path.parent
    if parent != archives_dir() and archives_dir() in parent.parents:
        try:
            parent.rmdir()  # an emptied urls/<key>/ folder
        except OSError:
            pass
    return freed


def clean(*, extracted: bool = True) -> tuple[int, int, int]:
    """Empty the archive cache (parts of live downloads excepted).

    Returns:
        (archives removed, extracted copies removed, bytes freed).

    With *extracted*, the extracted copies of every archive ``predict`` or ``serve``
    opened go too (``<cache>/extracted``): they are most of the disk a cache uses.
    """
    removed = copies = freed = 0
    for entry in entries():
        freed += remove(entry.path, extracted=False)
        removed += 1
    if extracted:
        from mmsctl.archive.model_archive import clean_extracted

        copies, size = clean_extracted()
        freed += size
    freed += sweep_parts()
    urls = archives_dir() / "urls"
    if urls.is_dir():
        for folder in urls.iterdir():
            if folder.is_dir() and not any(folder.iterdir()):
                shutil.rmtree(folder, ignore_errors=True)
    return removed, copies, freed
