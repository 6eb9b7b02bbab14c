"""Where httpx exceptions and server error bodies become mmsctl errors (the only place).

    httpx.ConnectError: refused          -> ConnectionRefused       exit 5
    httpx.ConnectError / TLS / DNS       -> ConnectionFailed        exit 5
    httpx.ConnectTimeout                 -> ConnectionFailed        exit 5
    httpx.TimeoutException (read, write) -> RequestTimeout          exit 7
    the call's deadline passed           -> RequestTimeout          exit 7
    an answer over max_response_bytes    -> AnswerTooLarge          exit 8
    400 InvalidKeyException, 401, 403    -> AuthenticationFailed    exit 6
    404 ModelNotFoundException           -> RemoteModelNotFound     exit 3
    404 ModelVersionNotFoundException    -> RemoteVersionNotFound   exit 3
    404 on register (archive not found)  -> RemoteArchiveNotFound   exit 3
    405 on register/unregister           -> ModelApiDisabled        exit 8
    any other non-2xx                    -> ApiError                exit 8

Every message names the server (``host:port``), so a user with several contexts
knows which one answered. The errors carry what happened as attributes; hints that
name mmsctl's commands and flags are the CLI's (``mmsctl/cli/hints.py``).
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
    "AnswerTooLarge",
    "ConnectionRefused",
    "ModelApiDisabled",
    "RemoteArchiveNotFound",
    "RemoteModelNotFound",
    "RemoteVersionNotFound",
    "WorkersNotReady",
    "answer_timeout",
    "error_from_response",
    "error_from_transport",
    "server_label",
]


class RemoteModelNotFound(ModelNotFoundError):
    """The server does not know the model (or that version of it): exit 3, like every 'not found'."""

    reference = "remote-model-not-found"

    def __init__(
        self,
        message: str,
        *,
        status: int = 404,
        type: str = "",
        hint: Optional[str] = None,
        model: Optional[str] = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.type = type
        self.model = model


class RemoteVersionNotFound(RemoteModelNotFound):
    """The server has the model, but not that version of it (TorchServe)."""

    reference = "remote-version-not-found"


class RemoteArchiveNotFound(RemoteModelNotFound):
    """Register named an archive the server cannot find (neither a URL nor in its model store)."""

    reference = "remote-archive-not-found"


class ConnectionRefused(ConnectionFailed):
    """Nothing listens at the server's address: most often, the server is not running."""

    reference = "connection-refused"


class WorkersNotReady(RequestTimeout):
    """A wait for a model's workers ran out of time: they did not all become READY."""

    reference = "workers-not-ready"

    def __init__(self, message: str, *, model: str, ready: int, wanted: int) -> None:
        super().__init__(message)
        self.model = model
        self.ready = ready
        self.wanted = wanted


class ModelApiDisabled(ApiError):
    """TorchServe answers 405 to register/unregister unless started with --enable-model-api."""

    reference = "model-api-disabled"


class AnswerTooLarge(ApiError):
    """A server sent more than the ``max_response_bytes`` setting allows; it was read no further."""

    reference = "answer-too-large"

    def __init__(self, url: str, limit: int, *, status: int = 0) -> None:
        super().__init__(
            f"{server_label(url)} sent an answer over {limit:,} bytes (the max_response_bytes limit); "
            "it was not read further",
            status=status,
            hint="if answers this large are expected, raise MMSCTL_MAX_RESPONSE_BYTES "
                 "(or max_response_bytes in config.toml)",
        )
        self.limit = limit


def answer_timeout(url: str, timeout: float) -> RequestTimeout:
    """The error for an answer that began but did not end within the call's *timeout*."""
    return RequestTimeout(f"{server_label(url)} did not finish its answer in {timeout:g} s")


def server_label(url: str) -> str:
    """``host:port`` of a URL, for messages."""
    try:
        return urlsplit(url).netloc or url
    except ValueError:  # "http://[::1" - the client then says "bad server URL"
        return url


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
        return AuthenticationFailed(f"authentication failed on {server}: {detail}")
    if status == 404 and (model is not None) and (kind is None or "NotFound" in kind):
        if kind == "ModelVersionNotFoundException":  # the model is there, that version is not
            return RemoteVersionNotFound(
                f"model {model} has no such version on {server}: {detail}", status=status, type=kind, model=model,
            )
        return RemoteModelNotFound(f"model {model} not found on {server}", status=status, type=kind or "",
                                   model=model)
    if status == 404 and operation == "register":
        return RemoteArchiveNotFound(f"register failed on {server}: {detail}", status=status, type=kind or "")
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
        return RequestTimeout(f"{server} did not answer{after}")
    text = str(exc) or type(exc).__name__
    lowered = text.lower()
    if "certificate" in lowered or "ssl" in lowered or "tls" in lowered:
        return ConnectionFailed(f"TLS error talking to {server}: {text}")
    if isinstance(exc, httpx.ConnectError):
        chain = causes(exc)
        if "refused" in lowered or "errno 111" in lowered or any(isinstance(c, ConnectionRefusedError) for c in chain):
            # the async client (mmsctl top) says only "All connection attempts failed"; the cause says why
            return ConnectionRefused(f"cannot connect to {server}: connection refused")
        if ("name or service not known" in lowered or "nodename nor servname" in lowered or "getaddrinfo" in lowered
                or any(isinstance(c, socket.gaierror) for c in chain)):
            return ConnectionFailed(f"cannot resolve {server}: {text}")
        return ConnectionFailed(f"cannot connect to {server}: {text}")
    if isinstance(exc, httpx.UnsupportedProtocol) or isinstance(exc, httpx.InvalidURL):
        return ConnectionFailed(f"bad server URL {url!r}: {text}")
    return ConnectionFailed(f"connection to {server} failed: {text}")
