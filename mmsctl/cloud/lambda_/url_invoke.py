"""Call a function through its URL, as a browser or ``curl --aws-sigv4`` would: the HTTP path the Invoke
API skips (URL auth, CORS, the function-URL event shape).

An ``AWS_IAM`` URL gets a Signature Version 4 signature from the caller's credentials (service
``lambda``); a public (``NONE``) one is sent unsigned. ``MMSCTL_LAMBDA_FUNCTION_URL`` replaces
the URL looked up (a custom domain in front of it, or a local stand-in); the auth type still
comes from the function's URL configuration.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional
from urllib.parse import quote, urlencode

from mmsctl.cloud.aws.errors import aws_code
from mmsctl.cloud.aws.session import AwsSession, PlainHttpRefused
from mmsctl.cloud.lambda_ import spec as names
from mmsctl.cloud.lambda_.invoke import MAX_PAYLOAD, MAX_SYNC_IMAGE, InvokeResult, TooBigToSend, content_type
from mmsctl.errors import CloudError, InputNotFoundError, NotFoundError
from mmsctl.tls import verify as shared_verify

__all__ = ["ENV_FUNCTION_URL", "FunctionUrl", "NoFunctionUrl", "find_url", "invoke_url"]

ENV_FUNCTION_URL = "MMSCTL_LAMBDA_FUNCTION_URL"
_TIMEOUT_S = 900.0  # Lambda's longest run; the answer is read within MAX_PAYLOAD


class NoFunctionUrl(NotFoundError):
    """The function has no URL (deploy makes one when asked)."""

    reference = "lambda-no-function-url"


@dataclass(frozen=True)
class FunctionUrl:
    url: str
    auth: str  # AWS_IAM | NONE


def find_url(aws: AwsSession, name: str) -> FunctionUrl:
    """The function's URL and auth type (the ``live`` alias's when provisioned concurrency made one)."""
    found: Optional[dict[str, Any]] = None
    qualifiers: tuple[dict[str, Any], ...] = ({"Qualifier": names.ALIAS}, {})
    for qualifier in qualifiers:
        try:
            found = aws.call("lambda", "get_function_url_config", FunctionName=name, **qualifier)
            break
        except CloudError as exc:
            if aws_code(exc) != "ResourceNotFoundException":
                raise
    if found is None:
        raise NoFunctionUrl(f"function {name} has no function URL in {aws.region}")
    url = os.environ.get(ENV_FUNCTION_URL) or str(found["FunctionUrl"])
    return FunctionUrl(url, str(found.get("AuthType", "AWS_IAM")))


def request_for(image: Optional[Path], image_url: Optional[str], post: bool) -> tuple[str, str, bytes, dict[str, str]]:
    """(method, query, body, headers) of the request: POST the image, GET ?url=, or POST {"url": …}."""
    if image is not None:
        try:
            size = image.stat().st_size
        except FileNotFoundError as exc:
            raise InputNotFoundError(f"{image}: no such file") from exc
        if size > MAX_SYNC_IMAGE * 4 // 3:  # a URL's body is not base64 in a JSON payload, but Lambda's 6 MB still holds
            raise TooBigToSend(f"{image}: {size} bytes is more than a function URL takes", hint="send it through the S3 pipeline")
        return "POST", "", image.read_bytes(), {"content-type": content_type(image)}
    assert image_url is not None
    if post:
        return "POST", "", json.dumps({"url": image_url}).encode(), {"content-type": "application/json"}
    # %20, never +: the canonical form SigV4 signs (AWS decodes and re-encodes the query the same way)
    return "GET", urlencode({"url": image_url}, quote_via=quote), b"", {}


def invoke_url(aws: AwsSession, target: FunctionUrl, method: str, query: str, body: bytes,
               headers: dict[str, str]) -> InvokeResult:
    """Send one request to *target* (signed for ``AWS_IAM``) and unpack the handler's answer."""
    import httpx

    url = target.url.rstrip("/") + "/" + (f"?{query}" if query else "")
    headers = {"user-agent": "mmsctl", **headers}
    if target.auth == "AWS_IAM":  # refused before any connection unless https (or plain http to loopback)
        try:
            headers.update(aws.sigv4_headers(method, url, body=body, headers=headers))
        except PlainHttpRefused as exc:
            if os.environ.get(ENV_FUNCTION_URL):
                exc.hint = f"{ENV_FUNCTION_URL} names it: give its https:// URL"
            raise
    start = time.monotonic()
    try:
        with httpx.Client(timeout=httpx.Timeout(_TIMEOUT_S, connect=10.0), trust_env=False, verify=shared_verify()) \
                as client:
            with client.stream(method, url, content=body, headers=headers) as response:
                raw = b""
                for chunk in response.iter_bytes():
                    raw += chunk
                    if len(raw) > MAX_PAYLOAD:
                        raise CloudError(f"{target.url}: the answer is larger than {MAX_PAYLOAD} bytes")
    except httpx.HTTPError as exc:
        raise CloudError(f"{target.url}: {exc.__class__.__name__}: {exc}") from exc
    latency = (time.monotonic() - start) * 1000
    try:
        result: Any = json.loads(raw) if raw else None
    except ValueError:
        result = raw.decode("utf-8", "replace")
    if response.status_code == 403 and target.auth == "AWS_IAM":
        message = result.get("Message") or result.get("message") if isinstance(result, dict) else None
        raise CloudError(f"{target.url}: 403 Forbidden: {message or 'the signature was refused'}",
                         hint="the caller needs lambda:InvokeFunctionUrl on the function, and the URL's region")
    return InvokeResult(response.status_code, result, latency_ms=latency)
