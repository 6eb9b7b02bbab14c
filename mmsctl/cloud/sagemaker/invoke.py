"""``sagemaker invoke NAME IMAGE``: one InvokeEndpoint through sagemaker-runtime, signed by botocore.

The body goes with its own ``Content-Type`` (an image's, from its bytes), ``Accept`` picks the answer's form,
``CustomAttributes`` carries ``topk=N``. Sent once (no retry: a retried invocation runs the model again), read up
to ``max_response_bytes``. SageMaker's answers to failures, as its runtime API gives them:

* ``ModelError`` (424): the container answered an error; its status and body are in ``OriginalStatusCode`` and
  ``OriginalMessage`` ("Received client error (400) from primary with message …"): shown as the model's answer
  (exit 8), with the endpoint's log group;
* ``ValidationError`` "Endpoint NAME of account … not found." (400): exit 3;
* ``ModelNotReadyException``, ``ServiceUnavailable``, ``InternalFailure``: AWS's (exit 9).

InvokeEndpoint takes at most 6 MB (4 MB on a serverless endpoint), checked here before anything is sent.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Optional

from mmsctl.cloud.aws.errors import aws_code
from mmsctl.cloud.aws.session import AwsSession
from mmsctl.cloud.sagemaker.resources import EndpointNotFound
from mmsctl.errors import ApiError, CloudError, UsageError, causes

__all__ = ["Invocation", "MAX_PAYLOAD", "MAX_SERVERLESS_PAYLOAD", "SageMakerClient", "invoke_endpoint", "sniff_content_type"]

#: InvokeEndpoint's largest request body (real-time endpoints).
MAX_PAYLOAD = 6 * 1024 * 1024
#: A serverless endpoint's largest request body.
MAX_SERVERLESS_PAYLOAD = 4 * 1024 * 1024
#: SageMaker's own invocation timeout is 60 s; the read waits a little longer for its answer.
READ_TIMEOUT_S = 70.0
_SIGNATURES = ((b"\xff\xd8\xff", "image/jpeg"), (b"\x89PNG\r\n\x1a\n", "image/png"), (b"GIF8", "image/gif"),
               (b"BM", "image/bmp"), (b"RIFF", "image/webp"), (b"\x93NUMPY", "application/x-npy"),
               (b"II*\x00", "image/tiff"), (b"MM\x00*", "image/tiff"))


def sniff_content_type(body: bytes) -> str:
    """The content type of an image (or ``.npy`` tensor) from its first bytes; JSON for ``{``; else octets."""
    for magic, kind in _SIGNATURES:
        if body.startswith(magic):
            return kind
    if body[4:12] in (b"ftypheic", b"ftypheix", b"ftypmif1"):
        return "image/heic"
    return "application/json" if body.lstrip()[:1] in (b"{", b"[") else "application/octet-stream"


@dataclass
class Invocation:
    """One answer of the endpoint."""

    endpoint: str
    status: int
    content_type: str
    body: bytes
    variant: Optional[str]
    duration_ms: float

    @property
    def result(self) -> Any:
        """The answer as JSON where it is JSON; else None."""
        if "json" not in self.content_type:
            return None
        try:
            return json.loads(self.body)
        except (ValueError, UnicodeDecodeError):
            return None

    def to_dict(self) -> dict[str, Any]:
        result = self.result
        return {"endpoint": self.endpoint, "status": self.status, "content_type": self.content_type,
                "variant": self.variant, "duration_ms": round(self.duration_ms, 1),
                "result": result if result is not None else f"<{len(self.body)} bytes of {self.content_type}>"}


def _model_error(exc: CloudError, endpoint: str) -> ApiError:
    """The container's own answer behind a ModelError."""
    responses = [getattr(c, "response", None) for c in causes(exc)]
    response: dict[str, Any] = next((r for r in responses if isinstance(r, dict)), {})
    status = int(response.get("OriginalStatusCode") or 0)
    body = str(response.get("OriginalMessage") or "")
    try:
        parsed = json.loads(body)
        message = parsed.get("message") if isinstance(parsed, dict) else None
    except ValueError:
        message = None
    return ApiError(f"{endpoint}: the model answered {status}: {(message or body or exc.message)[:500]}",
                    status=status, hint=f"its log: CloudWatch Logs /aws/sagemaker/Endpoints/{endpoint}")


def _check_size(aws: AwsSession, endpoint: str, body: bytes) -> None:
    """Refuse a body SageMaker would refuse: over 6 MB, or over 4 MB for a serverless endpoint (DescribeEndpoint
    only for a body between the two; where it cannot be read, SageMaker's own answer decides)."""
    limit = MAX_PAYLOAD
    if MAX_SERVERLESS_PAYLOAD < len(body) <= MAX_PAYLOAD:
        try:
            found = aws.call("sagemaker", "describe_endpoint", EndpointName=endpoint)
        except CloudError:
            found = {}
        if any(v.get("CurrentServerlessConfig") for v in found.get("ProductionVariants") or []):
            limit = MAX_SERVERLESS_PAYLOAD
    if len(body) > limit:
        kind = f" for serverless endpoint {endpoint}" if limit == MAX_SERVERLESS_PAYLOAD else ""
        raise UsageError(f"{len(body)} bytes is over InvokeEndpoint's {limit // (1024 * 1024)} MB{kind}",
                         param="body", hint="send a smaller image: SageMaker refuses larger payloads")


def invoke_endpoint(aws: AwsSession, endpoint: str, body: bytes, *, content_type: Optional[str] = None,
                    accept: Optional[str] = None, top_k: Optional[int] = None,
                    max_response_bytes: int = 64 * 1024 * 1024) -> Invocation:
    """One invocation; the answer, or the error its failure is.

    Raises:
        UsageError: the body is over InvokeEndpoint's 6 MB (4 MB for a serverless endpoint).
        ApiError: the model answered an error (exit 8). EndpointNotFound: no such endpoint (exit 3).
        CloudError: AWS refused, or the answer is over *max_response_bytes*.
    """
    _check_size(aws, endpoint, body)
    params: dict[str, Any] = {"EndpointName": endpoint, "Body": body,
                              "ContentType": content_type or sniff_content_type(body)}
    if accept:
        params["Accept"] = accept
    if top_k is not None:
        params["CustomAttributes"] = f"topk={top_k}"
    started = time.perf_counter()
    try:
        answer = aws.call("sagemaker-runtime", "invoke_endpoint", read_timeout=READ_TIMEOUT_S, max_attempts=0,
                          **params)
    except CloudError as exc:
        code = aws_code(exc)
        if code == "ModelError":
            raise _model_error(exc, endpoint) from exc
        if code == "ValidationError" and "not found" in exc.message:
            raise EndpointNotFound(endpoint, aws.region) from exc
        raise
    stream: Any = answer.get("Body")
    data = stream.read(max_response_bytes + 1) if hasattr(stream, "read") else bytes(stream or b"")
    if len(data) > max_response_bytes:
        raise CloudError(f"{endpoint}'s answer is over {max_response_bytes} bytes (max_response_bytes)")
    return Invocation(endpoint, 200, str(answer.get("ContentType") or "application/octet-stream"), data,
                      answer.get("InvokedProductionVariant"), (time.perf_counter() - started) * 1000.0)


class SageMakerClient:
    """``predict --context sagemaker:NAME``'s client: the face of the inference client that
    :func:`mmsctl.predict.predict_remote` drives (``predict``, ``close``), over InvokeEndpoint.

    The endpoint serves one model: MODEL names what the user expects and is not sent. More classes than the
    model's default go as ``topk=K`` in the custom attributes.
    """

    def __init__(self, aws: AwsSession, endpoint: str, *, top_k: Optional[int] = None,
                 max_response_bytes: int = 64 * 1024 * 1024) -> None:
        self.aws = aws
        self.endpoint = endpoint
        self.top_k = top_k
        self.max_response_bytes = max_response_bytes

    def predict(self, model: str, body: bytes, content_type: Optional[str] = None, **_: Any) -> Invocation:
        return invoke_endpoint(self.aws, self.endpoint, body, content_type=content_type, top_k=self.top_k,
                               max_response_bytes=self.max_response_bytes)

    def close(self) -> None:
        """Nothing to close: boto3 keeps its connections in the session."""
