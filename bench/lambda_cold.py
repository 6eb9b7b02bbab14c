"""Cold start of the Lambda handler, with a cold `mmsctl predict` as the reference (run by hand; not collected by pytest).

What Lambda reports as Init Duration for an image is, for this handler, the import of
``mmsctl.lambda_.handler``: the settings, ``import mxnet`` and the model load at module
scope. This measures exactly that, in a fresh interpreter each time, from the build context
`mmsctl lambda build` writes (its copy of mmsctl on PYTHONPATH, the model baked into
``model/``, mmsctl's bytecode compiled by the image's own build step), for the real
SqueezeNet. Target: <= 1.5 s. In the same run, interleaved: the wall time of a cold
`mmsctl predict squeezenet kitten.jpg` process (archive cached), and the handler's first
request (a function-URL POST of the kitten) after the cold start.

    .venv/bin/python bench/lambda_cold.py             # 7 runs
    .venv/bin/python bench/lambda_cold.py --runs 3

Uses ../shared (SqueezeNet, kitten); everything it makes goes to a temp folder.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.paths import KITTEN_JPG, SQUEEZENET_DIR  # noqa: E402

MMSCTL = [sys.executable, "-m", "mmsctl"]

CHILD = r"""
import base64, json, sys, time
t0 = time.perf_counter()
import mmsctl.lambda_.handler as h
t1 = time.perf_counter()
body = base64.b64encode(open(sys.argv[1], "rb").read()).decode()
event = {"version": "2.0", "rawPath": "/", "headers": {"content-type": "image/jpeg"},
         "requestContext": {"http": {"method": "POST", "path": "/"}}, "body": body, "isBase64Encoded": True}
answer = h.handler(event, None)
t2 = time.perf_counter()
assert answer["statusCode"] == 200, answer
print(json.dumps({"init_s": t1 - t0, "first_ms": (t2 - t1) * 1000, "file": h.__file__,
                  "top": json.loads(answer["body"])[0]["class"]}))
"""


def _env(work: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MMSCTL_", "AWS_"))}
    env.update(MMSCTL_CONFIG_DIR=str(work / "config"), MMSCTL_STATE_DIR=str(work / "state"), MMSCTL_OFFLINE="1")
    env.update(extra)
    return env


def _load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    if not SQUEEZENET_DIR.exists():
        print(f"skipped: {SQUEEZENET_DIR} not found (../shared is absent)")
        return 0
    work = Path(tempfile.mkdtemp(prefix="mmsctl-lambda-bench-"))
    try:
        mirror = work / "mirror"
        base = _env(work, MMSCTL_CACHE_DIR=str(work / "cache"), MMSCTL_ZOO_URL=str(mirror))
        subprocess.run([*MMSCTL, "archive", "create", str(SQUEEZENET_DIR), "--model-name", "squeezenet_v1.1",
                        "--export-path", str(mirror)], env=base, check=True, capture_output=True)
        ctx = work / "ctx"
        subprocess.run([*MMSCTL, "lambda", "build", "squeezenet", "--out", str(ctx)], env=base, check=True,
                       capture_output=True)
        image = _env(work, MMSCTL_CACHE_DIR=str(work / "image-cache"), MMSCTL_LAMBDA_MODEL=str(ctx / "model"),
                     PYTHONPATH=str(ctx / "task"), MMSCTL_LAMBDA_WORK_DIR=str(work / "tmp"))
        # The Dockerfile's build step: compile mxnet's wrappers into the image's cache, load the model once.
        subprocess.run([sys.executable, "-m", "mmsctl.lambda_.prepare"], env=image, check=True,
                       capture_output=True, cwd=ctx / "task")
        predict = [*MMSCTL, "predict", "squeezenet", str(KITTEN_JPG), "-o", "json"]
        subprocess.run(predict, env=base, check=True, capture_output=True)  # cache the extracted archive

        inits, walls, firsts, predicts = [], [], [], []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", CHILD, str(KITTEN_JPG)], env=image, check=True,
                                  capture_output=True, text=True, cwd=ctx / "task")
            walls.append(time.perf_counter() - t0)
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            assert figures["file"].startswith(str(ctx)), figures  # the image's copy of mmsctl ran
            assert figures["top"] == "n02124075 Egyptian cat", figures
            inits.append(figures["init_s"])
            firsts.append(figures["first_ms"])
            t0 = time.perf_counter()
            subprocess.run(predict, env=base, check=True, capture_output=True)
            predicts.append(time.perf_counter() - t0)
        init, pred = statistics.median(inits), statistics.median(predicts)
        print(f"lambda cold start (import + model load, squeezenet): {init:.2f} s (median of {args.runs}, "
              f"min {min(inits):.2f}, max {max(inits):.2f}; target <= 1.5 s)")
        print(f"  same process, with interpreter start and the first request: {statistics.median(walls):.2f} s; "
              f"first request {statistics.median(firsts):.0f} ms")
        print(f"reference: cold `mmsctl predict squeezenet kitten.jpg` process: {pred:.2f} s "
              f"(median of {args.runs}); ratio lambda init / predict = {init / pred:.2f}")
        print(_load())
        return 0 if init <= 1.5 else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
