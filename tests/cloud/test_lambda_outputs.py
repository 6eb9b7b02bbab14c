"""The contract of the handler and the control plane: output-object names and bodies, model URIs in S3."""

from __future__ import annotations

import json

import pytest

from mmsctl.cloud.lambda_.env import parse_s3_uri
from mmsctl.cloud.lambda_.events import S3Object
from mmsctl.cloud.lambda_.outputs import error_document, output_key, result_document
from mmsctl.errors import ConfigError


def test_output_keys_keep_the_input_path_below_the_prefixes() -> None:
    assert output_key("incoming/cats/a b.jpg", input_prefix="incoming/", output_prefix="predictions/") == \
        "predictions/cats/a b.jpg.json"
    assert output_key("incoming/cats/a b.jpg", input_prefix="incoming/", output_prefix="predictions/", error=True) \
        == "predictions/cats/a b.jpg.error.json"
    assert output_key("x.png") == "x.png.json"
    assert output_key("other/x.png", input_prefix="incoming/") == "other/x.png.json"


def test_an_output_key_over_s3s_limit_falls_back_to_a_hash() -> None:
    key = "k/" + "é" * 600 + ".jpg"  # 1206 bytes
    out = output_key(key, output_prefix="p/")
    assert out.startswith("p/") and out.endswith(".json") and len(out.encode()) < 1024
    assert out == output_key(key, output_prefix="p/")  # stable
    assert out != output_key(key + "x", output_prefix="p/")


def test_documents() -> None:
    obj = S3Object("in", "a/b.jpg", 10, "e", "v1")
    doc = json.loads(result_document(obj, model="squeezenet", result=[{"class": "c", "probability": 1.0}],
                                     duration_ms=12.345))
    assert doc["input"] == {"bucket": "in", "key": "a/b.jpg", "version_id": "v1", "size": 10, "etag": "e"}
    assert (doc["model"], doc["status"], doc["duration_ms"]) == ("squeezenet", 200, 12.35)
    assert doc["result"] == [{"class": "c", "probability": 1.0}]
    err = json.loads(error_document(obj, model="m", code=400, type="BadRequestException", message="Empty image input",
                                    request_id="r1"))
    assert err["error"] == {"code": 400, "type": "BadRequestException", "message": "Empty image input"}
    assert (err["status"], err["request_id"]) == (400, "r1")


def test_s3_uris() -> None:
    assert str(parse_s3_uri("s3://b/k/m.mar?versionId=abc")) == "s3://b/k/m.mar?versionId=abc"
    where = parse_s3_uri("s3://b/k/m.mar", "v2")
    assert (where.bucket, where.key, where.version_id) == ("b", "k/m.mar", "v2")
    for bad in ("s3://b", "s3://b/", "https://b/k", "b/k"):
        with pytest.raises(ConfigError):
            parse_s3_uri(bad)
