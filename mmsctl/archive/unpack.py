"""Safe extraction of zip (``.mar``, ``.model``) and tar.gz archives.

Archives come from the internet (the zoo, ``models register --url``), so every
member is checked before a byte is written: no absolute paths or ``..`` that
would escape the target (zip-slip), no symlinks, hardlinks or devices, no
duplicate names, and no zip bombs (a cap on the total size, the member count
and the compression ratio of big members). Extraction always goes into a fresh
temporary sibling of the target, renamed into place at the end, so a failure
never leaves a half-extracted folder behind.
"""

from __future__ import annotations

import os
import shutil
import stat
import tarfile
import uuid
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Callable, Iterator, Literal, Optional

from mmsctl.archive.headers import check_zip_directory, open_tgz
from mmsctl.archive.inflate import Reader, open_member
from mmsctl.errors import ArchiveError, InputNotFoundError, UnsafeArchiveError

__all__ = [
    "DEFAULT_LIMITS",
    "ArchiveFormat",
    "Limits",
    "Member",
    "detect_format",
    "extract_into",
    "iter_members",
    "read_member",
    "safe_member_path",
    "temp_sibling",
]

#: ``zip`` covers ``.mar`` and legacy ``.model``; ``tgz`` is model-archiver's ``--archive-format tgz``.
ArchiveFormat = Literal["zip", "tgz", "folder"]

_GIB = 1024**3
_MIB = 1024**2
_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """Caps against archive bombs. The defaults fit any real model (VGG-19 is 550 MiB).

    ``max_total_bytes`` and ``max_members`` are settings (``max_archive_size``,
    ``max_archive_members``: ``MMSCTL_MAX_ARCHIVE_SIZE`` / config.toml for the CLI,
    config.properties for the server); the ratio is fixed.
    """

    max_total_bytes: int = 8 * _GIB
    max_members: int = 10_000
    #: uncompressed/compressed size above which an archive (and any member) is refused ...
    max_ratio: float = 200.0
    #: ... once it is bigger than this (small files such as JSON compress well)
    ratio_floor: int = 16 * _MIB

    @classmethod
    def from_settings(cls) -> "Limits":
        """The defaults, with ``max_archive_size`` / ``max_archive_members`` from the user's settings."""
        from mmsctl.config import setting
        from mmsctl.errors import ConfigError

        values = {}
        for key, field in (("max_archive_size", "max_total_bytes"), ("max_archive_members", "max_members")):
            raw = setting(key)
            if raw is None or raw.strip() == "":
                continue
            try:
                values[field] = int(raw.strip())
            except ValueError:
                raise ConfigError(f"setting {key}={raw!r} is not a whole number") from None
            if values[field] < 1:
                raise ConfigError(f"setting {key}={raw!r} must be at least 1")
        return cls(**values)


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class Member:
    """One archive entry, already checked: a safe relative path, its size, and whether it is a folder."""

    path: str
    size: int
    is_dir: bool
    executable: bool = False


def detect_format(path: Path) -> ArchiveFormat:
    """Tell a zip, a gzip'd tar and a folder apart by content, not by file name.

    Raises:
        InputNotFoundError: *path* does not exist.
        ArchiveError: neither of the three.
    """
    if path.is_dir():
        return "folder"
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except FileNotFoundError:
        raise InputNotFoundError(f"{path}: no such file or folder") from None
    except OSError as exc:
        raise ArchiveError(f"{path}: cannot read: {exc.strerror}") from exc
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return "zip"
    if head[:2] == b"\x1f\x8b":
        return "tgz"
    raise ArchiveError(
        f"{path}: not a model archive (expected a .mar/.model zip, a .tar.gz or a folder)"
    )


def safe_member_path(name: str) -> str:
    """The member's path relative to the target, or UnsafeArchiveError if it would escape.

    Backslashes count as separators (archives made on Windows); ``.`` parts are
    dropped. Returns "" for the archive root itself.
    """
    if "\x00" in name:
        raise UnsafeArchiveError(f"unsafe archive member {name!r}: NUL in the name")
    text = name.replace("\\", "/")
    if text.startswith("/") or (len(text) > 1 and text[1] == ":" and text[0].isalpha()):
        raise UnsafeArchiveError(f"unsafe archive member {name!r}: absolute path")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeArchiveError(f"unsafe archive member {name!r}: '..' escapes the target folder")
    return str(PurePosixPath(*parts)) if parts else ""


def _check_budget(total: int, count: int, limits: Limits, source: Path, compressed: int) -> None:
    if count > limits.max_members:
        raise UnsafeArchiveError(
            f"{source}: more than {limits.max_members} members (max_archive_members; archive bomb?)")
    if total > limits.max_total_bytes:
        raise UnsafeArchiveError(
            f"{source}: extracts to more than {_size(limits.max_total_bytes)} (max_archive_size; archive bomb?)"
        )
    if total > limits.ratio_floor and total > limits.max_ratio * compressed:
        raise UnsafeArchiveError(
            f"{source}: compression ratio over {limits.max_ratio:.0f}:1 (archive bomb?)"
        )


def _size(n: int) -> str:
    for unit, scale in (("GiB", _GIB), ("MiB", _MIB), ("KiB", 1024)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} bytes"


def _zip_members(zf: zipfile.ZipFile, source: Path, limits: Limits) -> Iterator[tuple[Member, zipfile.ZipInfo]]:
    seen: set[str] = set()
    total = 0
    infos = zf.infolist()
    compressed = max(_file_size(zf.fp, source), 1)
    # The central directory declares every size: the whole archive is judged before a byte is written
    # (and no member may write more than it declares).
    declared = sum(info.file_size for info in infos if not info.is_dir())
    _check_budget(declared, len(infos), limits, source, compressed)
    for info in infos:
        path = safe_member_path(info.filename)
        mode = (info.external_attr >> 16) & 0xFFFF
        kind = stat.S_IFMT(mode)
        if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
            what = "symlink" if kind == stat.S_IFLNK else "special file"
            raise UnsafeArchiveError(f"unsafe archive member {info.filename!r}: {what}")
        is_dir = info.is_dir()
        if not path:
            continue
        if path in seen:
            raise UnsafeArchiveError(f"unsafe archive member {info.filename!r}: duplicate name")
        seen.add(path)
        if not is_dir:
            total += info.file_size
            _check_budget(total, len(infos), limits, source, compressed)
            if info.file_size > limits.ratio_floor and info.file_size > limits.max_ratio * max(
                info.compress_size, 1
            ):
                raise UnsafeArchiveError(
                    f"unsafe archive member {info.filename!r}: compression ratio over "
                    f"{limits.max_ratio:.0f}:1 (zip bomb?)"
                )
        yield Member(path, info.file_size, is_dir, bool(mode & 0o111) and not is_dir), info


def _tar_members(tf: tarfile.TarFile, source: Path, limits: Limits) -> Iterator[tuple[Member, tarfile.TarInfo]]:
    seen: set[str] = set()
    total = 0
    count = 0
    compressed = max(_file_size(tf.fileobj, source), 1)
    # A first pass over the headers judges the whole archive before a byte is written; it stops at
    # the first cap passed, so the headers tarfile keeps stay bounded by max_archive_members.
    for info in tf:
        count += 1
        total += info.size if info.isreg() else 0
        _check_budget(total, count, limits, source, compressed)
    total = count = 0
    for info in tf.getmembers():
        count += 1
        path = safe_member_path(info.name)
        if info.issym() or info.islnk():
            kind = "symlink" if info.issym() else "hardlink"
            raise UnsafeArchiveError(f"unsafe archive member {info.name!r}: {kind} to {info.linkname!r}")
        if not (info.isreg() or info.isdir()):
            raise UnsafeArchiveError(f"unsafe archive member {info.name!r}: device, fifo or special file")
        if not path:
            continue
        if path in seen:
            raise UnsafeArchiveError(f"unsafe archive member {info.name!r}: duplicate name")
        seen.add(path)
        if info.isreg():
            total += info.size
        _check_budget(total, count, limits, source, compressed)
        yield Member(path, info.size, info.isdir(), bool(info.mode & 0o111) and info.isreg()), info


def _file_size(fileobj: object, source: Path) -> int:
    """The size of the open archive file (the one read, not whatever the path names now)."""
    raw = getattr(fileobj, "fileobj", None) or fileobj  # a GzipFile wraps the real file
    try:
        return os.fstat(raw.fileno()).st_size  # type: ignore[union-attr]
    except (AttributeError, OSError, ValueError):
        try:
            return source.stat().st_size
        except OSError:
            return 0


def iter_members(source: Path, fmt: ArchiveFormat, limits: Limits = DEFAULT_LIMITS) -> list[Member]:
    """List and check an archive's members without extracting anything."""
    with _open(source, fmt, limits=limits) as handle:
        if isinstance(handle, zipfile.ZipFile):
            return [m for m, _ in _zip_members(handle, source, limits)]
        return [m for m, _ in _tar_members(handle, source, limits)]


def read_member(source: Path, fmt: ArchiveFormat, wanted: set[str], max_bytes: int = 16 * _MIB) -> dict[str, bytes]:
    """Read a few small members (manifest, signature) by path, without extracting."""
    found: dict[str, bytes] = {}
    with _open(source, fmt) as handle:
        if isinstance(handle, zipfile.ZipFile):
            for member, info in _zip_members(handle, source, DEFAULT_LIMITS):
                if member.path in wanted and not member.is_dir and member.size <= max_bytes:
                    found[member.path] = _guard(lambda: handle.read(info), source)
        else:
            for member, tinfo in _tar_members(handle, source, DEFAULT_LIMITS):
                if member.path in wanted and not member.is_dir and member.size <= max_bytes:
                    fh = handle.extractfile(tinfo)
                    assert fh is not None
                    found[member.path] = _guard(fh.read, source)
    return found


class _Opened:
    """Open a zip or tar.gz (by path, or an already open file), turning the libraries' errors into ArchiveError.

    Headers are bounded before the libraries read them (:mod:`mmsctl.archive.headers`).
    """

    def __init__(self, source: Path, fmt: ArchiveFormat, fileobj: Optional[IO[bytes]] = None,
                 limits: Limits = DEFAULT_LIMITS) -> None:
        self.source = source
        self.fmt = fmt
        self.fileobj = fileobj
        self.limits = limits
        self.handle: Optional[zipfile.ZipFile | tarfile.TarFile] = None
        self.owned: Optional[IO[bytes]] = None

    def __enter__(self) -> zipfile.ZipFile | tarfile.TarFile:
        try:
            if self.fileobj is not None:
                self.fileobj.seek(0)
            if self.fmt == "zip":
                fh = self.fileobj or self._own()
                check_zip_directory(fh, str(self.source), self.limits.max_members)
                fh.seek(0)
                self.handle = zipfile.ZipFile(fh)
            else:
                self.handle = open_tgz(str(self.source) if self.fileobj is None else None, self.fileobj,
                                       str(self.source))
        except FileNotFoundError:
            self._close_owned()
            raise InputNotFoundError(f"{self.source}: no such file") from None
        except (zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error, OSError) as exc:
            self._close_owned()
            raise ArchiveError(f"{self.source}: corrupt or truncated archive: {exc}") from exc
        except BaseException:
            self._close_owned()
            raise
        return self.handle

    def _own(self) -> IO[bytes]:
        self.owned = open(self.source, "rb")
        return self.owned

    def _close_owned(self) -> None:
        if self.owned is not None:
            self.owned.close()
            self.owned = None

    def __exit__(self, exc_type: object, exc: Optional[BaseException], tb: object) -> None:
        if self.handle is not None:
            self.handle.close()
        self._close_owned()
        if isinstance(exc, (zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error)):
            raise ArchiveError(f"{self.source}: corrupt or truncated archive: {exc}") from exc


def _open(source: Path, fmt: ArchiveFormat, fileobj: Optional[IO[bytes]] = None,
          limits: Limits = DEFAULT_LIMITS) -> _Opened:
    return _Opened(source, fmt, fileobj, limits)


def _guard(read: Callable[[], bytes], source: Path) -> bytes:
    try:
        return read()
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error) as exc:
        raise ArchiveError(f"{source}: corrupt or truncated archive: {exc}") from exc


def _write(src: Reader, dest: Path, size: int, executable: bool) -> None:
    """Copy exactly *size* bytes; never follow anything already at *dest*."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(dest, flags, 0o755 if executable else 0o644)
    written = 0
    with os.fdopen(fd, "wb") as out:
        while True:
            chunk = src.read(_CHUNK)
            if not chunk:
                break
            written += len(chunk)
            if written > size:
                raise UnsafeArchiveError(f"archive member {dest.name!r} is bigger than it says (archive bomb?)")
            out.write(chunk)


def _extract(source: Path, fmt: ArchiveFormat, target: Path, limits: Limits,
             fileobj: Optional[IO[bytes]] = None) -> None:
    with _open(source, fmt, fileobj, limits) as handle:
        if isinstance(handle, zipfile.ZipFile):
            for member, info in _zip_members(handle, source, limits):
                dest = target / member.path
                if member.is_dir:
                    dest.mkdir(parents=True, exist_ok=True)
                    continue
                with open_member(handle, info) as src:
                    _write(src, dest, member.size, member.executable)
        else:
            for member, tinfo in _tar_members(handle, source, limits):
                dest = target / member.path
                if member.is_dir:
                    dest.mkdir(parents=True, exist_ok=True)
                    continue
                fh = handle.extractfile(tinfo)
                assert fh is not None
                _write(fh, dest, member.size, member.executable)


def temp_sibling(target: Path) -> Path:
    """A fresh folder beside *target* (same file system, so the final rename is atomic)."""
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir(parents=True)
    return tmp


def extract_into(source: Path, fmt: ArchiveFormat, parent_of_target: Path, limits: Limits = DEFAULT_LIMITS,
                 *, fileobj: Optional[IO[bytes]] = None) -> Path:
    """Extract *source* into a new temporary folder inside *parent_of_target* and return it.

    With *fileobj* (*source* already open), that file is read, so what was checked or hashed
    before is what is extracted even if the path is replaced meanwhile. The caller renames the
    folder into place; on any error the temporary folder is removed.
    """
    parent_of_target.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(parent_of_target / "extract")
    try:
        _extract(source, fmt, tmp, limits, fileobj)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ArchiveError(f"{source}: corrupt or truncated archive: {exc}") from exc
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ArchiveError(f"{source}: cannot extract: {exc.strerror or exc}") from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return tmp
