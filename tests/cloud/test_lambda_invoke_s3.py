"""`lambda invoke --s3` cleans up after itself, in versioned buckets too, and keeps both objects with --keep.

A thread on moto plays the function's part (moto cannot fire the S3 trigger): it waits for the upload
and writes the output document where the handler would, so no model is needed here.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Iterator

import boto3
import pytest

from tests.cloud.conftest import Moto
from tests.support.cli import run_mmsctl
from tests.support.waiting import wait_until

NAME = "kitten"
ANSWER = [{"class": "n02124075 Egyptian cat", "probability": 0.9}]


@pytest.fixture
def pipeline(moto: Moto) -> Iterator[Any]:
    """Versioned input and output buckets, a function whose environment names them, and a stand-in that answers."""
    from mmsctl.cloud.lambda_ import env
    from mmsctl.cloud.lambda_.outputs import output_key

    s3 = boto3.client("s3")
    for bucket in ("kitten-in", "kitten-out"):
        s3.create_bucket(Bucket=bucket)
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    role = boto3.client("iam").create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    boto3.client("lambda").create_function(
        FunctionName=NAME, Role=role, PackageType="Image", Code={"ImageUri": "123456789012.dkr.ecr.x/y:1"},
        Environment={"Variables": {env.ENV_INPUT_BUCKET: "kitten-in", env.ENV_INPUT_PREFIX: "incoming/",
                                   env.ENV_OUTPUT_BUCKET: "kitten-out", env.ENV_OUTPUT_PREFIX: "predictions/"}})
    stop, answered = threading.Event(), set()

    def new_upload() -> str | None:
        if stop.is_set():
            return "stop"
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket="kitten-in").get("Contents", [])]
        return next((k for k in keys if k not in answered), None)

    def function() -> None:
        while not stop.is_set():
            key = wait_until(new_upload, timeout=60, what="an upload to kitten-in", interval=0.05)
            if key == "stop":
                return
            answered.add(key)
            out = output_key(key, input_prefix="incoming/", output_prefix="predictions/", error=False)
            s3.put_object(Bucket="kitten-out", Key=out, Body=json.dumps({"status": 200, "result": ANSWER}).encode())

    worker = threading.Thread(target=function, daemon=True)
    worker.start()
    yield s3
    stop.set()
    worker.join(timeout=30)


def _everything(s3: Any, bucket: str) -> list[str]:
    listed = s3.list_object_versions(Bucket=bucket)
    return [f"{v['Key']}@{v['VersionId']}" for kind in ("Versions", "DeleteMarkers") for v in listed.get(kind, [])]


def test_invoke_s3_deletes_the_very_versions_it_wrote_unless_keep(pipeline: Any, capsys, tmp_path: Path) -> None:
    s3 = pipeline
    image = tmp_path / "k.jpg"
    image.write_bytes(b"\xff\xd8\xff not really a jpeg: the stand-in does not look")
    code, out, err = run_mmsctl(capsys, "lambda", "invoke", NAME, "--s3", str(image), "--timeout", "60", "-o", "json")
    assert code == 0, err
    first = json.loads(out)
    assert first["status"] == 200 and first["result"] == ANSWER
    assert first["input"].startswith("s3://kitten-in/incoming/mmsctl-invoke-")
    # no object, no older version and no delete marker left: a plain delete would leave the bytes behind
    assert _everything(s3, "kitten-in") == [] and _everything(s3, "kitten-out") == []

    code, out, err = run_mmsctl(capsys, "lambda", "invoke", NAME, "--s3", str(image), "--keep", "-o", "json")
    assert code == 0, err
    kept = json.loads(out)
    for uri in (kept["input"], kept["output"]):
        bucket, key = uri.removeprefix("s3://").split("/", 1)
        assert [v.split("@")[0] for v in _everything(s3, bucket)] == [key], uri
    assert s3.get_object(Bucket="kitten-in", Key=kept["input"].split("/", 3)[3])["Body"].read() == image.read_bytes()


def test_invoke_s3_waits_through_s3s_403_for_an_answer_not_written_yet(pipeline: Any, capsys, tmp_path: Path,
                                                                      moto: Moto,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A caller that may read the answers but not list the output bucket gets 403, not 404, for an answer not yet
    written (S3 hides absence; moto does not): the policy stand-in plays S3 for such a caller."""
    from tests.support.s3_policy_standin import serving_s3_as_role

    image = tmp_path / "k.jpg"
    image.write_bytes(b"\xff\xd8\xff not really a jpeg: the stand-in does not look")
    caller = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "s3:PutObject", "Resource": "arn:aws:s3:::kitten-in/incoming/*"},
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::kitten-out/predictions/*"},
        {"Effect": "Allow", "Action": "s3:DeleteObjectVersion",
         "Resource": ["arn:aws:s3:::kitten-in/incoming/*", "arn:aws:s3:::kitten-out/predictions/*"]}]}
    with serving_s3_as_role(moto.url, caller) as standin:
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", standin.url)
        code, out, err = run_mmsctl(capsys, "lambda", "invoke", NAME, "--s3", str(image), "--timeout", "60",
                                    "-o", "json")
    assert code == 0, err
    assert json.loads(out)["result"] == ANSWER
    assert ("s3:GetObject", 403) in standin.actions() and ("s3:GetObject", 200) in standin.actions()
    assert _everything(pipeline, "kitten-in") == [] and _everything(pipeline, "kitten-out") == []


@pytest.mark.parametrize("args, message", [
    ((), "error: give one of IMAGE, --image-url URL or --s3 FILE"),
    (("cat.jpg", "--image-url", "https://example.com/cat.jpg"), "error: give only one of IMAGE, --image-url URL or --s3 FILE"),
])
def test_invoke_says_whether_an_input_is_missing_or_one_too_many(capsys, args: tuple[str, ...], message: str) -> None:
    r = run_mmsctl(capsys, "lambda", "invoke", NAME, *args)
    assert r.code == 2 and r.stderr.splitlines()[0] == message, r.stderr
