"""The boot script an instance runs, run for real: from moto's S3, with every package index unreachable, it
installs mmsctl from the wheelhouse, fetches the user's own archive with the role's keys (IMDSv2), starts the
server under the `systemctl` shim and answers /ping and a prediction (tests/support/boot_run.py).

The dependencies' wheels are downloaded at set-up (`make test` runs scripts/boot_wheels.py, with the index, as it
installs the reference servers; ~/.cache/mmsctl-test-wheelhouse); the test builds this checkout's wheel offline and
reaches nothing beyond 127.0.0.1, and the boot itself is cut off from every index.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from tests.cloud.conftest import FAKE_AWS, Moto
from tests.cloud.lambda_support import noop_mar
from tests.support.boot_run import boot, build_test_wheelhouse, stop
from tests.support.boot_standins import serving_imds

pytestmark = pytest.mark.slow  # installs mmsctl and its dependencies into a fresh virtualenv


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("bash") is None:
        pytest.skip("the boot script needs bash")
    try:
        return build_test_wheelhouse(tmp_path_factory.mktemp("wheelhouse"))
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    stop(tmp_path)


def test_an_instance_boots_from_the_bucket_without_any_index(moto: Moto, wheels: Path, root: Path,
                                                             tmp_path_factory: pytest.TempPathFactory) -> None:
    from mmsctl.cloud.aws.session import open_session

    archive = noop_mar(tmp_path_factory.mktemp("mine"), "mine")
    keys = {"AccessKeyId": FAKE_AWS["AWS_ACCESS_KEY_ID"], "SecretAccessKey": FAKE_AWS["AWS_SECRET_ACCESS_KEY"],
            "Token": FAKE_AWS["AWS_SESSION_TOKEN"]}
    with serving_imds(keys) as imds:
        run = boot(open_session(), root, [f"mine={archive}"], wheels, s3_endpoint=moto.url, imds_endpoint=imds)
    assert run.returncode == 0, run.log[-4000:]
    assert "mmsctl-init: fetched" in run.log and "server ready" in run.log
    assert not [c for c in run.calls if c.startswith(("apt-get", "dnf", "useradd"))], run.calls  # nothing from outside
    assert (root / "opt" / "assets" / "models" / "mine.mar").read_bytes() == archive.read_bytes()
    venv = root / "opt" / "venv"
    assert list(venv.glob("lib/python3*/site-packages/mmsctl")), "mmsctl installed from the wheelhouse"

    assert httpx.get(f"{run.inference_url}/ping", timeout=10).json()["status"] == "Healthy"
    answer = httpx.post(f"{run.inference_url}/predictions/mine", content=b"hello", timeout=30)
    assert answer.status_code == 200, answer.text
    models = httpx.get(f"{run.management_url}/models", timeout=10).json()["models"]
    assert [m["modelName"] for m in models] == ["mine"]
    assert os.environ.get("PIP_INDEX_URL") != "http://127.0.0.1:9/simple"  # the cut-off was the script's alone
