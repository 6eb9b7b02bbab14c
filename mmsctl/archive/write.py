"""Writing an archive reproducibly: zip (``.mar``), tarball (``.tar.gz``) or folder, replaced atomically.

Members are sorted, with fixed timestamps and modes (executable or not), so the same
files give the same bytes. Everything is written to a temporary sibling first and
renamed into place, so a failure leaves no half-written archive behind.
"""

from __future__ import annotations

import gzip
import io
import os
import shutil
import tarfile
import zipfile
from pathlib import Path
from typing import Optional

from mmsctl.archive.manifest import MANIFEST_DIR, MANIFEST_PATH
from mmsctl.archive.unpack import temp_sibling
from mmsctl.errors import ArchiveError

__all__ = ["write_archive"]

_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
_CHUNK = 1024 * 1024
_BIG = 1024 * 1024


def _write_zip(target: Path, files: dict[str, Path], manifest: bytes) -> None:
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        entries: dict[str, Optional[Path]] = {**files, MANIFEST_PATH: None}
        for name in sorted(entries):
            info = zipfile.ZipInfo(name, date_time=_ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3  # unix, so the mode bits below mean something
            src = entries[name]
            executable = src is not None and os.access(src, os.X_OK)
            info.external_attr = ((0o100755 if executable else 0o100644) & 0xFFFF) << 16
            if src is None:
                zf.writestr(info, manifest)
                continue
            size = os.path.getsize(src)
            # Weights barely compress, and deflate's higher levels take several times as long on them for
            # a few percent less: big files get level 1 (docs/performance.md).
            info._compresslevel = 1 if size > _BIG else 6  # type: ignore[attr-defined]
            with open(src, "rb") as fh, zf.open(info, "w", force_zip64=size > 2**31) as out:
                shutil.copyfileobj(fh, out, _CHUNK)


def _write_tgz(target: Path, files: dict[str, Path], manifest: bytes, top: str) -> None:
    with open(target, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=1) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tf:
            entries: dict[str, Optional[Path]] = {**files, MANIFEST_PATH: None}
            for name in sorted(entries):
                src = entries[name]
                info = tarfile.TarInfo(f"{top}/{name}")
                info.mtime = 0
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                executable = src is not None and os.access(src, os.X_OK)
                info.mode = 0o755 if executable else 0o644
                if src is None:
                    info.size = len(manifest)
                    tf.addfile(info, io.BytesIO(manifest))
                    continue
                info.size = src.stat().st_size
                with open(src, "rb") as fh:
                    tf.addfile(info, fh)


def _write_folder(target: Path, files: dict[str, Path], manifest: bytes) -> None:
    for name, src in files.items():
        dest = target / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        if os.access(src, os.X_OK):
            dest.chmod(0o755)
    (target / MANIFEST_DIR).mkdir(exist_ok=True)
    (target / MANIFEST_PATH).write_bytes(manifest)


def _replace(tmp: Path, out: Path) -> None:
    """Move *tmp* to *out*, replacing a file or folder already there (``--force`` was checked)."""
    if out.is_dir() and not out.is_symlink():
        old = temp_sibling(out)
        old.rmdir()
        os.rename(out, old)
        os.rename(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, out)


def write_archive(out: Path, archive_format: str, files: dict[str, Path], payload: bytes, name: str) -> None:
    """Write the archive to a temporary sibling, then rename it into place (nothing half-written)."""
    if archive_format == "no-archive":
        tmp = temp_sibling(out)
        writer = lambda: _write_folder(tmp, files, payload)  # noqa: E731
    else:
        tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
        if archive_format == "tgz":
            writer = lambda: _write_tgz(tmp, files, payload, name)  # noqa: E731
        else:
            writer = lambda: _write_zip(tmp, files, payload)  # noqa: E731
    try:
        writer()
        _replace(tmp, out)
    except OSError as exc:
        raise ArchiveError(f"cannot write {out}: {exc.strerror or exc}") from exc
    finally:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        elif tmp.exists():
            tmp.unlink()
