"""The Lambda image holds only what the handler imports: its import graph, exercised on every path (an image
POST, a ?url= fetch, an S3 event), stays inside the hash-locked requirements (and away from the terminal UI)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from mmsctl.cloud.lambda_.build import LOCK_FILE
from tests.support.paths import KITTEN_JPG, REPO, require_shared

_PROBE = r'''
import base64, importlib.abc, importlib.metadata as md, json, sys
dists = md.packages_distributions()
locked = set(json.loads(sys.argv[2]))
blocked = []


class OnlyTheLock(importlib.abc.MetaPathFinder):
    """The image: a third-party module outside the lock is not there (optional imports then fall back)."""

    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        owners = {d.lower().replace("_", "-") for d in dists.get(top, [])} - {"mmsctl"}
        if owners and not owners & locked and top not in sys.stdlib_module_names:
            blocked.append(top)
            raise ModuleNotFoundError(f"No module named {top!r} (not in the image)", name=top)
        return None


sys.meta_path.insert(0, OnlyTheLock())
before = set(sys.modules)
import mmsctl.lambda_.handler as h
from mmsctl.cloud.lambda_.events import function_url_event, s3_put_event
kitten = open(sys.argv[1], "rb").read()
answers = [h.handler(function_url_event("POST", body=kitten, content_type="image/jpeg"), None),
           h.handler(function_url_event("GET", query={"url": "http://203.0.113.9:9/x.jpg"}), None)]
try:
    h.handler(s3_put_event("in-bucket", "incoming/k.jpg", size=len(kitten)), None)
except Exception as exc:  # S3 is unreachable here: the handler asks Lambda to retry
    assert "failed and may succeed on retry" in str(exc), exc
dists = md.packages_distributions()
tops = {m.split(".")[0] for m in set(sys.modules) - before}
print(json.dumps({"dists": sorted({d for t in tops for d in dists.get(t, [])}), "blocked": sorted(set(blocked)),
                  "statuses": [a.get("statusCode") if isinstance(a, dict) else None for a in answers]}))
'''


def test_the_handlers_imports_stay_inside_the_lock(squeezenet_archive: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(MMSCTL_LAMBDA_MODEL=str(squeezenet_archive), MMSCTL_LAMBDA_INPUT_BUCKET="in-bucket",
               MMSCTL_LAMBDA_OUTPUT_BUCKET="out-bucket", MMSCTL_LAMBDA_URL_TIMEOUT="1",
               MMSCTL_CACHE_DIR=str(tmp_path / "cache"), AWS_ENDPOINT_URL="http://127.0.0.1:9",  # nothing listens
               AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x", AWS_DEFAULT_REGION="us-east-1", AWS_MAX_ATTEMPTS="1",
               AWS_EC2_METADATA_DISABLED="true", MMSCTL_LAMBDA_FETCH_ALLOW="203.0.113.0/24")
    locked = set(re.findall(r"^([a-z0-9-]+)==", LOCK_FILE.read_text(), re.MULTILINE))
    done = subprocess.run([sys.executable, "-c", _PROBE, str(require_shared(KITTEN_JPG)), json.dumps(sorted(locked))],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    # With only the lock importable, an image POST answers and a ?url= fails as a fetch (nothing listens), not a 500
    assert probe["statuses"][0] == 200 and probe["statuses"][1] in (502, 504), probe
    imported = {d.lower().replace("_", "-") for d in probe["dists"]} - {"mmsctl"}
    assert {"mxnet", "numpy", "pillow", "httpx", "boto3", "botocore"} <= imported  # the probe reached each path
    assert imported <= locked, f"the handler imports what the image does not install: {sorted(imported - locked)}"
    assert not imported & {"textual", "typer", "rich", "aiohttp"}
    assert set(probe["blocked"]) <= {"brotli", "brotlicffi", "click", "pygments", "rich", "h2", "socksio", "zstandard",
                                     "onnx"}, \
        probe["blocked"]  # httpx's optional extras and mxnet's ONNX export: tried, skipped
