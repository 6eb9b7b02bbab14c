"""The model as SageMaker takes it: ``model.tar.gz`` (a model's ``ModelDataUrl``), and unpacking it as SageMaker does.

Any archive mmsctl reads (a zoo name, a ``.mar``, a ``.tar.gz``, an extracted folder with its manifest) is
packed into the archive format's ``tgz`` (``archive create --archive-format tgz``'s: the files and
``MAR-INF/MANIFEST.json`` under ``NAME/``), reproducibly (sorted members, fixed times and owners, gzip
without a timestamp): the same model gives the same bytes, so ``deploy`` uploads it only when its sha256
changed. SageMaker extracts it into ``/opt/ml/model``; the ``serve`` entry finds the manifest one folder down.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from mmsctl.cloud.aws.asset_bucket import sha256_of
from mmsctl.errors import UsageError

__all__ = ["FILE_NAME", "ModelData", "pack", "unpack"]

#: The object's file name (what SageMaker's documentation and its SDKs call it).
FILE_NAME = "model.tar.gz"


@dataclass(frozen=True)
class ModelData:
    """A packed ``model.tar.gz``."""

    path: Path
    #: The model's name (its manifest's), what ``/invocations`` serves.
    name: str
    sha256: str
    size: int


def _files(root: Path) -> dict[str, Path]:
    """The archive's files by their path inside it, the manifest left out (the writer adds it)."""
    from mmsctl.archive.manifest import MANIFEST_PATH

    found = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            raise UsageError(f"{path}: a symbolic link cannot go into model.tar.gz")
        if path.is_file() and rel != MANIFEST_PATH and "__pycache__" not in rel.split("/"):
            found[rel] = path
    return found


def pack(model: str, out: Path) -> ModelData:
    """Pack MODEL (zoo name, archive or folder with a manifest) as *out* (a ``model.tar.gz``).

    Raises:
        UsageError: the model has no MMS 1.x manifest (a bare checkpoint folder, a legacy ``.model``).
        ModelNotFoundError, InputNotFoundError, ArchiveError, DownloadError: it cannot be found or read.
    """
    from mmsctl.archive import open_archive
    from mmsctl.archive.manifest import MANIFEST_PATH
    from mmsctl.archive.write import write_archive
    from mmsctl.zoo import resolve_model

    archive = open_archive(resolve_model(model, progress=False).path)
    manifest = archive.root / MANIFEST_PATH
    if not archive.has_manifest or archive.manifest.legacy or not manifest.is_file():
        raise UsageError(f"{model} has no MAR-INF/MANIFEST.json to serve it by",
                         hint=f"make an archive first: mmsctl archive create {model}")
    name = archive.manifest.model_name
    write_archive(Path(out), "tgz", _files(archive.root), manifest.read_bytes(), name)
    return ModelData(Path(out), name, sha256_of(Path(out)), Path(out).stat().st_size)


def unpack(packed: Path, folder: Path) -> Path:
    """Extract *packed* into *folder* as SageMaker extracts ``model.tar.gz`` into ``/opt/ml/model`` (layout kept:
    no folder level dropped), safely (no member outside, no link, bounded by the archive limits).

    Raises:
        ArchiveError, UnsafeArchiveError: not a readable, safe tarball.
    """
    from mmsctl.archive.unpack import Limits, extract_into

    folder = Path(folder)
    tmp = extract_into(Path(packed), "tgz", folder.parent, Limits.from_settings())
    if folder.exists():
        shutil.rmtree(folder)
    os.rename(tmp, folder)
    return folder

