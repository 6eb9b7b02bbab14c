"""One invocation of the handler: which event it is, then predict and answer (HTTP) or write an object (S3).

The contract with Lambda: an S3 record is never answered with an exception for a
bad *object* (not an image, empty, too large, gone): that would make Lambda retry
it, and an S3 trigger retries an async event twice more, every time failing the same
way. Such an object gets an error object in the output bucket and one log line.
Only failures that a retry can cure (S3 throttling or a 5xx, writing the output)
are raised, after every record of the event was tried.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

from mmsctl.cloud.lambda_.events import (
    DirectRequest,
    HttpRequest,
    S3Object,
    S3Put,
    Unknown,
    Warm,
    http_response,
    parse_event,
)
from mmsctl.cloud.lambda_.outputs import error_document, output_key, result_document
from mmsctl.cloud.lambda_.env import ENV_FETCH_ALLOW
from mmsctl.error_body import ErrorBody, error_body, parse_error_body
from mmsctl.errors import CloudError
from mmsctl.predict import Prediction
from mmsctl.predict.fetch import FetchError, fetch_url
from mmsctl.lambda_.served_model import ServedModel
from mmsctl.lambda_.settings import HandlerSettings

__all__ = ["BadObject", "Runtime"]

log = logging.getLogger("mmsctl.lambda")

#: S3 error codes that mean "this object cannot be read, now or later": answered with an error object.
_PERMANENT_S3 = ("NoSuchKey", "NoSuchVersion", "AccessDenied", "InvalidObjectState", "NoSuchBucket", "404", "403")
#: What a 403 on reading an input means: S3 hides a missing object from a caller that may not list the bucket.
_DENIED_READ = ("gone since the event, or not readable by the function's role: S3 answers both with 403 "
                "to a role that may not list the bucket")
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
        from mmsctl.lambda_.served_model import load_model

        settings = HandlerSettings.from_environ()

        def s3() -> Any:
            from mmsctl.cloud.aws.session import open_session

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
        return {"ignored": parsed.reason, "path": parsed.path} if parsed.path else {"ignored": parsed.reason}

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
            return fetch_url(url, max_bytes=self.settings.max_image_bytes, timeout=timeout,
                             allow=self.settings.fetch_allow, allow_setting=ENV_FETCH_ALLOW)
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
        """Each record in turn, stopping before Lambda's deadline; what is left is raised for a retry.

        Lambda ends an invocation at its timeout with no result, and retries an asynchronous
        event (S3's) as a whole. So the loop stops while there is time for one more record (the
        slowest so far, twice, plus a second), and raises: the retry skips every record whose
        output object is already written (:meth:`_written`), so it picks up where this one stopped.
        """
        out_bucket = self.settings.output_bucket
        request_id = getattr(context, "aws_request_id", None)
        clock = _Deadline(context)
        done: list[dict[str, Any]] = []
        retry: list[str] = []
        for n, obj in enumerate(records):
            if clock.too_close():
                left = len(records) - n
                log.warning("stopped %d record(s) short of the deadline (%d ms left); a retry skips the %d done",
                            left, clock.remaining_ms(), n)
                raise CloudError(f"stopped before Lambda's deadline with {left} of {len(records)} record(s) left; "
                                 f"a retry of the event skips the {n} already written")
            if self.settings.input_bucket and obj.bucket != self.settings.input_bucket:
                log.error("ignored %s: this function reads s3://%s only", obj.uri, self.settings.input_bucket)
                done.append({"input": obj.uri, "status": "ignored"})
                continue
            if not out_bucket:
                log.error("ignored %s: no output bucket configured (MMSCTL_LAMBDA_OUTPUT_BUCKET)", obj.uri)
                done.append({"input": obj.uri, "status": "ignored"})
                continue
            try:
                with clock.timing():
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
        key = output_key(obj.key, input_prefix=s.input_prefix, output_prefix=s.output_prefix)
        if self._written(out_bucket, key, obj):
            log.info("%s -> s3://%s/%s already written for this object: skipped", obj.uri, out_bucket, key)
            return {"input": obj.uri, "output": f"s3://{out_bucket}/{key}", "status": 200, "skipped": True}
        try:
            data = self._read_object(obj)
            prediction = self._predict(obj.key, data, s.top_k)
            if not prediction.ok:
                detail = _error_detail(prediction)
                raise BadObject(prediction.status or 500, detail[0], detail[1])
        except BadObject as exc:
            error_key = output_key(obj.key, input_prefix=s.input_prefix, output_prefix=s.output_prefix, error=True)
            self._write(out_bucket, error_key, error_document(obj, model=self.model.name, code=exc.status,
                                                               type=exc.type, message=exc.message,
                                                               request_id=request_id), obj)
            log.error("%s -> s3://%s/%s %d %s: %s", obj.uri, out_bucket, error_key, exc.status, exc.type, exc.message)
            return {"input": obj.uri, "output": f"s3://{out_bucket}/{error_key}", "status": exc.status}
        ms = (time.perf_counter() - start) * 1000
        self._write(out_bucket, key, result_document(obj, model=self.model.name, result=prediction.result(),
                                                     duration_ms=ms), obj)
        log.info("%s -> s3://%s/%s 200 (%.0f ms)", obj.uri, out_bucket, key, ms)
        return {"input": obj.uri, "output": f"s3://{out_bucket}/{key}", "status": 200}

    def _owner(self, bucket: str) -> dict[str, str]:
        """``ExpectedBucketOwner`` for a call on the input or output bucket, when the account is configured.

        Bucket names are global, and the role's policy names buckets without an account: if a bucket of
        the pipeline were deleted and its name taken by another account that lets anyone write, the
        function would write there. S3 refuses (403) a call whose expected owner is not the bucket's.
        """
        s = self.settings
        if s.bucket_owner and bucket in (s.input_bucket, s.output_bucket):
            return {"ExpectedBucketOwner": s.bucket_owner}
        return {}

    def _written(self, bucket: str, key: str, obj: S3Object) -> bool:
        """Whether *key* already holds this object's answer (same version / ETag): a retried event's record.

        The key is looked for with ``ListObjectsV2`` (``Prefix`` the key itself, one key), not with a
        ``HeadObject`` that may miss: S3 answers a HEAD of a missing key with 404 only to a caller
        allowed ``s3:ListBucket`` on the whole bucket and with 403 to everyone else, while the role
        may list only under the output prefix (a HEAD carries no ``s3:prefix`` to match it). A
        listing carries one, and is strongly consistent; only a key it returns is HEADed for its tag.
        """
        try:
            listed = self.s3.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1, **self._owner(bucket))
        except Exception as exc:  # noqa: BLE001 - botocore's, translated
            raise _translated(exc, "list_objects_v2") from exc
        if [item.get("Key") for item in listed.get("Contents") or []][:1] != [key]:
            return False
        try:
            head = self.s3.head_object(Bucket=bucket, Key=key, **self._owner(bucket))
        except Exception as exc:  # noqa: BLE001 - botocore's, translated
            raise _translated(exc, "head_object") from exc
        return bool(head.get("Metadata", {}).get(_SOURCE_META) == _source_tag(obj))

    def _read_object(self, obj: S3Object) -> bytes:
        limit = self.settings.max_image_bytes
        if obj.size is not None and obj.size > limit:
            raise BadObject(413, "PayloadTooLargeException", f"{obj.size} bytes is more than the {limit} allowed")
        params: dict[str, Any] = {"Bucket": obj.bucket, "Key": obj.key, **self._owner(obj.bucket)}
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
                if code in ("NoSuchKey", "NoSuchVersion", "404", "NoSuchBucket"):
                    raise BadObject(404, code, f"cannot read {obj.uri}: {code}") from None
                raise BadObject(403, code, f"cannot read {obj.uri}: {code} ({_DENIED_READ})") from None
            raise _translated(exc, "get_object") from exc
        if len(data) > limit:
            raise BadObject(413, "PayloadTooLargeException", f"more than the {limit} bytes allowed")
        return bytes(data)

    def _write(self, bucket: str, key: str, body: bytes, source: S3Object) -> None:
        """Write an answer, tagged with the input it answers (so a retry can tell it is done)."""
        try:
            self.s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType="application/json",
                               Metadata={_SOURCE_META: _source_tag(source)}, **self._owner(bucket))
        except Exception as exc:  # noqa: BLE001 - translated
            raise _translated(exc, "put_object") from exc


#: The output object's metadata key naming the input version it answers.
_SOURCE_META = "mmsctl-source"
#: The longest version id or ETag kept as it is in the metadata (longer ones are hashed).
_MAX_TAG = 256
#: Time kept back at the end of an invocation, on top of twice the slowest record so far.
_RESERVE_MS = 1000


def _source_tag(obj: S3Object) -> str:
    """Which version of the input an answer is for: its version id, else its ETag, else a hash of its key.

    The value travels as an HTTP header (``x-amz-meta-mmsctl-source``), which botocore refuses before
    sending unless it is ASCII; a hand-written event may name no version and no ETag, and any field of
    it may hold anything. So what is not short printable ASCII is hashed, here, for writer and reader alike.
    """
    raw = (obj.version_id or obj.etag or "").strip('"')
    if raw and len(raw) <= _MAX_TAG and raw.isascii() and raw.isprintable():
        return raw
    kind, text = ("sha256", raw) if raw else ("key-sha256", obj.key)
    return f"{kind}:{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()}"


class _Deadline:
    """Lambda's clock for one invocation (``context.get_remaining_time_in_millis``) and the slowest record."""

    def __init__(self, context: Any) -> None:
        self._remaining = getattr(context, "get_remaining_time_in_millis", None)
        self.slowest_ms = 0.0

    def remaining_ms(self) -> int:
        return int(self._remaining()) if callable(self._remaining) else 2**31

    def too_close(self) -> bool:
        """Whether one more record might not finish before the deadline."""
        return callable(self._remaining) and self.remaining_ms() < _RESERVE_MS + 2 * self.slowest_ms

    @contextlib.contextmanager
    def timing(self) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.slowest_ms = max(self.slowest_ms, (time.perf_counter() - start) * 1000)


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
    from mmsctl.cloud.aws.session import translate_error

    mapped = translate_error(exc, service="s3", operation=operation)
    return mapped if mapped is not None else CloudError(f"S3 {operation} failed: {type(exc).__name__}: {exc}")


def _pixels(data: bytes) -> Optional[int]:
    """Width × height as stored, from the header (no decoding); None where it is not an image the decoder reads.

    The engine's decoder reads a big JPEG at 1/8 scale and caps the decoded size; this ceiling is on
    the stored size, so it also bounds the work (and memory) of formats that decode at full size.
    """
    from mmsctl.engine import imaging

    try:
        size = imaging.header_size(data)
    except imaging.MissingPlugin as exc:
        raise BadObject(exc.status, exc.type, str(exc)) from None
    return None if size is None else int(size[0]) * int(size[1])
