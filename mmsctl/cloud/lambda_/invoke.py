"""``mmsctl lambda invoke``: one synchronous call, or one object through the S3 pipeline, with its figures.

A synchronous call sends the same function-URL request (payload 2.0) that
``curl -T kitten.jpg https://….lambda-url…`` would produce, asks for the log tail
(``LogType=Tail``) and reads Lambda's ``REPORT`` line from it: duration, billed
duration, init duration (present only on a cold start) and max memory.
``--s3 FILE`` uploads into the input bucket and polls the output bucket for the
answer (or the error object), timing the whole pipeline.
"""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from mmsctl.cloud.aws.errors import aws_code
from mmsctl.cloud.aws.session import AwsSession
from mmsctl.cloud.aws.tags import LAMBDA_INPUT, LAMBDA_OUTPUT
from mmsctl.cloud.lambda_ import env
from mmsctl.cloud.lambda_.events import function_url_event
from mmsctl.cloud.lambda_.resources import function_or_none
from mmsctl.errors import CloudError, InputNotFoundError, NotFoundError, RequestTimeout, UsageError

__all__ = ["InvokeResult", "NoPipeline", "Report", "TooBigToSend", "invoke_pipeline", "invoke_sync", "parse_report"]


class TooBigToSend(UsageError):
    """An image over the synchronous payload limit: the S3 pipeline takes it."""

    reference = "lambda-too-big"


class NoPipeline(UsageError):
    """A function deployed without the S3 pipeline (no input and output bucket)."""

    reference = "lambda-no-pipeline"

#: Lambda's synchronous payload limit; a base64 body grows by 4/3 inside the event.
MAX_PAYLOAD = 6 * 1024 * 1024
MAX_SYNC_IMAGE = (MAX_PAYLOAD - 8 * 1024) * 3 // 4
_INVOKE_READ_TIMEOUT = 900.0 + 30.0
_REPORT_FIELDS = {
    "Duration": "duration_ms",
    "Billed Duration": "billed_ms",
    "Memory Size": "memory_mb",
    "Max Memory Used": "max_memory_mb",
    "Init Duration": "init_ms",
}
_FIELD = re.compile(r"(Duration|Billed Duration|Memory Size|Max Memory Used|Init Duration): ([\d.]+) (ms|MB)")
_IMAGE_TYPES = {".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png", ".gif": "image/gif",
                ".bmp": "image/bmp", ".webp": "image/webp"}


@dataclass
class Report:
    """The figures of one ``REPORT RequestId: …`` line."""

    request_id: Optional[str] = None
    duration_ms: Optional[float] = None
    billed_ms: Optional[float] = None
    memory_mb: Optional[float] = None
    max_memory_mb: Optional[float] = None
    init_ms: Optional[float] = None

    @property
    def cold(self) -> bool:
        return self.init_ms is not None

    def to_dict(self) -> dict[str, Any]:
        return {"request_id": self.request_id, "duration_ms": self.duration_ms, "billed_ms": self.billed_ms,
                "init_ms": self.init_ms, "cold_start": self.cold, "memory_mb": self.memory_mb,
                "max_memory_mb": self.max_memory_mb}


def parse_report(log_text: str) -> Optional[Report]:
    """The last ``REPORT`` line of a log (tab-separated ``Name: value unit`` fields), or None."""
    lines = [ln for ln in log_text.splitlines() if ln.startswith("REPORT RequestId:")]
    if not lines:
        return None
    line = lines[-1]
    report = Report(request_id=line.split("RequestId:", 1)[1].split()[0].strip())
    for name, value, _unit in _FIELD.findall(line):
        setattr(report, _REPORT_FIELDS[name], float(value))
    return report


@dataclass
class InvokeResult:
    """The function's answer and how long it took."""

    status: int
    result: Any
    report: Optional[Report] = None
    function_error: Optional[str] = None
    latency_ms: Optional[float] = None
    input: Optional[str] = None
    output: Optional[str] = None
    log_tail: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.function_error is None and 200 <= self.status < 300

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"status": self.status, "result": self.result}
        if self.function_error:
            data["function_error"] = self.function_error
        if self.report:
            data["report"] = self.report.to_dict()
        if self.latency_ms is not None:
            data["latency_ms"] = round(self.latency_ms, 1)
        if self.input:
            data["input"], data["output"] = self.input, self.output
        return data


def content_type(path: Path) -> str:
    return _IMAGE_TYPES.get(path.suffix.lower(), "application/octet-stream")


def image_event(image: Path) -> dict[str, Any]:
    """The function-URL POST of *image* (refused over Lambda's synchronous payload limit)."""
    try:
        size = image.stat().st_size
    except FileNotFoundError as exc:
        raise InputNotFoundError(f"{image}: no such file") from exc
    if size > MAX_SYNC_IMAGE:
        raise TooBigToSend(f"{image}: {size} bytes does not fit a synchronous invoke ({MAX_SYNC_IMAGE} at most, "
                           "base64 in a 6 MB payload)", hint="send it through the S3 pipeline")
    return function_url_event("POST", body=image.read_bytes(), content_type=content_type(image))


def url_event(url: str) -> dict[str, Any]:
    """The function-URL ``GET ?url=URL`` (the function checks and fetches *url*)."""
    return function_url_event("GET", query={"url": url})


def invoke_sync(aws: AwsSession, name: str, event: dict[str, Any]) -> InvokeResult:
    """Invoke *name* with *event* (RequestResponse, log tail) and unpack its HTTP-shaped answer."""
    # Up to Lambda's 15-minute limit, and never retried: a retry would run the function again.
    answer = aws.call("lambda", "invoke", read_timeout=_INVOKE_READ_TIMEOUT, max_attempts=0, FunctionName=name,
                      InvocationType="RequestResponse", LogType="Tail", Payload=json.dumps(event).encode("utf-8"))
    stream = answer.get("Payload")
    raw = stream.read(MAX_PAYLOAD + 1) if stream is not None else b""
    log_text = base64.b64decode(answer.get("LogResult") or "").decode("utf-8", "replace")
    report = parse_report(log_text)
    try:
        payload = json.loads(raw) if raw else None
    except ValueError:
        payload = raw.decode("utf-8", "replace")
    error = answer.get("FunctionError")
    tail = [ln for ln in log_text.splitlines() if ln.strip()]
    if error:
        return InvokeResult(int(answer.get("StatusCode", 200)), payload, report, error, log_tail=tail)
    if isinstance(payload, dict) and "statusCode" in payload:
        body: Any = payload.get("body")
        if payload.get("isBase64Encoded") and isinstance(body, str):
            body = base64.b64decode(body).decode("utf-8", "replace")
        try:
            body = json.loads(body) if isinstance(body, str) else body
        except ValueError:
            pass
        return InvokeResult(int(payload["statusCode"]), body, report, log_tail=tail)
    return InvokeResult(int(answer.get("StatusCode", 200)), payload, report, log_tail=tail)


def _pipeline_ends(aws: AwsSession, name: str) -> tuple[str, str, str, str]:
    found = function_or_none(aws, name)
    if found is None:
        raise NotFoundError(f"no function {name} in {aws.region}")
    tags = found.get("Tags") or {}
    variables = (found["Configuration"].get("Environment") or {}).get("Variables") or {}
    in_bucket = variables.get(env.ENV_INPUT_BUCKET) or tags.get(LAMBDA_INPUT)
    out_bucket = variables.get(env.ENV_OUTPUT_BUCKET) or tags.get(LAMBDA_OUTPUT)
    if not in_bucket or not out_bucket:
        raise NoPipeline(f"function {name} has no S3 pipeline",
                         hint="deploy it with an input bucket and an output bucket")
    return in_bucket, variables.get(env.ENV_INPUT_PREFIX, ""), out_bucket, variables.get(env.ENV_OUTPUT_PREFIX, "")


def _delete_exactly(aws: AwsSession, bucket: str, key: str, version: Optional[str]) -> None:
    """Delete the very version written: in a versioned bucket a plain delete only hides it behind a
    delete marker, and the bucket then holds data that destroy keeps."""
    extra: dict[str, Any] = {"VersionId": version} if version and version != "null" else {}
    aws.call("s3", "delete_object", Bucket=bucket, Key=key, **extra)


def invoke_pipeline(aws: AwsSession, name: str, image: Path, *, wait: float = 120.0, keep: bool = False,
                    clock: Callable[[], float] = time.monotonic,
                    sleep: Callable[[float], None] = time.sleep) -> InvokeResult:
    """Upload *image* into the input bucket and wait (at most *wait* seconds) for its output object.

    Unless *keep*, the upload and the output object are deleted once the output is read (a
    test image is not data); after a timeout both stay, as the function may still be at work.

    Raises:
        RequestTimeout: no output object within *wait* seconds (exit 7).
    """
    from mmsctl.cloud.lambda_.outputs import output_key

    if not image.is_file():
        raise InputNotFoundError(f"{image}: no such file")
    in_bucket, in_prefix, out_bucket, out_prefix = _pipeline_ends(aws, name)
    key = f"{in_prefix}mmsctl-invoke-{uuid.uuid4().hex[:12]}-{image.name}"
    targets = [(output_key(key, input_prefix=in_prefix, output_prefix=out_prefix, error=e), e) for e in (False, True)]
    start = clock()
    with open(image, "rb") as fh:
        put = aws.call("s3", "put_object", Bucket=in_bucket, Key=key, Body=fh, ContentType=content_type(image))
    delay = 0.25
    while True:
        for out_key, is_error in targets:
            try:
                got = aws.call("s3", "get_object", Bucket=out_bucket, Key=out_key)
            except CloudError as exc:
                if aws_code(exc) in ("NoSuchKey", "404", "AccessDenied"):
                    continue
                raise
            latency = (clock() - start) * 1000
            doc = json.loads(got["Body"].read(MAX_PAYLOAD))
            status = int(doc.get("status", 500 if is_error else 200))
            result = doc.get("error") if is_error else doc.get("result")
            if not keep:
                _delete_exactly(aws, in_bucket, key, put.get("VersionId"))
                _delete_exactly(aws, out_bucket, out_key, got.get("VersionId"))
            return InvokeResult(status, result, latency_ms=latency, input=f"s3://{in_bucket}/{key}",
                                output=f"s3://{out_bucket}/{out_key}")
        if clock() - start > wait:
            raise RequestTimeout(f"no output for s3://{in_bucket}/{key} in s3://{out_bucket}/{out_prefix} "
                                 f"within {wait:g}s", hint=f"see what the function logged: mmsctl lambda logs {name}")
        sleep(delay)
        delay = min(delay * 1.5, 2.0)
