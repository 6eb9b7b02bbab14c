"""pyproject.toml reads without a setuptools deprecation warning (`make demo` printed one, twice)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_pyproject_reads_without_setuptools_warnings() -> None:
    code = ("import warnings; warnings.simplefilter('error');"
            "from setuptools.config.pyprojecttoml import apply_configuration;"
            "from setuptools.dist import Distribution;"
            "apply_configuration(Distribution(), 'pyproject.toml')")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
