"""Open any model archive as a folder plus a manifest: what the engine, server and predict use.

``open_archive`` accepts what MMS accepts: a ``.mar`` (zip with
``MAR-INF/MANIFEST.json``), model-archiver's ``.tar.gz`` (the same files under
a ``<model-name>/`` folder), an extracted folder (``--archive-format
no-archive``), and a legacy MMS 0.4 ``.model`` (zip with a root
``MANIFEST.json``). Archives are extracted once into the cache
(``<cache>/extracted/<key>``, the key a SHA-256 of the archive's bytes), so an
archive replaced by another with the same path, size and modification time is
extracted again, and the second open of an unchanged one costs one read of it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Optional

from mmsctl.archive.legacy import LEGACY_MANIFEST_NAME
from mmsctl.archive.manifest import MANIFEST_DIR, MANIFEST_NAME, MANIFEST_PATH, Manifest, parse_manifest
from mmsctl.archive.unpack import ArchiveFormat, Limits, detect_format, extract_into
from mmsctl.engine.spec import ServiceSpec
from mmsctl.errors import AlreadyExistsError, ArchiveError, InputNotFoundError, UsageError

__all__ = [
    "ArchiveFile",
    "ModelArchive",
    "clean_extracted",
    "extract_archive",
    "extracted_copy",
    "find_root",
    "open_archive",
    "stem_of",
]

_MARKER = ".mmsctl-extracted"
_IGNORED_DIRS = {"__MACOSX", "__pycache__"}


@dataclass(frozen=True)
class ArchiveFile:
    """One file of an archive: path relative to the archive root, and size in bytes."""

    path: str
    size: int


@dataclass(frozen=True)
class ModelArchive:
    """An archive ready to load: where it came from, the folder holding its files, its manifest.

    ``format`` is ``mar``, ``tgz``, ``folder`` or ``legacy``; ``has_manifest``
    is False for a folder or zip without one (MMS then names the model after
    the folder, and so do we).
    """

    source: Path
    root: Path
    manifest: Manifest
    format: str = "mar"
    has_manifest: bool = True

    @property
    def model_name(self) -> str:
        return self.manifest.model_name

    @property
    def handler(self) -> Optional[str]:
        return self.manifest.handler

    def service_spec(
        self, *, name: Optional[str] = None, handler: Optional[str] = None, batch_size: int = 1,
        gpu_id: Optional[int] = None,
    ) -> ServiceSpec:
        """What a process needs to load this archive (:func:`mmsctl.engine.service.load_service`).

        Args:
            name: the name requests use (default: the manifest's model name).
            handler: a handler chosen instead of the archive's (``--handler``).
            batch_size, gpu_id: how the model runs.
        """
        return ServiceSpec(
            root=self.root,
            model_name=name or self.model_name,
            handler=self.handler,
            handler_override=handler,
            legacy=self.manifest.legacy,
            manifest=self.manifest.to_dict(),
            batch_size=batch_size,
            gpu_id=gpu_id,
        )

    @property
    def signature_file(self) -> str:
        """``signature.json``, or the name a legacy manifest gives."""
        legacy = self.manifest.legacy_model or {}
        return str(legacy.get("Signature") or "signature.json")

    @property
    def signature(self) -> Optional[dict[str, Any]]:
        """The parsed signature (input names and shapes), or None if the archive has none.

        Raises:
            ArchiveError: the file is there but is not a JSON object.
        """
        path = self.root / self.signature_file
        try:
            raw = path.read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            return None
        return parse_signature(raw, where=f"{self.source}: {self.signature_file}")

    def files(self) -> list[ArchiveFile]:
        """Every file under the root, sorted (the manifest included)."""
        out = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = sorted(d for d in dirnames if d not in _IGNORED_DIRS)
            for name in filenames:
                if name == _MARKER:
                    continue
                full = Path(dirpath) / name
                out.append(ArchiveFile(full.relative_to(self.root).as_posix(), full.stat().st_size))
        return sorted(out, key=lambda f: f.path)


def parse_signature(raw: bytes, *, where: str) -> dict[str, Any]:
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ArchiveError(f"{where}: not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ArchiveError(f"{where}: not a JSON object")
    return data


def stem_of(path: Path) -> str:
    """``squeezenet.mar`` -> ``squeezenet``; ``resnet.tar.gz`` -> ``resnet``."""
    name = path.name
    for suffix in (".tar.gz", ".tgz", ".mar", ".model", ".zip"):
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def find_root(folder: Path) -> Path:
    """The folder that holds the manifest: *folder*, or its only sub-folder (tgz, zipped folders)."""
    if (folder / MANIFEST_DIR / MANIFEST_NAME).is_file() or (folder / LEGACY_MANIFEST_NAME).is_file():
        return folder
    entries = [e for e in folder.iterdir() if e.name not in _IGNORED_DIRS and not e.name.startswith(".")]
    if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink():
        return entries[0]
    return folder


def _read_manifest(root: Path, source: Path) -> tuple[Manifest, bool]:
    for rel in (MANIFEST_PATH, LEGACY_MANIFEST_NAME):
        path = root / rel
        if path.is_file():
            return parse_manifest(path.read_bytes(), where=f"{source}: {rel}"), True
    empty = Manifest(
        model_name=root.name if source.is_dir() else stem_of(source),
        model_server_version=None,
        implementation_version=None,
        specification_version=None,
    )
    return empty, False


def _load(source: Path, root: Path, fmt: ArchiveFormat) -> ModelArchive:
    manifest, has = _read_manifest(root, source)
    kind = {"zip": "mar", "tgz": "tgz", "folder": "folder"}[fmt]
    if manifest.legacy:
        kind = "legacy"
    return ModelArchive(source=source, root=root, manifest=manifest, format=kind, has_manifest=has)


def _content_key(fh: IO[bytes]) -> str:
    """The cache key of an open archive: a SHA-256 of its bytes (the file is left rewound)."""
    fh.seek(0)
    digest = hashlib.sha256()
    for chunk in iter(lambda: fh.read(1024 * 1024), b""):
        digest.update(chunk)
    fh.seek(0)
    return digest.hexdigest()[:32]


def _cache_key(source: Path) -> str:
    with open(source, "rb") as fh:
        return _content_key(fh)


def _extracted_dir() -> Path:
    from mmsctl.config import cache_dir

    return cache_dir() / "extracted"


def extracted_copy(source: Path) -> Optional[Path]:
    """The cached extraction of archive file *source*, if there is one (for ``zoo rm``)."""
    try:
        target = _extracted_dir() / _cache_key(Path(source))
    except OSError:
        return None
    return target if target.is_dir() else None


def _tree_size(folder: Path) -> int:
    total = 0
    for path in folder.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink():
                total += path.stat().st_size
        except OSError:
            pass
    return total


def _live_tmp(folder: Path) -> bool:
    """A ``.extract.tmp-<pid>-<rand>`` folder of an extraction still running."""
    if not folder.name.startswith("."):
        return False
    try:
        pid = int(folder.name.rsplit(".tmp-", 1)[1].split("-", 1)[0])
        os.kill(pid, 0)
    except (IndexError, ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def clean_extracted(only: Optional[Path] = None) -> tuple[int, int]:
    """Delete cached extractions (all, or just *only*): returns (folders, bytes freed).

    Every changed archive gets a new extraction (the key is its content), so
    without this the cache only grows. Half-made ``tmp`` folders of
    interrupted extractions go too.
    """
    root = _extracted_dir()
    if only is not None:
        folders = [only] if only.is_dir() and root in only.parents else []
    else:
        folders = [p for p in root.iterdir() if p.is_dir() and not _live_tmp(p)] if root.is_dir() else []
    count = freed = 0
    for folder in folders:
        size = _tree_size(folder)
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            count += 1
            freed += size
    return count, freed


def _place(tmp: Path, target: Path) -> None:
    """Rename *tmp* to *target*; if another process got there first, keep theirs."""
    try:
        os.rename(tmp, target)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not target.is_dir():
            raise


def open_archive(
    location: Path | str, *, workdir: Optional[Path] = None, limits: Optional[Limits] = None
) -> ModelArchive:
    """Open a ``.mar``, ``.model``, ``.tar.gz`` or folder, extracting it safely if needed.

    Args:
        location: the archive file or folder.
        workdir: extract here instead of the cache; reused if it already holds
            this archive, refused if it holds anything else.
        limits: caps against archive bombs (default: :meth:`Limits.from_settings`).

    Returns:
        The archive, with ``root`` the folder holding its files.

    Raises:
        InputNotFoundError: *location* does not exist.
        ArchiveError: not an archive, corrupt, or a bad manifest.
        UnsafeArchiveError: a member that escapes, a link, or a bomb.

    Example:
        >>> archive = open_archive(Path("squeezenet.mar"))
        >>> archive.model_name, archive.handler
        ('squeezenet', 'mmsctl_vision_service:handle')
    """
    source = Path(location).expanduser()
    if not source.exists():
        raise InputNotFoundError(f"{source}: no such file or folder")
    fmt = detect_format(source)
    if fmt == "folder":
        return _load(source, find_root(source), fmt)
    try:
        fh = open(source, "rb")
    except OSError as exc:
        raise ArchiveError(f"{source}: cannot read: {exc.strerror}") from exc
    with fh:  # hashed and extracted from this one open file: what is keyed is what is extracted
        key = _content_key(fh)
        if workdir is None:
            target = _extracted_dir() / key
        else:
            target = Path(workdir)
            marker = target / _MARKER
            if target.is_dir() and any(target.iterdir()):
                if marker.is_file() and marker.read_text().strip() == key:
                    return _load(source, find_root(target), fmt)
                raise ArchiveError(f"{target}: folder is not empty; cannot extract {source.name} there")
        if not target.is_dir():
            tmp = extract_into(source, fmt, target.parent, limits or Limits.from_settings(), fileobj=fh)
            if workdir is not None:
                (tmp / _MARKER).write_text(key + "\n")
                if target.is_dir():
                    target.rmdir()
            _place(tmp, target)
    return _load(source, find_root(target), fmt)


def extract_archive(
    location: Path | str,
    dest: Optional[Path] = None,
    *,
    force: bool = False,
    limits: Optional[Limits] = None,
) -> ModelArchive:
    """Extract an archive into *dest* (default ``./<model-name>``) with the manifest at its top.

    model-archiver's tgz keeps its files under ``<model-name>/``; that folder
    level is dropped, so ``dest/MAR-INF/MANIFEST.json`` always exists for a
    1.0 archive. Nothing is left behind on failure, and an existing *dest* is
    replaced only with *force*.

    Raises:
        InputNotFoundError, ArchiveError, UnsafeArchiveError: as for :func:`open_archive`.
        UsageError: *location* is already a folder.
    """
    source = Path(location).expanduser()
    if not source.exists():
        raise InputNotFoundError(f"{source}: no such file or folder")
    fmt = detect_format(source)
    if fmt == "folder":
        raise UsageError(f"{source} is a folder already; there is nothing to extract")
    if dest is None:
        dest = Path.cwd() / stem_of(source)
    dest = Path(dest).expanduser()
    if dest.exists() and not (dest.is_dir() and not any(dest.iterdir())) and not force:
        raise AlreadyExistsError(f"{dest} already exists", hint="pass force=True to replace it")
    if dest.exists() and not dest.is_dir() and force:
        raise ArchiveError(f"{dest} exists and is not a folder; remove it first")
    tmp = extract_into(source, fmt, dest.parent, limits or Limits.from_settings())
    try:
        root = find_root(tmp)
        archive = _load(source, root, fmt)  # validates the manifest before anything moves
        trash = None
        if dest.exists():
            trash = dest.parent / f".{dest.name}.old-{os.getpid()}"
            os.rename(dest, trash)
        os.rename(root, dest)
        if trash is not None:
            shutil.rmtree(trash, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return ModelArchive(
        source=source, root=dest, manifest=archive.manifest, format=archive.format, has_manifest=archive.has_manifest
    )
