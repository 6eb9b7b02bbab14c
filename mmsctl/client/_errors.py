"""Where httpx exceptions and server error bodies become mmsctl errors (the only place).

    httpx.ConnectError / TLS / DNS      -> ConnectionFailed        exit 5
    httpx.TimeoutException               -> RequestTimeout          exit 7
    400 InvalidKeyException, 401, 403    -> AuthenticationFailed    exit 6
    404 Model(Version)NotFoundException  -> RemoteModelNotFound     exit 3
    404 on register (archive not found)  -> RemoteModelNotFound     exit 3
    405 on register/unregister           -> ModelApiDisabled        exit 8
    any other non-2xx                    -> ApiError                exit 8

Every message names the server (``host:port``), so a user with several contexts
knows which one answered.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Optional
from urllib.parse import urlsplit

from mmsctl.error_body import parse_error_body
from mmsctl.errors import (
    ApiError,
    AuthenticationFailed,
    ConnectionFailed,
    ModelNotFoundError,
    RequestTimeout,
    causes,
)

if TYPE_CHECKING:  # pragma: no cover
    import httpx

__all__ = [
    "ModelApiDisabled",
    "RemoteModelNotFound",
    "error_from_response",
    "error_from_transport",
    "parse_error_body",
    "server_label",
]


class RemoteModelNotFound(ModelNotFoundError):
    """The server does not know the model (or that version of it): exit 3, like every 'not found'."""

    reference = "remote-model-not-found"

    def __init__(self, message: str, *, status: int = 404, type: str = "", hint: Optional[str] = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.type = type


class ModelApiDisabled(ApiError):
    """TorchServe answers 405 to register/unregister unless started with --enable-model-api."""

    reference = "model-api-disabled"


def server_label(url: str) -> str:
    """``host:port`` of a URL, for messages."""
    parts = urlsplit(url)
    return parts.netloc or url


def error_from_response(
    response: "httpx.Response",
    *,
    model: Optional[str] = None,
    operation: str = "",
) -> Exception:
    """The mmsctl error for a non-2xx answer."""
    status = response.status_code
    server = server_label(str(response.request.url))
    kind, message = parse_error_body(response.content)
    detail = message or response.reason_phrase or f"HTTP {status}"
    if (status == 400 and kind == "InvalidKeyException") or status in (401, 403):
        return AuthenticationFailed(
            f"authentication failed on {server}: {detail}",
            hint="check the context's token file (`mmsctl context list -o wide`); TorchServe writes "
            "its keys to key_file.json in the folder it was started from",
        )
    if status == 404 and (model is not None) and (kind is None or "NotFound" in kind):
        if kind == "ModelVersionNotFoundException":  # the model is there, that version is not
            return RemoteModelNotFound(
                f"model {model} has no such version on {server}: {detail}", status=status, type=kind,
                hint=f"`mmsctl models describe {model}` shows its default version; leave out --version to use it",
            )
        return RemoteModelNotFound(f"model {model} not found on {server}", status=status, type=kind or "",
                                   hint="list the models with `mmsctl models list`")
    if status == 404 and operation == "register":
        return RemoteModelNotFound(
            f"register failed on {server}: {detail}", status=status, type=kind or "",
            hint="LOCATION is an http(s) URL or a file name in the server's model store",
        )
    if status == 405 and operation in ("register", "unregister"):
        return ModelApiDisabled(
            f"{server} refused to {operation}: this server has its model API disabled "
            "(start it with --enable-model-api)",
            status=status,
            type=kind or "",
        )
    what = f"{operation} failed" if operation else "request failed"
    return ApiError(f"{what} on {server}: {detail} ({kind or 'HTTP'} {status})", status=status, type=kind or "")


def error_from_transport(exc: "httpx.HTTPError", url: str, timeout: Optional[float] = None) -> Exception:
    """The mmsctl error for a request that got no HTTP answer."""
    import httpx

    server = server_label(url)
    if isinstance(exc, httpx.TimeoutException):
        if isinstance(exc, httpx.ConnectTimeout):
            return ConnectionFailed(f"cannot connect to {server}: connection timed out")
        after = f" after {timeout:g} s" if timeout else ""
        return RequestTimeout(
            f"{server} did not answer{after}", hint="raise the limit with --timeout"
        )
    text = str(exc) or type(exc).__name__
    lowered = text.lower()
    if "certificate" in lowered or "ssl" in lowered or "tls" in lowered:
        return ConnectionFailed(f"TLS error talking to {server}: {text}")
    if isinstance(exc, httpx.ConnectError):
        chain = causes(exc)
        if "refused" in lowered or "errno 111" in lowered or any(isinstance(c, ConnectionRefusedError) for c in chain):
            # the async client (mmsctl top) says only "All connection attempts failed"; the cause says why
            return ConnectionFailed(
                f"cannot connect to {server}: connection refused",
                hint="is the server running? `mmsctl ping --all` checks every context",
            )
        if ("name or service not known" in lowered or "nodename nor servname" in lowered or "getaddrinfo" in lowered
                or any(isinstance(c, socket.gaierror) for c in chain)):
            return ConnectionFailed(f"cannot resolve {server}: {text}")
        return ConnectionFailed(f"cannot connect to {server}: {text}")
    if isinstance(exc, httpx.UnsupportedProtocol) or isinstance(exc, httpx.InvalidURL):
        return ConnectionFailed(f"bad server URL {url!r}: {text}")
    return ConnectionFailed(f"connection to {server} failed: {text}")
