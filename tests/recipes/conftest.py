"""Run the shell recipes in recipes/ as a user would: bash, real mmsctl, real servers on loopback.

Each recipe takes its ports and the mmsctl command from the environment (``MMSCTL``,
``INFERENCE_PORT`` …), so the tests point them at free ports and at this checkout's
mmsctl; the autouse ``clean_environ`` fixture already gives every test private
cache/config/state folders and ``MMSCTL_OFFLINE=1``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests.support._proc import free_port
from tests.support.paths import REPO

RECIPES = REPO / "recipes"


def mmsctl_command() -> str:
    """This checkout's mmsctl, as the ``MMSCTL`` value the recipes understand."""
    exe = Path(sys.executable).with_name("mmsctl")
    return str(exe) if exe.exists() else f"{sys.executable} -m mmsctl"


def free_ports(count: int) -> list[int]:
    ports: set[int] = set()
    while len(ports) < count:
        ports.add(free_port())
    return sorted(ports)


@dataclass
class RecipeRun:
    """Where a recipe runs: its environment and working folder."""

    env: dict[str, str]
    cwd: Path

    @property
    def inference_url(self) -> str:
        return f"http://127.0.0.1:{self.env['INFERENCE_PORT']}"

    @property
    def management_url(self) -> str:
        return f"http://127.0.0.1:{self.env['MANAGEMENT_PORT']}"

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
    inference, management, metrics = free_ports(3)
    env = dict(os.environ)
    env.update(
        MMSCTL=mmsctl_command(),
        HOST="127.0.0.1",
        INFERENCE_PORT=str(inference),
        MANAGEMENT_PORT=str(management),
        METRICS_PORT=str(metrics),
        PYTHONUNBUFFERED="1",
    )
    cwd = tmp_path / "work"
    cwd.mkdir()
    run = RecipeRun(env=env, cwd=cwd)
    yield run
    run.mmsctl("serve", "stop", "--all", "--timeout", "10")
