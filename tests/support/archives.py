"""Archives tests build with the real ``mmsctl archive create``, as a user would.

Pass the caller's way of running mmsctl (``recipe.mmsctl`` in the recipe tests), so
the archive is made with the same environment the test then uses.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Callable

__all__ = ["SQUEEZENET_MAR_NAME", "squeezenet_mar"]

SQUEEZENET_MAR_NAME = "squeezenet_v1.1"


def squeezenet_mar(
    mmsctl: Callable[..., subprocess.CompletedProcess[str]], squeezenet_dir: Path, export_path: Path
) -> Path:
    """``mmsctl archive create SQUEEZENET_DIR --model-name squeezenet_v1.1 --export-path EXPORT_PATH``; the .mar's path."""
    made = mmsctl(
        "archive",
        "create",
        str(squeezenet_dir),
        "--model-name",
        SQUEEZENET_MAR_NAME,
        "--export-path",
        str(export_path),
    )
    assert made.returncode == 0, made.stderr
    return export_path / f"{SQUEEZENET_MAR_NAME}.mar"
