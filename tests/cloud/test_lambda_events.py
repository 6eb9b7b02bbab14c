"""The event shapes Lambda delivers, parsed; and the ones run-local and invoke build, parsed back."""

from __future__ import annotations

import base64
import json

from mmsctl.cloud.lambda_.events import (
    WARM_EVENT,
    DirectRequest,
    HttpRequest,
    S3Put,
    Unknown,
    Warm,
    api_gateway_event,
    function_url_event,
    http_response,
    parse_event,
    s3_put_event,
)
from tests.lambda_.conftest import sample


def test_documented_s3_put_event_decodes_the_key() -> None:
    parsed = parse_event(sample("s3_put.json"))
    assert isinstance(parsed, S3Put)
    [obj] = parsed.records
    assert (obj.bucket, obj.key, obj.size, obj.event_name) == ("example-bucket", "test/key", 1024, "ObjectCreated:Put")
    assert obj.uri == "s3://example-bucket/test/key"


def test_s3_keys_are_form_decoded_once() -> None:
    event = sample("s3_put.json")
    # What S3 sends for the key "cats/my kitten (1)+1%.jpg": spaces as '+', a literal '+' as %2B.
    event["Records"][0]["s3"]["object"]["key"] = "cats/my+kitten+%281%29%2B1%25.jpg"
    [obj] = parse_event(event).records  # type: ignore[union-attr]
    assert obj.key == "cats/my kitten (1)+1%.jpg"


def test_built_s3_event_round_trips_awkward_keys() -> None:
    key = "in/été 2024/a+b (c)&d%.JPG"
    event = s3_put_event("in-bucket", key, size=5, etag='"abc"', version_id="v1")
    encoded = event["Records"][0]["s3"]["object"]["key"]
    assert " " not in encoded and "+" in encoded  # spaces travel as '+', like S3's own events
    [obj] = parse_event(json.loads(json.dumps(event))).records  # type: ignore[union-attr]
    assert (obj.bucket, obj.key, obj.size, obj.etag, obj.version_id) == ("in-bucket", key, 5, "abc", "v1")


def test_function_url_request_payload_2() -> None:
    parsed = parse_event(sample("function_url_post.json"))
    assert isinstance(parsed, HttpRequest)
    assert (parsed.version, parsed.method, parsed.path) == ("2.0", "POST", "/my/path")
    assert parsed.body == b"Hello from client!"
    assert parsed.query == {"parameter1": "value1,value2", "parameter2": "value"}

    built = parse_event(function_url_event("POST", body=b"\xff\xd8jpeg", content_type="image/jpeg",
                                           query={"topk": "3"}))
    assert isinstance(built, HttpRequest)
    assert (built.body, built.content_type, built.query) == (b"\xff\xd8jpeg", "image/jpeg", {"topk": "3"})


def test_api_gateway_proxy_payload_1() -> None:
    parsed = parse_event(sample("apigateway_proxy.json"))
    assert isinstance(parsed, HttpRequest)
    assert (parsed.version, parsed.method, parsed.path) == ("1.0", "POST", "/path/to/resource")
    assert parsed.body == b'{"test":"body"}'  # isBase64Encoded: decoded
    assert parsed.headers["user-agent"] == "Custom User Agent String"  # header names lower-cased

    built = parse_event(api_gateway_event("GET", query={"url": "http://127.0.0.1/k.jpg"}))
    assert isinstance(built, HttpRequest) and built.query == {"url": "http://127.0.0.1/k.jpg"} and built.body is None


def test_bad_base64_body_is_reported_not_raised() -> None:
    event = sample("function_url_post.json")
    event.update(isBase64Encoded=True, body="not base64 !!")
    parsed = parse_event(event)
    assert isinstance(parsed, HttpRequest) and parsed.body is None
    assert parsed.body_error == "the request body is marked base64 but is not"


def test_schedules_direct_calls_and_strangers() -> None:
    assert parse_event(dict(WARM_EVENT)) == Warm("mmsctl")
    assert parse_event(sample("scheduled.json")) == Warm("eventbridge")
    assert parse_event({"url": "http://x/y.jpg", "topk": 3}) == DirectRequest("http://x/y.jpg", "3")
    assert isinstance(parse_event([1, 2]), Unknown)
    assert isinstance(parse_event({"hello": "world"}), Unknown)
    assert isinstance(parse_event({"Records": [{"eventSource": "aws:sqs"}]}), Unknown)


def test_http_response_encodes_binary_bodies() -> None:
    request = parse_event(function_url_event("GET"))
    assert isinstance(request, HttpRequest)
    text = http_response(request, 200, b'{"a": 1}')
    assert text == {"statusCode": 200, "headers": {"content-type": "application/json"}, "body": '{"a": 1}',
                    "isBase64Encoded": False}
    binary = http_response(request, 200, b"\xff\x00", "image/png")
    assert binary["isBase64Encoded"] and base64.b64decode(binary["body"]) == b"\xff\x00"
