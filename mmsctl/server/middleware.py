"""What every request of every API goes through: an id, the token check, the size limit, MMS error bodies.

No request ever gets a traceback: an ``ApiException`` becomes its MMS error body, aiohttp's
own HTTP errors are mapped to MMS's types, and anything else is a 500 that is logged here.
Every answer carries ``x-request-id``, is counted in the metrics and (with
``MMSCTL_ACCESS_LOG=1``) written to the access log.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Awaitable, Callable, Optional

from aiohttp import web

from mmsctl.server.errors import ApiException, InvalidKey, MethodNotAllowed, RequestTooLarge, ResourceNotFound
from mmsctl.server.http import error_response
from mmsctl.server.metrics import ServerMetrics

__all__ = ["Traffic", "api_middleware"]

log = logging.getLogger("mmsctl.server")
access_log = logging.getLogger("mmsctl.access")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Traffic:
    """What shutdown needs to know of the front end: stop taking predictions, wait for answers in flight."""

    draining: bool = False
    in_flight: int = 0


def _authorised(request: web.Request, token: str) -> bool:
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(value.strip(), token)


def _error_for(exc: Exception, max_request_size: int) -> web.Response:
    """The MMS error body for anything a handler raised."""
    if isinstance(exc, ApiException):
        response = error_response(exc.status, exc.type_name, exc.message)
        if exc.retry_after:
            response.headers["Retry-After"] = str(exc.retry_after)
        if exc.status == 401:
            response.headers["WWW-Authenticate"] = "Bearer"
        return response
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        return error_response(413, "RequestEntityTooLargeException",
                              f"Request body exceeds max_request_size ({max_request_size} bytes).")
    for aiohttp_error, ours in ((web.HTTPMethodNotAllowed, MethodNotAllowed), (web.HTTPNotFound, ResourceNotFound)):
        if isinstance(exc, aiohttp_error):
            mapped = ours()
            return error_response(mapped.status, mapped.type_name, mapped.message)
    if isinstance(exc, web.HTTPException):
        return error_response(exc.status, "BadRequestException" if exc.status < 500 else "InternalServerException",
                              exc.reason)
    return error_response(500, "InternalServerException", f"{type(exc).__name__}: {exc}")


def api_middleware(api: str, token: Optional[str], max_request_size: int, metrics: ServerMetrics,
                   traffic: Traffic) -> Callable[..., Awaitable[web.StreamResponse]]:
    """The middleware of one API (``inference``, ``management`` or ``metrics``); *token*: its Bearer key."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        request_id = str(uuid.uuid4())
        request["request_id"] = request_id
        request["model"] = ""
        started = time.monotonic()
        traffic.in_flight += 1
        try:
            if token and not request.path.startswith("/ping") and not _authorised(request, token):
                raise InvalidKey("Token Authorization failed. Token either incorrect, expired, or not provided correctly")
            length = request.content_length
            if length is not None and length > max_request_size:
                raise RequestTooLarge(f"Request body of {length} bytes exceeds max_request_size "
                                      f"({max_request_size} bytes).")
            response = await handler(request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - never leak a traceback to a client
            if not isinstance(exc, (ApiException, web.HTTPException)):
                log.exception("unhandled error on %s %s", request.method, request.path)
            response = _error_for(exc, max_request_size)
        finally:
            traffic.in_flight -= 1
        response.headers["x-request-id"] = request_id
        metrics.count_request(api, request["model"], response.status)
        if access_log.isEnabledFor(logging.INFO):
            access_log.info('%s "%s %s" %s %.1fms', request.remote, request.method, request.path_qs,
                            response.status, (time.monotonic() - started) * 1000)
        return response

    return middleware
