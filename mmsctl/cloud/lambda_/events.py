"""The events Lambda hands the handler, parsed into plain data, and built again by the control plane.

The handler parses them (:func:`parse_event`); ``lambda deploy`` schedules
:data:`WARM_EVENT`, ``lambda invoke`` sends function-URL requests, and ``run-local``
builds S3 notifications: one module for each shape, both directions.

Four shapes arrive (examples from AWS's documentation in ``tests/lambda_/events/``):

* an S3 notification (``Records[].s3``): object keys arrive URL-encoded (``a+b%28c%29.jpg``
  for ``a b(c).jpg``) and are decoded here, once;
* a function-URL request (payload format 2.0: ``version: "2.0"``, ``requestContext.http``);
* an API Gateway REST proxy request (payload 1.0: ``httpMethod``, ``resource``), as in the
  source article's HTTP endpoint;
* the keep-warm schedule (the constant ``{"mmsctl": "warm"}`` or a plain EventBridge
  ``Scheduled Event``), and a direct invoke ``{"url": "…"}`` (``aws lambda invoke``, the console).

Anything else is :class:`Unknown`: logged and answered, never raised (Lambda would retry it).
"""

from __future__ import annotations

import base64
import binascii
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Optional, Union
from urllib.parse import quote_plus, unquote_plus, urlencode

__all__ = [
    "WARM_EVENT",
    "DirectRequest",
    "Event",
    "HttpRequest",
    "S3Object",
    "S3Put",
    "Unknown",
    "Warm",
    "api_gateway_event",
    "function_url_event",
    "http_response",
    "parse_event",
    "s3_put_event",
]

#: What the keep-warm rule sends (its target's constant input).
WARM_EVENT = {"mmsctl": "warm"}


@dataclass(frozen=True)
class S3Object:
    """One object of an S3 notification, key decoded."""

    bucket: str
    key: str
    size: Optional[int] = None
    etag: Optional[str] = None
    version_id: Optional[str] = None
    event_name: str = ""

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


@dataclass(frozen=True)
class S3Put:
    records: list[S3Object]


@dataclass(frozen=True)
class HttpRequest:
    """A request from a function URL (``v2``) or API Gateway's REST proxy (``v1``)."""

    version: str  # "2.0" | "1.0"
    method: str
    path: str
    query: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names
    body: Optional[bytes] = None
    body_error: Optional[str] = None  # isBase64Encoded with a body that is not base64

    @property
    def content_type(self) -> Optional[str]:
        value = self.headers.get("content-type")
        return value.split(";", 1)[0].strip().lower() if value else None


@dataclass(frozen=True)
class DirectRequest:
    """``aws lambda invoke --payload '{"url": "…"}'``: the article's direct event."""

    url: str
    top_k: Optional[str] = None


@dataclass(frozen=True)
class Warm:
    source: str


@dataclass(frozen=True)
class Unknown:
    """An event the handler does not serve: *reason* says why, *path* where in the event (``""``: the whole)."""

    reason: str
    path: str = ""


Event = Union[S3Put, HttpRequest, DirectRequest, Warm, Unknown]


class _Shape(Exception):
    """A field of the event is not of the type its shape needs; *path* names it (``Records[0].s3.object``)."""

    def __init__(self, path: str, expected: str, value: Any) -> None:
        super().__init__(f"{path} is {_kind(value)}, not {expected}")
        self.path = path


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _object(parent: dict[str, Any], key: str, path: str, *, required: bool = False) -> dict[str, Any]:
    """``parent[key]`` as an object: absent or null is ``{}`` unless *required*."""
    value = parent.get(key)
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        raise _Shape(_join(path, key), "an object", value)
    return value


def _text(parent: dict[str, Any], key: str, path: str, *, default: Optional[str] = None) -> Optional[str]:
    """``parent[key]`` as a string; absent or null is *default*."""
    value = parent.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise _Shape(_join(path, key), "a string", value)
    return value


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def parse_event(event: Any) -> Event:
    """Which event this is, with every field it uses read and type-checked once; never raises.

    A field of the wrong type (an ``s3`` that is a string, ``requestContext.http`` that is not an
    object) makes the event :class:`Unknown` with the field's path, never an exception: Lambda
    counts an exception as a failure and retries the same event.
    """
    if not isinstance(event, dict):
        return Unknown(f"event is {_kind(event)}, not a JSON object")
    try:
        return _parse(event)
    except _Shape as exc:
        return Unknown(f"malformed event: {exc}", exc.path)


def _parse(event: dict[str, Any]) -> Event:
    if event == WARM_EVENT:
        return Warm("mmsctl")
    if event.get("source") == "aws.events" and event.get("detail-type") == "Scheduled Event":
        return Warm("eventbridge")
    if "Records" in event:
        records = event["Records"]
        if not isinstance(records, list):
            raise _Shape("Records", "an array", records)
        return _s3(records)
    if event.get("source") == "aws.s3" and event.get("detail-type") == "Object Created":
        return _s3_eventbridge(event)
    if event.get("version") == "2.0" and "requestContext" in event:
        return _http_v2(event)
    if "httpMethod" in event:
        return _http_v1(event)
    if isinstance(event.get("url"), str):
        top_k = event.get("topk", event.get("top_k"))
        if isinstance(top_k, bool) or (top_k is not None and not isinstance(top_k, (str, int))):
            raise _Shape("topk", "a number", top_k)
        return DirectRequest(event["url"], None if top_k is None else str(top_k))
    return Unknown("not an S3, function URL, API Gateway, schedule or {\"url\": …} event")


def _size(obj: dict[str, Any]) -> Optional[int]:
    size = obj.get("size")
    return size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None


def _s3(records: list[Any]) -> Event:
    objects: list[S3Object] = []
    for n, record in enumerate(records):
        path = f"Records[{n}]"
        if not isinstance(record, dict):
            raise _Shape(path, "an object", record)
        if record.get("eventSource") != "aws:s3":
            return Unknown("a record that is not from S3 (eventSource is not aws:s3)", f"{path}.eventSource")
        s3 = _object(record, "s3", path, required=True)
        bucket = _text(_object(s3, "bucket", f"{path}.s3", required=True), "name", f"{path}.s3.bucket")
        obj = _object(s3, "object", f"{path}.s3", required=True)
        key = _text(obj, "key", f"{path}.s3.object")
        if bucket is None or key is None:
            return Unknown("an S3 record without bucket name or object key", f"{path}.s3")
        objects.append(S3Object(
            bucket=bucket,
            key=unquote_plus(key),  # S3 sends keys form-encoded: spaces as '+', the rest %XX
            size=_size(obj),
            etag=_text(obj, "eTag", f"{path}.s3.object"),
            version_id=_text(obj, "versionId", f"{path}.s3.object") or None,
            event_name=_text(record, "eventName", path, default="") or "",
        ))
    return S3Put(objects)


def _s3_eventbridge(event: dict[str, Any]) -> Event:
    detail = _object(event, "detail", "", required=True)
    bucket = _text(_object(detail, "bucket", "detail", required=True), "name", "detail.bucket")
    obj = _object(detail, "object", "detail", required=True)
    key = _text(obj, "key", "detail.object")
    if bucket is None or key is None:
        return Unknown("an EventBridge S3 event without bucket name or object key", "detail")
    # EventBridge's S3 events carry the key as it is (not form-encoded).
    return S3Put([S3Object(bucket, key, _size(obj), _text(obj, "etag", "detail.object"),
                           _text(obj, "version-id", "detail.object") or None, "Object Created")])


try:  # SIMD base64: a function-URL photo's body decodes far faster than with binascii (Lambda bills the time)
    import pybase64 as _fast64
except ImportError:  # pragma: no cover - a declared dependency; the standard library's, as fallback
    _fast64 = base64  # type: ignore[misc]


def _body(event: dict[str, Any]) -> tuple[Optional[bytes], Optional[str]]:
    body = event.get("body")
    if body is None:
        return None, None
    if not isinstance(body, str):
        return None, "the request body is not a string"
    if event.get("isBase64Encoded"):
        try:
            return _fast64.b64decode(body, validate=True), None
        except (binascii.Error, ValueError):
            return None, "the request body is marked base64 but is not"
    return body.encode("utf-8"), None


def _strings(event: dict[str, Any], key: str, *, lower: bool = False) -> dict[str, str]:
    """A map of strings (query parameters, headers); nulls dropped, a non-object refused."""
    raw = _object(event, key, "")
    return {(str(k).lower() if lower else str(k)): str(v) for k, v in raw.items() if v is not None}


def _http_v2(event: dict[str, Any]) -> Event:
    http = _object(_object(event, "requestContext", "", required=True), "http", "requestContext")
    body, error = _body(event)
    method = _text(http, "method", "requestContext.http", default="GET") or "GET"
    return HttpRequest("2.0", method.upper(), _text(event, "rawPath", "", default="/") or "/",
                       _strings(event, "queryStringParameters"), _strings(event, "headers", lower=True), body, error)


def _http_v1(event: dict[str, Any]) -> Event:
    body, error = _body(event)
    method = _text(event, "httpMethod", "", default="GET") or "GET"
    return HttpRequest("1.0", method.upper(), _text(event, "path", "", default="/") or "/",
                       _strings(event, "queryStringParameters"), _strings(event, "headers", lower=True), body, error)


def http_response(request: HttpRequest, status: int, body: bytes,
                  content_type: Optional[str] = "application/json") -> dict[str, Any]:
    """The answer Lambda turns into an HTTP response (the same keys for payload 1.0 and 2.0)."""
    headers = {"content-type": content_type} if content_type else {}
    try:
        text, encoded = body.decode("utf-8"), False
    except UnicodeDecodeError:
        text, encoded = base64.b64encode(body).decode("ascii"), True
    return {"statusCode": status, "headers": headers, "body": text, "isBase64Encoded": encoded}


# -- building events (run-local, invoke) ------------------------------------------------------------


def _now() -> datetime:
    return datetime.now(timezone.utc)


def s3_put_event(bucket: str, key: str, *, size: int, etag: str = "", version_id: Optional[str] = None,
                 region: str = "us-east-1", account: str = "123456789012") -> dict[str, Any]:
    """The notification S3 sends a function for one ``PutObject`` (record format 2.1), key URL-encoded."""
    obj: dict[str, Any] = {"key": quote_plus(key, safe="/"), "size": size, "eTag": etag.strip('"'),
                           "sequencer": uuid.uuid4().hex[:18].upper()}
    if version_id:
        obj["versionId"] = version_id
    return {"Records": [{
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "awsRegion": region,
        "eventTime": _now().strftime("%Y-%m-%dT%H:%M:%S.") + f"{_now().microsecond // 1000:03d}Z",
        "eventName": "ObjectCreated:Put",
        "userIdentity": {"principalId": f"AWS:{account}"},
        "requestParameters": {"sourceIPAddress": "127.0.0.1"},
        "responseElements": {"x-amz-request-id": uuid.uuid4().hex[:16].upper(),
                             "x-amz-id-2": base64.b64encode(uuid.uuid4().bytes).decode("ascii")},
        "s3": {
            "s3SchemaVersion": "1.0",
            "configurationId": "mmsctl-run-local",
            "bucket": {"name": bucket, "ownerIdentity": {"principalId": account},
                       "arn": f"arn:aws:s3:::{bucket}"},
            "object": obj,
        },
    }]}


def function_url_event(method: str = "GET", *, query: Optional[dict[str, str]] = None,
                       body: Optional[bytes] = None, content_type: Optional[str] = None,
                       path: str = "/", domain: str = "local.lambda-url.us-east-1.on.aws") -> dict[str, Any]:
    """A function-URL request (payload format 2.0), the body base64-encoded as Lambda does for binary."""
    headers = {"host": domain, "user-agent": "mmsctl"}
    if content_type:
        headers["content-type"] = content_type
    now = _now()
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": urlencode(query or {}),
        "headers": headers,
        "requestContext": {
            "accountId": "anonymous",
            "apiId": domain.split(".", 1)[0],
            "domainName": domain,
            "domainPrefix": domain.split(".", 1)[0],
            "http": {"method": method.upper(), "path": path, "protocol": "HTTP/1.1",
                     "sourceIp": "127.0.0.1", "userAgent": "mmsctl"},
            "requestId": str(uuid.uuid4()),
            "routeKey": "$default",
            "stage": "$default",
            "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now.timestamp() * 1000),
        },
        "isBase64Encoded": body is not None,
    }
    if query:
        event["queryStringParameters"] = dict(query)
    if body is not None:
        event["body"] = base64.b64encode(body).decode("ascii")
    return event


def api_gateway_event(method: str = "GET", *, query: Optional[dict[str, str]] = None,
                      body: Optional[bytes] = None, content_type: Optional[str] = None,
                      path: str = "/predict") -> dict[str, Any]:
    """An API Gateway REST proxy request (payload format 1.0), as the source article's endpoint got."""
    headers = {"Host": "example.execute-api.us-east-1.amazonaws.com", "User-Agent": "mmsctl"}
    if content_type:
        headers["Content-Type"] = content_type
    return {
        "resource": path,
        "path": path,
        "httpMethod": method.upper(),
        "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": dict(query) if query else None,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} if query else None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {"resourcePath": path, "httpMethod": method.upper(), "stage": "prod",
                           "requestId": str(uuid.uuid4())},
        "body": base64.b64encode(body).decode("ascii") if body is not None else None,
        "isBase64Encoded": body is not None,
    }

