"""Running mmsctl against the process's moto server (tests/support/moto.py; its fixtures are in tests/conftest.py),
and the assets `fleet create` uploads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.cli import run_here
from tests.support.moto import FAKE_AWS, Moto
from tests.support.planned_calls import check_planned_calls, planned_call_errors

__all__ = ["FAKE_AWS", "REPO", "Moto", "run_cli", "run_cli_here"]

REPO = Path(__file__).resolve().parents[2]


def run_cli(moto: Moto, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``mmsctl ARGS`` as a real subprocess against *moto*."""
    return subprocess.run(
        [sys.executable, "-m", "mmsctl", *args], capture_output=True, text=True, timeout=timeout, cwd=REPO,
        env={**moto.env(), **(env or {})},
    )


def run_cli_here(moto: Moto, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``mmsctl ARGS`` against *moto* as :func:`run_cli` runs it, but in this process: the console script's
    ``run()`` (its exit codes and one-line errors included) in exactly the subprocess's environment and folder.
    A new interpreter that imports boto3 and loads its service models costs one to two CPU seconds a command."""
    return run_here(*args, env={**moto.env(), **(env or {})}, only_env=True, cwd=REPO)


@pytest.fixture
def instance_assets(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """What `fleet create` uploads for its instances, made offline: a small wheelhouse (MMSCTL_WHEELHOUSE; the
    real one is built by pip, tests/cloud/test_boot_script.py) and the zoo's squeezenet in the cache (a no-op
    archive under its name: the bytes only travel to the bucket here)."""
    from mmsctl.zoo import cache
    from mmsctl.zoo.catalog import lookup
    from tests.cloud.lambda_support import noop_mar

    wheels = tmp_path_factory.mktemp("wheelhouse")
    for name in ("mmsctl-0.1.0-py3-none-any.whl", "numpy-1.26.4-cp310-cp310-manylinux2014_x86_64.whl"):
        (wheels / name).write_bytes(name.encode() * 100)
    monkeypatch.setenv("MMSCTL_WHEELHOUSE", str(wheels))
    entry = lookup("squeezenet")
    target = cache.zoo_path(entry.filename if entry else "squeezenet_v1.1.mar")
    target.parent.mkdir(parents=True, exist_ok=True)
    archive = noop_mar(tmp_path_factory.mktemp("zoo"), "squeezenet")
    target.write_bytes(archive.read_bytes())
    return wheels


@pytest.fixture(autouse=True)
def planned_calls_are_well_formed() -> Iterator[None]:
    """Each call a dry run only lists passes botocore's parameter validation, as each call sent to moto does
    (tests/support/planned_calls.py; under `make test-lowest`, the oldest botocore pyproject.toml allows)."""
    check_planned_calls()
    planned_call_errors()
    yield
    found = planned_call_errors()
    assert not found, "planned AWS calls botocore would refuse:\n" + "\n".join(found)
