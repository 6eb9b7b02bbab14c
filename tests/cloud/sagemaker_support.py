"""What the `mmsctl sagemaker` tests against moto share: the names, a small archive, the in-process CLI, a deploy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cloud.lambda_support import noop_mar
from tests.support.cli import run_mmsctl

__all__ = ["ACCOUNT", "IMAGE", "NAME", "cli", "deploy", "mar"]

ACCOUNT = "123456789012"
NAME = "kitten"
IMAGE = f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/mmsctl-lambda/{NAME}:latest"


@pytest.fixture(scope="module")
def mar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return noop_mar(tmp_path_factory.mktemp("mar"))


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Any:
    """``mmsctl ARGS`` through `mmsctl.cli.main.run`, in this process, with the moto fixture's environment."""
    return lambda *args: run_mmsctl(capsys, *args)


def deploy(cli: Any, *args: str) -> dict[str, Any]:
    """`sagemaker deploy NAME ARGS -o json`, which must succeed; its JSON."""
    proc = cli("sagemaker", "deploy", NAME, "-o", "json", *args)
    assert proc.code == 0, proc.stderr
    return dict(json.loads(proc.stdout))
