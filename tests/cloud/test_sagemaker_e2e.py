"""scripts/sagemaker_e2e.py, the SageMaker part of `make aws-e2e`: every step is a command mmsctl takes, and the
endpoint is destroyed whatever step failed (the real run needs an account; the commands themselves are tested
against moto and the real container in the other sagemaker tests)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.recipes.cli_args import parse_mmsctl
from tests.support.paths import REPO

_spec = importlib.util.spec_from_file_location("sagemaker_e2e", REPO / "scripts" / "sagemaker_e2e.py")
assert _spec is not None and _spec.loader is not None
e2e: Any = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("sagemaker_e2e", e2e)  # dataclasses look their module up there
_spec.loader.exec_module(e2e)

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/mmsctl-lambda/kitten@sha256:" + "0" * 64


def test_every_step_is_a_command_mmsctl_parses(tmp_path: Path) -> None:
    steps = e2e.sagemaker_steps("e2e", IMAGE, tmp_path / "kitten.jpg", region="eu-west-1") + e2e.destroy_steps("e2e")
    assert [parse_mmsctl(s.argv) for s in steps] == [
        "mmsctl sagemaker deploy", "mmsctl sagemaker deploy", "mmsctl sagemaker invoke", "mmsctl predict",
        "mmsctl sagemaker update", "mmsctl sagemaker invoke", "mmsctl sagemaker describe", "mmsctl sagemaker destroy",
        "mmsctl sagemaker destroy"]


def test_a_failed_step_stops_the_run_and_the_endpoint_is_destroyed_anyway(tmp_path: Path) -> None:
    ran: list[list[str]] = []

    def mmsctl(argv: list[str]) -> "subprocess.CompletedProcess[str]":
        ran.append(argv)
        if argv[:2] == ["sagemaker", "invoke"]:
            return subprocess.CompletedProcess(argv, 8, "", "error: e2e: the model answered 400: bad image\n")
        if argv[:2] == ["sagemaker", "destroy"]:
            first = [a[1] for a in ran].count("destroy") == 1
            return subprocess.CompletedProcess(argv, 0, json.dumps({"deleted": [{"kind": "endpoint"}] if first else []}),
                                               "")
        changes = [{"action": "reuse"}] if len([a for a in ran if a[1] == "deploy"]) == 2 else [{"action": "create"}]
        return subprocess.CompletedProcess(argv, 0, json.dumps({"status": "InService", "changes": changes}), "")

    failures = e2e.run_sagemaker_e2e(mmsctl, name="e2e", image=IMAGE, photo=tmp_path / "k.jpg", say=lambda s: None)
    assert failures == ["invoke: exit 8: error: e2e: the model answered 400: bad image"]
    assert [a[1] for a in ran] == ["deploy", "deploy", "invoke", "destroy", "destroy"]
    assert "--delete-data" in ran[3] and "--yes" in ran[3]
