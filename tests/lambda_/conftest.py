"""Sample events as AWS documents them, and a squeezenet archive made with the real `mmsctl archive create`."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from mmsctl.lambda_.served_model import ServedModel, load_model
from mmsctl.lambda_.settings import HandlerSettings
from tests.support.archives import squeezenet_mar
from tests.support.cli import run_here
from tests.support.paths import REPO, SQUEEZENET_DIR, require_shared

EVENTS = Path(__file__).with_name("events")


def sample(name: str) -> dict[str, Any]:
    """A fresh copy of one documented event (tests may change it)."""
    return json.loads((EVENTS / name).read_text())


def put_event(s3: Any, key: str, body: bytes, bucket: str = "in-bucket") -> dict[str, Any]:
    """Put *body* at *key*; AWS's documented put notification pointed at it (key URL-encoded as S3 does)."""
    from mmsctl.cloud.lambda_.events import s3_put_event

    put = s3.put_object(Bucket=bucket, Key=key, Body=body)
    event = sample("s3_put.json")
    built = s3_put_event(bucket, key, size=len(body), etag=put["ETag"], version_id=put.get("VersionId"))
    event["Records"][0]["s3"]["bucket"] = built["Records"][0]["s3"]["bucket"]
    event["Records"][0]["s3"]["object"] = built["Records"][0]["s3"]["object"]
    return event


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


@pytest.fixture(scope="session")
def served(squeezenet_archive: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedModel]:
    """The real SqueezeNet as the handler serves it, loaded once for the session, as one Lambda container
    holds it across invocations (each test builds its own runtime around it)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MMSCTL_CACHE_DIR", str(tmp_path_factory.mktemp("served-cache")))
        model = load_model(HandlerSettings(model=str(squeezenet_archive)))
    yield model
    model.close()
