#!/usr/bin/env python3
"""The SageMaker part of ``make aws-e2e``: deploy, invoke, update and destroy a small endpoint on a real account.

For scripts/aws_e2e.py (it builds and pushes the image first, with ``lambda build --push``)::

    from sagemaker_e2e import run_sagemaker_e2e
    failures = run_sagemaker_e2e(mmsctl, name="e2e-kitten", image=pinned_uri, photo=kitten)

or on its own, with the image ``lambda build MODEL --push --name NAME`` printed::

    .venv/bin/python scripts/sagemaker_e2e.py --image 1234….dkr.ecr.REGION.amazonaws.com/mmsctl-lambda/NAME@sha256:…

The endpoint is serverless (2048 MB: no idle cost, in service in minutes), so the run costs cents. Each step
is one ``mmsctl`` command and what its answer must show; the endpoint is destroyed at the end whatever
failed (``--delete-data --yes``: its logs too), and a second destroy must find nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

REPO = Path(__file__).resolve().parents[1]

Runner = Callable[[list[str]], "subprocess.CompletedProcess[str]"]
#: What a step's answer must show: None when it does, else why not.
Check = Callable[["subprocess.CompletedProcess[str]"], Optional[str]]


@dataclass(frozen=True)
class Step:
    name: str
    argv: list[str]
    check: Check


def _ok(proc: "subprocess.CompletedProcess[str]") -> Optional[str]:
    return None if proc.returncode == 0 else f"exit {proc.returncode}: {(proc.stderr or '').strip()[-500:]}"


def _json(test: Callable[[object], Optional[str]]) -> Check:
    def check(proc: "subprocess.CompletedProcess[str]") -> Optional[str]:
        return _ok(proc) or test(json.loads(proc.stdout))
    return check


def _top5(answer: object) -> Optional[str]:
    rows = answer.get("result") if isinstance(answer, dict) else answer
    return None if isinstance(rows, list) and len(rows) == 5 and "class" in rows[0] else f"not a top-5: {answer}"


def _in_service(info: object) -> Optional[str]:
    status = info.get("status") if isinstance(info, dict) else None
    return None if status == "InService" else f"status {status}"


#: The steps that need SageMaker itself: an invocation (moto's runtime answers canned results) and
#: UpdateEndpoint (moto has none).
NEEDS_SAGEMAKER = ("invoke", "predict through the context", "update", "invoke the new model")


def sagemaker_steps(name: str, image: str, photo: Path, *, model: str = "squeezenet",
                    update_model: str = "resnet-18", region: Optional[str] = None,
                    invoke: bool = True) -> list[Step]:
    """The sequence (destroy last; :func:`run_sagemaker_e2e` runs it even when a step before fails); without
    *invoke*, the steps :data:`NEEDS_SAGEMAKER` names are left out."""
    where = ["--region", region] if region else []
    steps = [
        Step("deploy", ["sagemaker", "deploy", name, "--model", model, "--image", image, "--serverless", "2048",
                        "--max-concurrency", "2", "-o", "json", *where], _json(_in_service)),
        Step("deploy again changes nothing", ["sagemaker", "deploy", name, "--model", model, "--image", image,
                                              "--serverless", "2048", "--max-concurrency", "2", "-o", "json", *where],
             _json(lambda out: None if all(c["action"] == "reuse" for c in out["changes"])  # type: ignore[index]
                   else "a second deploy changed something")),
        Step("invoke", ["sagemaker", "invoke", name, str(photo), "-o", "json", *where], _json(_top5)),
        Step("predict through the context", ["predict", model, str(photo), "--context", f"sagemaker:{name}",
                                             "-o", "json"], _json(_top5)),
        Step("update", ["sagemaker", "update", name, "--model", update_model, "-o", "json", *where],
             _json(_in_service)),
        Step("invoke the new model", ["sagemaker", "invoke", name, str(photo), "-o", "json", *where], _json(_top5)),
        Step("describe", ["sagemaker", "describe", name, "-o", "json", *where], _json(_in_service)),
    ]
    return [step for step in steps if invoke or step.name not in NEEDS_SAGEMAKER]


def destroy_steps(name: str, region: Optional[str] = None) -> list[Step]:
    where = ["--region", region] if region else []
    return [
        Step("destroy", ["sagemaker", "destroy", name, "--delete-data", "--yes", "-o", "json", *where], _ok),
        Step("destroy again finds nothing", ["sagemaker", "destroy", name, "-o", "json", *where],
             _json(lambda out: None if not out["deleted"] else f"left behind: {out['deleted']}")),  # type: ignore[index]
    ]


def run_sagemaker_e2e(mmsctl: Runner, *, name: str, image: str, photo: Path, model: str = "squeezenet",
                      update_model: str = "resnet-18", region: Optional[str] = None,
                      say: Callable[[str], None] = print, invoke: bool = True) -> list[str]:
    """Run the steps, destroy whatever happened; the failures (empty: all passed)."""
    failures: list[str] = []
    steps = sagemaker_steps(name, image, photo, model=model, update_model=update_model, region=region,
                            invoke=invoke)
    try:
        for step in steps:
            why = step.check(mmsctl(step.argv))
            say(f"sagemaker e2e: {step.name}: {'ok' if why is None else 'FAILED: ' + why}")
            if why is not None:
                failures.append(f"{step.name}: {why}")
                break
    finally:
        for step in destroy_steps(name, region):
            why = step.check(mmsctl(step.argv))
            say(f"sagemaker e2e: {step.name}: {'ok' if why is None else 'FAILED: ' + why}")
            if why is not None:
                failures.append(f"{step.name}: {why}")
    return failures


def _mmsctl(argv: list[str]) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([sys.executable, "-m", "mmsctl", *argv], capture_output=True, text=True, cwd=REPO,
                          timeout=3600)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", required=True, help="the pushed image (lambda build --push prints it)")
    parser.add_argument("--name", default="mmsctl-e2e")
    parser.add_argument("--region")
    parser.add_argument("--photo", type=Path, default=REPO.parent / "shared" / "images" / "kitten_small.jpg")
    args = parser.parse_args()
    if args.region:  # `predict --context` has no --region: every step's process takes it from here
        os.environ.update(AWS_REGION=args.region, AWS_DEFAULT_REGION=args.region)
    failures = run_sagemaker_e2e(_mmsctl, name=args.name, image=args.image, photo=args.photo, region=args.region)
    for failure in failures:
        print(f"FAILED {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
