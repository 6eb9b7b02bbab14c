"""The real handler with the real SqueezeNet, against moto: run-local on S3 and HTTP events, invoke, logs.

moto stores the function but cannot run its image or fire its S3 trigger; `mmsctl lambda
run-local` runs the very handler the image holds, with the deployed function's own
environment, so these tests play Lambda's part with it: on the object S3 would have
announced, or behind the Invoke API (`run-local --serve`) that `lambda invoke` calls.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Optional

import boto3
import pytest

from tests.cloud.conftest import REPO, Moto, run_cli_here
from tests.cloud.lambda_support import pushed_image
from tests.lambda_.conftest import sample, squeezenet_archive  # noqa: F401 - the fixture
from tests.support.cli import run_here
from tests.support.imageserver import serving_images
from tests.support.waiting import wait_until

NAME = "kitten"
KEY = "incoming/cats/my kitten (1)+é.jpg"
OUT_KEY = "predictions/cats/my kitten (1)+é.jpg.json"


@pytest.fixture
def deployed(moto: Moto, squeezenet_archive: Path) -> Moto:  # noqa: F811
    pushed_image(NAME)
    proc = run_cli_here(moto, "lambda", "deploy", NAME, "--model", str(squeezenet_archive), "--function-url",
                   "--input-bucket", "kitten-in", "--output-bucket", "kitten-out",
                   "--input-prefix", "incoming/", "--output-prefix", "predictions/",
                   "--fetch-allow", "127.0.0.1")  # the tests' image server on loopback
    assert proc.returncode == 0, proc.stderr
    return moto


@pytest.fixture(scope="module")
def expected(squeezenet_archive: Path, kitten: Path) -> list[dict[str, Any]]:  # noqa: F811
    proc = run_here("predict", str(squeezenet_archive), str(kitten), "-o", "json", "--local", cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def kitten() -> Path:
    from tests.support.paths import KITTEN_JPG, require_shared

    return require_shared(KITTEN_JPG)


def output(key: str) -> dict[str, Any]:
    return json.loads(boto3.client("s3").get_object(Bucket="kitten-out", Key=key)["Body"].read())


@pytest.mark.slow
def test_run_local_on_an_s3_put_writes_the_same_top5_as_predict(deployed: Moto, kitten: Path, tmp_path: Path,
                                                                expected: list[dict[str, Any]]) -> None:
    s3 = boto3.client("s3")
    s3.upload_file(str(kitten), "kitten-in", KEY)
    s3.put_object(Bucket="kitten-in", Key="incoming/broken.jpg", Body=b"not an image")

    proc = run_cli_here(deployed, "lambda", "run-local", NAME, "--s3-put", f"s3://kitten-in/{KEY}")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"processed": [
        {"input": f"s3://kitten-in/{KEY}", "output": f"s3://kitten-out/{OUT_KEY}", "status": 200}]}
    doc = output(OUT_KEY)
    assert doc["result"] == expected and doc["input"]["key"] == KEY
    # the model came from the model bucket, the version deploy pinned; the cold start is reported
    assert "loaded from s3://mmsctl-kitten-model-" in proc.stderr and "(version " in proc.stderr
    assert "Init Duration:" in proc.stderr and "REPORT RequestId:" in proc.stderr

    # AWS's documented event, pointed at the broken object: an error object and a log line, exit 0
    event = sample("s3_put.json")
    event["Records"][0]["s3"]["bucket"]["name"] = "kitten-in"
    event["Records"][0]["s3"]["object"].update(key="incoming%2Fbroken.jpg", size=12)
    event_file = tmp_path / "event.json"
    event_file.write_text(json.dumps(event))
    bad = run_cli_here(deployed, "lambda", "run-local", NAME, str(event_file))
    assert bad.returncode == 0, bad.stderr
    assert json.loads(bad.stdout)["processed"][0]["status"] == 400
    assert output("predictions/broken.jpg.error.json")["error"]["type"] == "BadRequestException"
    assert "[ERROR]" in bad.stderr and "Corrupted image input" in bad.stderr


def test_run_local_on_a_hand_written_event_with_a_non_ascii_key(moto: Moto, squeezenet_archive: Path,  # noqa: F811
                                                                 kitten: Path, tmp_path: Path) -> None:
    """No eTag, no versionId, a key S3 would send URL-encoded: the answer's source tag (object metadata, which
    botocore sends only as ASCII) is still written, and a second run finds it and skips the object."""
    s3 = boto3.client("s3")
    for bucket in ("photos-in", "photos-out"):
        s3.create_bucket(Bucket=bucket)
    s3.upload_file(str(kitten), "photos-in", "uploads/été.jpg")
    event = {"Records": [{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
                          "s3": {"bucket": {"name": "photos-in"}, "object": {"key": "uploads/%C3%A9t%C3%A9.jpg"}}}]}
    event_file = tmp_path / "event.json"
    event_file.write_text(json.dumps(event))
    args = ("lambda", "run-local", "scratch", "--model", str(squeezenet_archive), "--input-bucket", "photos-in",
            "--output-bucket", "photos-out", str(event_file))
    first = run_cli_here(moto, *args)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == {"processed": [
        {"input": "s3://photos-in/uploads/été.jpg", "output": "s3://photos-out/uploads/été.jpg.json", "status": 200}]}
    tag = s3.head_object(Bucket="photos-out", Key="uploads/été.jpg.json")["Metadata"]["mmsctl-source"]
    assert tag.isascii() and "été" not in tag
    again = run_cli_here(moto, *args)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["processed"][0]["skipped"] is True


def test_run_local_url_and_model_without_a_deployed_function(moto: Moto, squeezenet_archive: Path,  # noqa: F811
                                                             kitten: Path, tmp_path: Path,
                                                             expected: list[dict[str, Any]]) -> None:
    shutil.copy(kitten, tmp_path / "kitten.jpg")
    with serving_images(tmp_path) as base:
        proc = run_cli_here(moto, "lambda", "run-local", "scratch", "--model", str(squeezenet_archive),
                            "--image-url", f"{base}/img/kitten.jpg", "--fetch-allow", "127.0.0.1")
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["statusCode"] == 200 and json.loads(answer["body"]) == expected

    missing = run_cli_here(moto, "lambda", "run-local", "nothing-here", "--image-url", "http://127.0.0.1:1/x.jpg")
    assert missing.returncode == 3 and missing.stderr.startswith("error: no function nothing-here in us-east-1")


def _serve(moto: Moto) -> Iterator[tuple[str, "queue.Queue[str]"]]:
    proc = subprocess.Popen([sys.executable, "-m", "mmsctl", "lambda", "run-local", NAME, "--serve", "--port", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO, env=moto.env())
    lines: "queue.Queue[str]" = queue.Queue()
    threading.Thread(target=lambda: [lines.put(ln) for ln in proc.stderr], daemon=True).start()  # type: ignore[union-attr]
    try:
        def started() -> Optional[str]:
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                assert proc.poll() is None, "run-local --serve exited"
                return None
            assert line.startswith("Invoke API for") or proc.poll() is None, line
            return line if line.startswith("Invoke API for") else None

        line = wait_until(started, timeout=120, what="run-local --serve printing its Invoke API address", interval=0)
        yield line.split(" on ", 1)[1].split()[0], lines
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.slow
def test_invoke_reports_cold_then_warm_through_the_invoke_api(deployed: Moto, kitten: Path, tmp_path: Path,
                                                              expected: list[dict[str, Any]]) -> None:
    for url, _lines in _serve(deployed):
        lam = {"AWS_ENDPOINT_URL_LAMBDA": url}
        cold = run_cli_here(deployed, "lambda", "invoke", NAME, str(kitten), "-o", "json", env=lam)
        assert cold.returncode == 0, cold.stderr
        first = json.loads(cold.stdout)
        assert first["status"] == 200 and first["result"] == expected
        report = first["report"]
        assert report["cold_start"] and report["init_ms"] > 0 and report["memory_mb"] == 1024
        assert report["billed_ms"] >= report["duration_ms"] + report["init_ms"]

        warm = run_cli_here(deployed, "lambda", "invoke", NAME, str(kitten), env=lam)
        assert warm.returncode == 0, warm.stderr
        assert "n02124075 Egyptian cat" in warm.stdout.splitlines()[1]
        assert "status 200" in warm.stderr and "· warm ·" in warm.stderr and "max memory" in warm.stderr

        # a local endpoint needs no region and no credentials (there are none in this environment)
        bare = {k: v for k, v in deployed.env().items() if not k.startswith("AWS_")}
        bare.update(AWS_ENDPOINT_URL_LAMBDA=url, AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull,
                    AWS_EC2_METADATA_DISABLED="true")
        local = subprocess.run([sys.executable, "-m", "mmsctl", "lambda", "invoke", NAME, str(kitten), "-o", "json"],
                               capture_output=True, text=True, cwd=REPO, env=bare, timeout=120)
        assert local.returncode == 0, local.stderr
        assert json.loads(local.stdout)["result"] == expected

        shutil.copy(kitten, tmp_path / "kitten.jpg")
        with serving_images(tmp_path) as base:  # the function fetches the image itself: GET ?url=
            by_url = run_cli_here(deployed, "lambda", "invoke", NAME, "--image-url", f"{base}/img/kitten.jpg", "-o", "json",
                                  env=lam)
        assert by_url.returncode == 0, by_url.stderr
        assert json.loads(by_url.stdout)["result"] == expected

        bad_file = tmp_path / "broken.jpg"
        bad_file.write_bytes(b"GIF89a but not really")
        bad = run_cli_here(deployed, "lambda", "invoke", NAME, str(bad_file), env=lam)
        assert bad.returncode == 8  # the function answered with an error body
        assert bad.stderr.splitlines()[-1].startswith("error: Corrupted image input")


@pytest.mark.slow
def test_invoke_s3_waits_for_the_output_object(deployed: Moto, kitten: Path, expected: list[dict[str, Any]]) -> None:
    s3 = boto3.client("s3")
    waiting = subprocess.Popen([sys.executable, "-m", "mmsctl", "lambda", "invoke", NAME, "--s3", str(kitten),
                                "--timeout", "120", "-o", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=REPO, env=deployed.env())
    try:
        def uploaded() -> list[str]:  # the upload S3 would announce to the function
            assert waiting.poll() is None, waiting.communicate()
            return [o["Key"] for o in s3.list_objects_v2(Bucket="kitten-in").get("Contents", [])]

        [key] = wait_until(uploaded, timeout=60, what="the image uploaded to kitten-in")
        assert key.startswith("incoming/mmsctl-invoke-") and key.endswith("-kitten_small.jpg")
        trigger = run_cli_here(deployed, "lambda", "run-local", NAME, "--s3-put", f"s3://kitten-in/{key}")
        assert trigger.returncode == 0, trigger.stderr
        out, err = waiting.communicate(timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
    assert waiting.returncode == 0, err
    result = json.loads(out)
    assert result["status"] == 200 and result["result"] == expected and result["latency_ms"] > 0
    assert result["output"] == f"s3://kitten-out/predictions/{key.removeprefix('incoming/')}.json"
    for bucket in ("kitten-in", "kitten-out"):  # the test image and its answer are not data: both deleted
        assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0, bucket


def test_invoke_s3_gives_up_after_wait(deployed: Moto, kitten: Path) -> None:
    proc = run_cli_here(deployed, "lambda", "invoke", NAME, "--s3", str(kitten), "--timeout", "1")
    assert proc.returncode == 7
    assert proc.stderr.startswith("error: no output for s3://kitten-in/incoming/mmsctl-invoke-")


def test_logs_prints_and_follows_the_log_group(deployed: Moto) -> None:
    logs = boto3.client("logs")
    group, stream = f"/aws/lambda/{NAME}", "2024/01/01/[$LATEST]abc"
    logs.create_log_stream(logGroupName=group, logStreamName=stream)
    now = int(time.time() * 1000)
    logs.put_log_events(logGroupName=group, logStreamName=stream, logEvents=[
        {"timestamp": now - 3_600_000, "message": "an hour ago"},
        {"timestamp": now - 1000, "message": "START RequestId: r1 Version: $LATEST"},
        {"timestamp": now, "message": "REPORT RequestId: r1\tDuration: 41.20 ms\tBilled Duration: 42 ms"}])
    proc = run_cli_here(deployed, "lambda", "logs", NAME, "--since", "10m")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [ln.split(" ", 1)[1] for ln in lines] == ["START RequestId: r1 Version: $LATEST",
                                                     "REPORT RequestId: r1\tDuration: 41.20 ms\tBilled Duration: 42 ms"]
    assert "an hour ago" in run_cli_here(deployed, "lambda", "logs", NAME, "--since", "2h").stdout

    follow = subprocess.Popen([sys.executable, "-m", "mmsctl", "lambda", "logs", NAME, "--follow", "--since", "1m"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=deployed.env())
    got: "queue.Queue[str]" = queue.Queue()
    threading.Thread(target=lambda: [got.put(ln) for ln in follow.stdout], daemon=True).start()  # type: ignore[union-attr]
    try:
        seen = [got.get(timeout=60), got.get(timeout=60)]  # the two recent events, once
        logs.put_log_events(logGroupName=group, logStreamName=stream,
                            logEvents=[{"timestamp": int(time.time() * 1000), "message": "new line"}])
        seen.append(got.get(timeout=60))
    finally:
        follow.terminate()
        follow.wait(timeout=30)
    assert [s.rstrip("\n").split(" ", 1)[1] for s in seen][2] == "new line"
    assert got.empty()

    assert run_cli_here(deployed, "lambda", "logs", NAME, "--since", "soon").returncode == 2
    gone = run_cli_here(deployed, "lambda", "logs", "nobody")
    assert gone.returncode == 3 and "no log group /aws/lambda/nobody" in gone.stderr
