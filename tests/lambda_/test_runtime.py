"""The handler's runtime with the real SqueezeNet: HTTP requests, the keep-warm call, and S3 records on moto.

One model is loaded for the session (as one Lambda container would: tests/lambda_/conftest.py); each test gets a
fresh runtime around it. Answers are compared with `mmsctl predict` on the same archive.
"""

from __future__ import annotations

import json
import shutil
import struct
import zlib
from pathlib import Path
from typing import Any

import boto3
import pytest

from mmsctl.errors import CloudError
from mmsctl.cloud.lambda_.events import WARM_EVENT, api_gateway_event, function_url_event
from mmsctl.addresses import AllowList
from mmsctl.lambda_.served_model import ServedModel
from mmsctl.lambda_.runtime import Runtime
from mmsctl.lambda_.settings import HandlerSettings
from tests.support.moto import Moto
from tests.lambda_.conftest import mmsctl, put_event as _event, sample
from tests.support.imageserver import serving_images
from tests.support.paths import KITTEN_JPG, require_shared


@pytest.fixture(scope="module")
def expected(squeezenet_archive: Path) -> list[dict[str, Any]]:
    """What `mmsctl predict ARCHIVE kitten.jpg -o json` answers."""
    done = mmsctl("predict", str(squeezenet_archive), str(require_shared(KITTEN_JPG)), "-o", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def runtime(served: ServedModel, **settings: Any) -> Runtime:
    def s3() -> Any:
        return boto3.client("s3")

    return Runtime(HandlerSettings(model="(loaded)", **settings), served, s3)


def body(answer: dict[str, Any]) -> Any:
    return json.loads(answer["body"])


def test_post_an_image_to_the_function_url_gives_predicts_top5(
    served: ServedModel, expected: list[dict[str, Any]], kitten_jpg: Path
) -> None:
    answer = runtime(served).handle(function_url_event("POST", body=kitten_jpg.read_bytes(), content_type="image/jpeg"))
    assert answer["statusCode"] == 200 and answer["headers"]["content-type"] == "application/json"
    assert body(answer) == expected
    assert expected[0]["class"] == "n02124075 Egyptian cat" and len(expected) == 5


def test_get_and_post_with_a_url(served: ServedModel, expected: list[dict[str, Any]], kitten_jpg: Path,
                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mmsctl import addresses

    shutil.copy(kitten_jpg, tmp_path / "kitten.jpg")
    seen: list[tuple[str, str]] = []
    lookups: list[str] = []
    monkeypatch.setattr(addresses, "system_resolver", lambda host, port: lookups.append(host) or ["127.0.0.1"])
    with serving_images(tmp_path, seen) as base:
        refused = runtime(served).handle(api_gateway_event("GET", query={"url": f"{base}/img/kitten.jpg"}))
        assert refused["statusCode"] == 403 and body(refused)["type"] == "ForbiddenException"
        assert "loopback" in body(refused)["message"] and seen == []  # a hostile ?url= never reaches the host
        port = base.rsplit(":", 1)[1]  # a public-looking name that DNS answers with loopback
        named = runtime(served).handle(function_url_event("GET", query={"url": f"http://images.example.com:{port}/"}))
        assert named["statusCode"] == 403 and "images.example.com resolves to 127.0.0.1" in body(named)["message"]
        assert lookups == ["images.example.com"] and seen == []
        allowed_name = runtime(served, fetch_allow=AllowList.parse("images.example.com"))
        bounced = allowed_name.handle({"url": f"http://images.example.com:{port}/to?u={base}/img/kitten.jpg"})
        assert bounced["code"] == 403 and "127.0.0.1 is a loopback address" in bounced["message"]  # the redirect
        assert [path for path, _ in seen] == [f"/to?u={base}/img/kitten.jpg"]
        seen.clear()
        metadata = runtime(served).handle({"url": "http://169.254.169.254/latest/meta-data/"})
        assert metadata["code"] == 403 and "instance-metadata" in metadata["message"]  # a direct invoke's body
        assert "no allow-list opens it" in metadata["message"]  # not even MMSCTL_LAMBDA_FETCH_ALLOW
        rt = runtime(served, fetch_allow=AllowList.parse("127.0.0.1"))  # MMSCTL_LAMBDA_FETCH_ALLOW
        url = f"{base}/img/kitten.jpg"
        assert body(rt.handle(api_gateway_event("GET", query={"url": url}))) == expected  # the article's endpoint
        v2 = sample("function_url_post.json")
        v2.update(body=json.dumps({"url": url}), headers={"content-type": "application/json"}, queryStringParameters={"topk": "3"})
        assert body(rt.handle(v2)) == expected[:3]
        assert rt.handle({"url": url}) == expected  # a direct invoke, as from the console
        missing = rt.handle(function_url_event("GET", query={"url": f"{base}/img/nope.jpg"}))
    assert missing["statusCode"] == 502 and body(missing)["type"] == "BadGatewayException"


def _png_header(width: int, height: int) -> bytes:
    """A PNG whose header claims width x height (the pixels never follow): a decompression bomb's shape."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


@pytest.mark.parametrize(("event", "status", "message"), [
    (function_url_event("POST", body=b"hello", content_type="image/jpeg"), 400, "Corrupted image input"),
    (function_url_event("POST", body=b"", content_type="image/jpeg"), 400, "Empty image input"),
    (function_url_event("POST", body=_png_header(8000, 8000), content_type="image/png"), 413, "64000000 pixels"),
    (function_url_event("POST", body=_png_header(30000, 30000), content_type="image/png"), 413, "pixels"),
    (function_url_event("POST", body=b"x" * 5000, content_type="image/jpeg"), 413, "5000 bytes"),
    (function_url_event("PUT", body=b"x"), 405, "PUT is not supported"),
    (function_url_event("GET"), 400, "pass ?url=IMAGE_URL"),
    (function_url_event("GET", query={"url": "file:///etc/passwd"}), 400, "http(s) URL"),
    (function_url_event("GET", query={"url": "http://127.0.0.1:1/x.jpg", "topk": "0"}), 400, "topk must be between"),
    (function_url_event("POST", body=b'{"uri": 1}', content_type="application/json"), 400, '{"url": "IMAGE_URL"}'),
], ids=["not-an-image", "empty", "too-many-pixels", "png-bomb", "too-large", "method", "no-url", "file-url", "topk",
        "json-without-url"])
def test_bad_requests_get_mms_error_bodies(served: ServedModel, event: dict[str, Any], status: int,
                                           message: str) -> None:
    answer = runtime(served, max_image_bytes=4096).handle(event)
    assert answer["statusCode"] == status
    error = body(answer)
    assert set(error) == {"code", "type", "message"} and error["code"] == status
    assert message in error["message"]


def test_ping_warm_and_unknown_events(served: ServedModel) -> None:
    rt = runtime(served)
    assert body(rt.handle(function_url_event("GET", path="/ping"))) == {"status": "Healthy"}
    assert rt.handle(dict(WARM_EVENT)) == {"warm": True, "model": "squeezenet_v1.1"}
    assert rt.handle(sample("scheduled.json"))["warm"] is True
    assert rt.handle({"what": "ever"}) == {"ignored": "not an S3, function URL, API Gateway, schedule or {\"url\": …} event"}


# -- S3 records, against moto ----------------------------------------------------------------------


@pytest.fixture
def buckets(moto: Moto) -> Any:  # noqa: F811 - the fixture
    s3 = boto3.client("s3")
    for name in ("in-bucket", "out-bucket"):
        s3.create_bucket(Bucket=name)
    s3.put_bucket_versioning(Bucket="in-bucket", VersioningConfiguration={"Status": "Enabled"})
    return s3


def _doc(s3: Any, key: str) -> dict[str, Any]:
    return json.loads(s3.get_object(Bucket="out-bucket", Key=key)["Body"].read())


def test_s3_put_writes_the_prediction_object(served: ServedModel, buckets: Any, expected: list[dict[str, Any]],
                                             kitten_jpg: Path) -> None:
    key = "incoming/cats/my kitten (1)+é.jpg"
    rt = runtime(served, input_bucket="in-bucket", input_prefix="incoming/", output_bucket="out-bucket",
                 output_prefix="predictions/")
    answer = rt.handle(_event(buckets, key, kitten_jpg.read_bytes()), None)
    out_key = "predictions/cats/my kitten (1)+é.jpg.json"
    assert answer == {"processed": [{"input": f"s3://in-bucket/{key}", "output": f"s3://out-bucket/{out_key}",
                                     "status": 200}]}
    doc = _doc(buckets, out_key)
    assert doc["result"] == expected and doc["model"] == "squeezenet_v1.1" and doc["status"] == 200
    assert doc["input"]["key"] == key and doc["input"]["version_id"]
    head = buckets.head_object(Bucket="out-bucket", Key=out_key)
    assert head["ContentType"] == "application/json"


def test_bad_objects_get_error_objects_never_an_exception(served: ServedModel, buckets: Any) -> None:
    rt = runtime(served, input_bucket="in-bucket", output_bucket="out-bucket", max_image_bytes=4096)
    corrupt = rt.handle(_event(buckets, "a/not-an-image.jpg", b"hello"))
    assert corrupt["processed"][0]["status"] == 400
    error = _doc(buckets, "a/not-an-image.jpg.error.json")["error"]
    assert error["type"] == "BadRequestException" and "Corrupted image input" in error["message"]

    assert rt.handle(_event(buckets, "empty.png", b""))["processed"][0]["status"] == 400
    assert "Empty image input" in _doc(buckets, "empty.png.error.json")["error"]["message"]

    big = rt.handle(_event(buckets, "big.jpg", b"x" * 5000))
    assert big["processed"][0]["status"] == 413
    assert _doc(buckets, "big.jpg.error.json")["error"]["message"] == "5000 bytes is more than the 4096 allowed"

    event = _event(buckets, "gone.jpg", b"x")
    buckets.delete_object(Bucket="in-bucket", Key="gone.jpg", VersionId=event["Records"][0]["s3"]["object"]["versionId"])
    assert rt.handle(event)["processed"][0]["status"] == 404
    assert _doc(buckets, "gone.jpg.error.json")["error"]["type"] == "NoSuchVersion"


def test_records_from_another_bucket_are_ignored(served: ServedModel, buckets: Any, kitten_jpg: Path) -> None:
    rt = runtime(served, input_bucket="some-other-bucket", output_bucket="out-bucket")
    answer = rt.handle(_event(buckets, "k.jpg", kitten_jpg.read_bytes()))
    assert answer == {"processed": [{"input": "s3://in-bucket/k.jpg", "status": "ignored"}]}
    assert buckets.list_objects_v2(Bucket="out-bucket").get("KeyCount") == 0


def test_only_a_failed_write_raises_after_every_record_was_tried(served: ServedModel, buckets: Any,
                                                                 kitten_jpg: Path) -> None:
    rt = runtime(served, input_bucket="in-bucket", output_bucket="no-such-output-bucket")
    event = _event(buckets, "one.jpg", kitten_jpg.read_bytes())
    event["Records"] += _event(buckets, "two.jpg", kitten_jpg.read_bytes())["Records"]
    with pytest.raises(CloudError, match=r"2 of 2 object\(s\) failed and may succeed on retry"):
        rt.handle(event)



class _Clock:
    """A Lambda context whose remaining time is scripted: plenty for *calls* checks, then almost none."""

    aws_request_id = "deadline-test"

    def __init__(self, calls: int) -> None:
        self.calls = calls

    def get_remaining_time_in_millis(self) -> int:
        self.calls -= 1
        return 60_000 if self.calls >= 0 else 400


def test_a_batch_stops_before_the_deadline_and_its_retry_skips_what_is_written(
        served: ServedModel, buckets: Any, kitten_jpg: Path) -> None:
    rt = runtime(served, input_bucket="in-bucket", output_bucket="out-bucket")
    event: dict[str, Any] = {"Records": []}
    for n in range(8):
        event["Records"] += _event(buckets, f"batch/{n}.jpg", kitten_jpg.read_bytes())["Records"]
    with pytest.raises(CloudError, match=r"stopped before Lambda's deadline with 5 of 8 record\(s\) left; "
                                         r"a retry of the event skips the 3 already written"):
        rt.handle(event, _Clock(calls=3))
    written = sorted(o["Key"] for o in buckets.list_objects_v2(Bucket="out-bucket")["Contents"])
    assert written == [f"batch/{n}.jpg.json" for n in range(3)]
    retried = rt.handle(event, None)["processed"]  # Lambda's retry: the same event
    assert [r.get("skipped", False) for r in retried] == [True] * 3 + [False] * 5
    assert len(buckets.list_objects_v2(Bucket="out-bucket")["Contents"]) == 8
    # A new version of an input is a new answer, not a skip: the output names the version it answers.
    again = rt.handle(_event(buckets, "batch/0.jpg", kitten_jpg.read_bytes()), None)["processed"]
    assert again[0]["status"] == 200 and "skipped" not in again[0]


@pytest.mark.parametrize("event, path", [
    ({"Records": [{"eventSource": "aws:s3", "s3": "x"}]}, "Records[0].s3"),
    ({"Records": [{"eventSource": "aws:s3", "s3": {"bucket": {"name": "b"}, "object": "k"}}]}, "Records[0].s3.object"),
    ({"version": "2.0", "requestContext": {"http": "GET"}}, "requestContext.http"),
])
def test_malformed_events_are_answered_never_raised(served: ServedModel, event: dict[str, Any], path: str) -> None:
    answer = runtime(served).handle(event)
    assert answer["path"] == path and answer["ignored"].startswith(f"malformed event: {path} is ")
