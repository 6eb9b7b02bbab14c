"""Where the test data lives: ../shared beside the repo, and the reference-server venvs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("MMSCTL_SHARED_DIR", REPO.parent / "shared"))

SQUEEZENET_DIR = SHARED / "models" / "squeezenet_v1.1"
ONNX_SQUEEZENET = SHARED / "models" / "onnx" / "SqueezeNet_fp16.onnx"
KITTEN_JPG = SHARED / "images" / "kitten_small.jpg"
KITTEN_PNG = SHARED / "images" / "kitten_224.png"
MMS_OPENAPI_DIR = SHARED / "reference" / "mms"

# Virtual environments with the reference servers, made by `make test` (see Makefile).
MMS_VENV = Path(os.environ.get("MMSCTL_MMS_VENV", REPO / ".venv-mms"))
TS_VENV = Path(os.environ.get("MMSCTL_TS_VENV", REPO / ".venv-ts"))


def require_shared(path: Path) -> Path:
    """Return *path*, or skip the test with a clear reason where ../shared is absent."""
    if not path.exists():
        pytest.skip(f"test data not found: {path} (the ../shared folder beside the repo is absent)")
    return path
