"""Sample events as AWS documents them, and a squeezenet archive made with the real `mmsctl archive create`."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.archives import squeezenet_mar
from tests.support.cli import run_here
from tests.support.paths import REPO, SQUEEZENET_DIR, require_shared

EVENTS = Path(__file__).with_name("events")


def sample(name: str) -> dict[str, Any]:
    """A fresh copy of one documented event (tests may change it)."""
    return json.loads((EVENTS / name).read_text())


def mmsctl(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mmsctl", *args], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=timeout)


@pytest.fixture(scope="session")
def squeezenet_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """squeezenet_v1.1.mar, built once for the session from the checkpoint in ../shared (`mmsctl archive create`
    in this process)."""
    checkpoint = require_shared(SQUEEZENET_DIR)
    out = tmp_path_factory.mktemp("mar")
    return squeezenet_mar(functools.partial(run_here, cwd=REPO), checkpoint, out)
