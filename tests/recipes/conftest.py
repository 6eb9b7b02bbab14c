"""Run the shell recipes in recipes/ as a user would: bash, real mmsctl, real servers on loopback.

As a user runs them: the venv activated (its ``bin`` first on PATH, ``VIRTUAL_ENV`` set) and
nothing else set for them but ``PORT`` (inference on PORT, management PORT+1, metrics PORT+2),
so they run on free ports beside whatever else is running; the autouse ``clean_environ`` fixture
already gives every test private cache/config/state folders and ``MMSCTL_OFFLINE=1``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests.support._proc import port_block
from tests.support.paths import REPO

RECIPES = REPO / "recipes"


def mmsctl_command() -> str:
    """This checkout's mmsctl, as the ``MMSCTL`` value the recipes understand."""
    exe = Path(sys.executable).with_name("mmsctl")
    return str(exe) if exe.exists() else f"{sys.executable} -m mmsctl"




def activated_env(base: dict[str, str]) -> dict[str, str]:
    """*base* as after ``source .venv/bin/activate``: this checkout's venv first on PATH."""
    bin_dir = Path(sys.executable).parent
    env = {k: v for k, v in base.items() if k != "MMSCTL"}
    env.update(PATH=f"{bin_dir}{os.pathsep}{base.get('PATH', '')}", VIRTUAL_ENV=str(bin_dir.parent))
    return env


@dataclass
class RecipeRun:
    """Where a recipe runs: its environment and working folder."""

    env: dict[str, str]
    cwd: Path

    @property
    def port(self) -> int:
        return int(self.env["PORT"])

    @property
    def management_port(self) -> int:
        return self.port + 1

    @property
    def metrics_port(self) -> int:
        return self.port + 2

    @property
    def inference_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def management_url(self) -> str:
        return f"http://127.0.0.1:{self.management_port}"

    def run(
        self, script: Path, *args: str, timeout: float = 240, **extra_env: str
    ) -> subprocess.CompletedProcess[str]:
        env = dict(self.env, **extra_env)
        return subprocess.run(
            ["bash", str(script), *args],
            cwd=self.cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def mmsctl(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*mmsctl_command().split(), *args],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )


@pytest.fixture
def recipe(tmp_path: Path) -> Iterator[RecipeRun]:
    """A recipe environment on free ports; any server a recipe left behind is stopped afterwards."""
    env = activated_env(dict(os.environ))
    env.update(PORT=str(port_block()), PYTHONUNBUFFERED="1")
    cwd = tmp_path / "work"
    cwd.mkdir()
    run = RecipeRun(env=env, cwd=cwd)
    yield run
    # A `serve stop` process costs seconds on a busy machine: only where a server left its state behind.
    from mmsctl.local_servers import list_instances

    if list_instances(Path(env["MMSCTL_STATE_DIR"]) / "instances"):
        run.mmsctl("serve", "stop", "--all", "--timeout", "10")
