"""MMS's Python API for archives that import it, where MMS itself is not installed.

Handlers written for MMS import its package: legacy 0.x services subclass
``mms.model_service.mxnet_model_service.SingleNodeService`` (or ``MXNetBaseService``,
``mms.model_service.mxnet_vision_service.MXNetVisionService``…), and 1.x handlers raise
``mms.service.PredictionException``. The folder of this package holds a package named ``mms`` that
implements that API for mmsctl's engine (written from MMS 1.1.11's documented behaviour, not copied).

It is put on the import path (at the end, so an installed ``mms`` always wins) only for a model whose code
imports ``mms`` — a legacy archive, or a ``.py`` file of the archive with ``import mms`` / ``from mms…`` —
and only where no ``mms`` package can be imported already.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path
from typing import Optional

__all__ = ["FOLDER", "imports_mms", "provide_mms"]

#: The folder that holds the ``mms`` package (this package's own folder).
FOLDER = Path(__file__).resolve().parent

_IMPORT = re.compile(rb"^[ \t]*(?:from|import)[ \t]+mms(?:[.\s,]|$)", re.MULTILINE)
#: How much of an archive is read to find such an import: files, and bytes of each.
_MAX_FILES = 500
_MAX_BYTES = 1 << 20


def _file_imports_mms(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return bool(_IMPORT.search(fh.read(_MAX_BYTES)))
    except OSError:
        return False


def imports_mms(root: Path, handler_file: Optional[Path] = None) -> bool:
    """Whether a ``.py`` file of the model folder *root* (its first 500, 1 MiB each), or the handler file chosen
    from elsewhere, imports ``mms``."""
    if handler_file is not None and _file_imports_mms(str(handler_file)):
        return True
    seen = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in ("__pycache__", "mms") and not d.startswith(".")]
        for name in files:
            if not name.endswith(".py"):
                continue
            seen += 1
            if seen > _MAX_FILES:
                return False
            if _file_imports_mms(os.path.join(folder, name)):
                return True
    return False


def provide_mms(root: Path, *, legacy: bool, handler_file: Optional[Path] = None) -> bool:
    """Make ``import mms`` find this implementation for the model in *root* (with its *handler_file* from
    elsewhere, if any), if its code needs it and no other ``mms`` is importable; whether it is on the import
    path now."""
    folder = str(FOLDER)
    if folder in sys.path:
        return True
    if not (legacy or imports_mms(root, handler_file)) or importlib.util.find_spec("mms") is not None:
        return False
    sys.path.append(folder)
    return True
