"""Model archives: read and write MMS ``.mar`` (model-archiver 1.0), ``.tar.gz``, folders and legacy ``.model``.

The public API, used by the engine, the server, ``predict`` and ``mmsctl archive``:

* :func:`open_archive` - any archive as an extracted folder plus a :class:`Manifest`;
* :func:`create_archive` - build one from a checkpoint folder or your own handler;
* :func:`import_onnx` - turn an ``.onnx`` file into an MXNet checkpoint folder first;
* :func:`extract_archive` - safe extraction to a folder of your choice;
* :func:`describe_archive` - what ``archive inspect`` shows, without extracting.

Importing this package is light (stdlib only); ONNX and mxnet load only in ``import_onnx``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

from mmsctl.archive.info import ArchiveInfo, describe_archive
from mmsctl.archive.manifest import Manifest, check_model_name, parse_manifest
from mmsctl.archive.model_archive import ArchiveFile, ModelArchive, extract_archive, open_archive
from mmsctl.archive.pack import ARCHIVE_FORMATS, CreatedArchive, create_archive
from mmsctl.archive.unpack import Limits

if TYPE_CHECKING:
    from mmsctl.archive.onnx_import import OnnxImport

__all__ = [
    "ARCHIVE_FORMATS",
    "ArchiveFile",
    "ArchiveInfo",
    "CreatedArchive",
    "Limits",
    "Manifest",
    "ModelArchive",
    "check_model_name",
    "create_archive",
    "describe_archive",
    "extract_archive",
    "import_onnx",
    "open_archive",
    "parse_manifest",
]


def import_onnx(
    onnx_file: Path | str, out_dir: Path, *, prefix: str = "model", synset: Optional[Path] = None
) -> OnnxImport:
    """Lazy alias of :func:`mmsctl.archive.onnx_import.import_onnx` (keeps onnx/mxnet out of imports)."""
    from mmsctl.archive.onnx_import import import_onnx as _impl

    return _impl(onnx_file, out_dir, prefix=prefix, synset=synset)
