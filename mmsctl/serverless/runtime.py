"""One invocation of the handler: which event it is, then predict and answer (HTTP) or write an object (S3).

The contract with Lambda: an S3 record is never answered with an exception for a
bad *object* (not an image, empty, too large, gone): that would make Lambda retry
it, and an S3 trigger retries an async event twice more, every time failing the same
way. Such an object gets an error object in the output bucket and one log line.
Only failures that a retry can cure (S3 throttling or a 5xx, writing the output)
are raised, after every record of the event was tried.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from mmsctl.cloud.lambda_events import (
    DirectRequest,
    HttpRequest,
    S3Object,
    S3Put,
    Unknown,
    Warm,
    http_response,
    parse_event,
)
from mmsctl.cloud.lambda_outputs import error_document, output_key, result_document
from mmsctl.error_body import ErrorBody, error_body, parse_error_body
from mmsctl.errors import CloudError
from mmsctl.predict import Prediction
from mmsctl.predict.fetch import FetchError, fetch_url
from mmsctl.serverless.served_model import ServedModel
from mmsctl.serverless.settings import HandlerSettings

__all__ = ["BadObject", "Runtime"]

log = logging.getLogger("mmsctl.lambda")

#: S3 error codes that mean "this object cannot be read, now or later": answered with an error object.
_PERMANENT_S3 = ("NoSuchKey", "NoSuchVersion", "AccessDenied", "InvalidObjectState", "NoSuchBucket", "404", "403")
_MAX_TOP_K = 1000
_MAX_JSON_BODY = 64 * 1024


class BadObject(Exception):
    """An input that can never be predicted: answered with an error, not retried."""

    def __init__(self, status: int, type: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.type = type
        self.message = message


@dataclass
class Runtime:
    """The container's state between invocations: settings, the started model, an S3 client."""

    settings: HandlerSettings
    model: ServedModel
    s3_factory: Callable[[], Any]
    _s3: Any = field(default=None, repr=False)

    @property
    def s3(self) -> Any:
        if self._s3 is None:
            self._s3 = self.s3_factory()
        return self._s3

    @classmethod
    def from_environ(cls) -> "Runtime":
        """Read the settings and load the model: what the handler module does at import (the cold start)."""
        from mmsctl.serverless.served_model import load_model

        settings = HandlerSettings.from_environ()

        def s3() -> Any:
            from mmsctl.cloud._session import open_session

            return open_session().client("s3")

        return cls(settings, load_model(settings, s3=s3), s3)

    # -- dispatch --------------------------------------------------------------------------------

    def handle(self, event: Any, context: Any = None) -> Any:
        parsed = parse_event(event)
        if isinstance(parsed, Warm):
            log.info("keep-warm call (%s): model %s is loaded", parsed.source, self.model.name)
            return {"warm": True, "model": self.model.name}
        if isinstance(parsed, S3Put):
            return self._s3_records(parsed.records, context)
        if isinstance(parsed, HttpRequest):
            return self._http(parsed, context)
        if isinstance(parsed, DirectRequest):
            return self._direct(parsed, context)
        assert isinstance(parsed, Unknown)
        log.warning("ignored an event: %s", parsed.reason)
        return {"ignored": parsed.reason}

    # -- inputs ----------------------------------------------------------------------------------

    def _top_k(self, raw: Optional[str]) -> Optional[int]:
        if raw is None:
            return self.settings.top_k
        try:
            value = int(raw.strip())
        except ValueError:
            raise BadObject(400, "BadRequestException", f"topk must be a whole number, not {raw[:40]!r}") from None
        if not 1 <= value <= _MAX_TOP_K:
            raise BadObject(400, "BadRequestException", f"topk must be between 1 and {_MAX_TOP_K}, not {value}")
        return value

    def _fetch(self, url: str, context: Any) -> bytes:
        timeout = self.settings.url_timeout
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        if callable(remaining):  # leave a second to answer before Lambda's own timeout
            timeout = max(0.1, min(timeout, remaining() / 1000.0 - 1.0))
        try:
            return fetch_url(url, max_bytes=self.settings.max_image_bytes, timeout=timeout)
        except FetchError as exc:
            raise BadObject(exc.status, exc.type, exc.message) from None

    def _check_image(self, data: bytes) -> None:
        """Refuse what would exhaust the container's memory before the model decodes it."""
        if len(data) > self.settings.max_image_bytes:
            raise BadObject(413, "PayloadTooLargeException",
                            f"{len(data)} bytes is more than the {self.settings.max_image_bytes} allowed")
        pixels = _pixels(data)
        if pixels is not None and pixels > self.settings.max_pixels:
            raise BadObject(413, "PayloadTooLargeException",
                            f"the image has {pixels} pixels, more than the {self.settings.max_pixels} allowed")

    def _predict(self, name: str, data: bytes, top_k: Optional[int]) -> Prediction:
        self._check_image(data)
        return self.model.predict(name, data, top_k=top_k)

    # -- HTTP ------------------------------------------------------------------------------------

    def _http(self, request: HttpRequest, context: Any) -> dict[str, Any]:
        try:
            if request.body_error:
                raise BadObject(400, "BadRequestException", request.body_error)
            if request.method == "GET" and request.path.rstrip("/") == "/ping":
                return http_response(request, 200, json.dumps({"status": "Healthy"}).encode())
            top_k = self._top_k(request.query.get("topk", request.query.get("top_k")))
            name, data = self._http_input(request, context)
            prediction = self._predict(name, data, top_k)
        except BadObject as exc:
            log.info("%s %s -> %d %s", request.method, request.path, exc.status, exc.message)
            return http_response(request, exc.status, error_body(exc.status, exc.type, exc.message))
        log.info("%s %s -> %d", request.method, request.path, prediction.status)
        return http_response(request, prediction.status, prediction.body, prediction.content_type or "application/json")

    def _http_input(self, request: HttpRequest, context: Any) -> tuple[str, bytes]:
        if request.method == "GET":
            url = request.query.get("url")
            if not url:
                raise BadObject(400, "BadRequestException", "pass ?url=IMAGE_URL, or POST an image or {\"url\": …}")
            return url, self._fetch(url, context)
        if request.method != "POST":
            raise BadObject(405, "MethodNotAllowedException", f"{request.method} is not supported; use GET or POST")
        body = request.body or b""
        if not body:
            raise BadObject(400, "BadRequestException", "Empty image input")
        if request.content_type == "application/json":
            if len(body) > _MAX_JSON_BODY:
                raise BadObject(413, "PayloadTooLargeException", "a JSON body holds only {\"url\": …}")
            try:
                doc = json.loads(body)
            except ValueError:
                raise BadObject(400, "BadRequestException", "the JSON body is not valid JSON") from None
            url = doc.get("url") if isinstance(doc, dict) else None
            if not isinstance(url, str):
                raise BadObject(400, "BadRequestException", "a JSON body must be {\"url\": \"IMAGE_URL\"}")
            return url, self._fetch(url, context)
        return "body", body

    def _direct(self, request: DirectRequest, context: Any) -> Any:
        try:
            prediction = self._predict(request.url, self._fetch(request.url, context), self._top_k(request.top_k))
        except BadObject as exc:
            log.info("url %s -> %d %s", request.url[:200], exc.status, exc.message)
            return ErrorBody(exc.status, exc.type, exc.message).to_dict()
        log.info("url %s -> %d", request.url[:200], prediction.status)
        return prediction.result()

    # -- S3 --------------------------------------------------------------------------------------

    def _s3_records(self, records: list[S3Object], context: Any) -> dict[str, Any]:
        out_bucket = self.settings.output_bucket
        request_id = getattr(context, "aws_request_id", None)
        done: list[dict[str, Any]] = []
        retry: list[str] = []
        for obj in records:
            if self.settings.input_bucket and obj.bucket != self.settings.input_bucket:
                log.error("ignored %s: this function reads s3://%s only", obj.uri, self.settings.input_bucket)
                done.append({"input": obj.uri, "status": "ignored"})
                continue
            if not out_bucket:
                log.error("ignored %s: no output bucket configured (MMSCTL_LAMBDA_OUTPUT_BUCKET)", obj.uri)
                done.append({"input": obj.uri, "status": "ignored"})
                continue
            try:
                done.append(self._one_record(obj, out_bucket, request_id))
            except CloudError as exc:  # transient: worth Lambda's retry, after the other records
                log.error("%s: %s", obj.uri, exc.message)
                retry.append(f"{obj.uri}: {exc.message}")
        if retry:
            raise CloudError(f"{len(retry)} of {len(records)} object(s) failed and may succeed on retry: "
                             + "; ".join(retry))
        return {"processed": done}

    def _one_record(self, obj: S3Object, out_bucket: str, request_id: Optional[str]) -> dict[str, Any]:
        start = time.perf_counter()
        s = self.settings
        try:
            data = self._read_object(obj)
            prediction = self._predict(obj.key, data, s.top_k)
            if not prediction.ok:
                detail = _error_detail(prediction)
                raise BadObject(prediction.status or 500, detail[0], detail[1])
        except BadObject as exc:
            key = output_key(obj.key, input_prefix=s.input_prefix, output_prefix=s.output_prefix, error=True)
            self._write(out_bucket, key, error_document(obj, model=self.model.name, code=exc.status, type=exc.type,
                                                         message=exc.message, request_id=request_id))
            log.error("%s -> s3://%s/%s %d %s: %s", obj.uri, out_bucket, key, exc.status, exc.type, exc.message)
            return {"input": obj.uri, "output": f"s3://{out_bucket}/{key}", "status": exc.status}
        ms = (time.perf_counter() - start) * 1000
        key = output_key(obj.key, input_prefix=s.input_prefix, output_prefix=s.output_prefix)
        self._write(out_bucket, key, result_document(obj, model=self.model.name, result=prediction.result(),
                                                     duration_ms=ms))
        log.info("%s -> s3://%s/%s 200 (%.0f ms)", obj.uri, out_bucket, key, ms)
        return {"input": obj.uri, "output": f"s3://{out_bucket}/{key}", "status": 200}

    def _read_object(self, obj: S3Object) -> bytes:
        limit = self.settings.max_image_bytes
        if obj.size is not None and obj.size > limit:
            raise BadObject(413, "PayloadTooLargeException", f"{obj.size} bytes is more than the {limit} allowed")
        params: dict[str, Any] = {"Bucket": obj.bucket, "Key": obj.key}
        if obj.version_id:
            params["VersionId"] = obj.version_id
        try:
            answer = self.s3.get_object(**params)
            length = int(answer.get("ContentLength") or 0)
            if length > limit:
                answer["Body"].close()
                raise BadObject(413, "PayloadTooLargeException", f"{length} bytes is more than the {limit} allowed")
            data = answer["Body"].read(limit + 1)
            answer["Body"].close()
        except BadObject:
            raise
        except Exception as exc:  # noqa: BLE001 - botocore's, sorted below
            code = _s3_code(exc)
            if code in _PERMANENT_S3:
                raise BadObject(404 if code in ("NoSuchKey", "NoSuchVersion", "404", "NoSuchBucket") else 403,
                                code, f"cannot read {obj.uri}: {code}") from None
            raise _translated(exc, "get_object") from exc
        if len(data) > limit:
            raise BadObject(413, "PayloadTooLargeException", f"more than the {limit} bytes allowed")
        return bytes(data)

    def _write(self, bucket: str, key: str, body: bytes) -> None:
        try:
            self.s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType="application/json")
        except Exception as exc:  # noqa: BLE001 - translated
            raise _translated(exc, "put_object") from exc


def _error_detail(prediction: Prediction) -> tuple[str, str]:
    """The (type, message) of a failed prediction: the handler's MMS error type, the predict core's message."""
    kind, _ = parse_error_body(prediction.body) if prediction.body else (None, None)
    return kind or "InternalServerException", prediction.error or "Prediction failed"


def _s3_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str((response.get("Error") or {}).get("Code", ""))
    return ""


def _translated(exc: BaseException, operation: str) -> CloudError:
    from mmsctl.cloud.errors import translate

    mapped = translate(exc, service="s3", operation=operation)
    return mapped if mapped is not None else CloudError(f"S3 {operation} failed: {type(exc).__name__}: {exc}")


def _pixels(data: bytes) -> Optional[int]:
    """Width × height from the image header (no decoding); None where the header is not understood."""
    import io
    import warnings

    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # the ceiling is ours
            with Image.open(io.BytesIO(data)) as im:
                width, height = im.size
    except Image.DecompressionBombError:
        return 2**62  # far over any ceiling: PIL refuses to even open it
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
        return None  # not an image PIL knows: the model answers that
    return int(width) * int(height)
