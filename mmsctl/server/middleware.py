"""What every request of every API goes through: an id, the token check, draining, the size limit, MMS error bodies.

No request ever gets a traceback: an ``ApiException`` becomes its MMS error body, aiohttp's
own HTTP errors are mapped to MMS's types, and anything else is a 500 that is logged here.
Every answer carries ``x-request-id``, is counted in the metrics and (with
``MMSCTL_ACCESS_LOG=1``) written to the access log.

Which requests need a token, and which a draining server still takes, is decided by the
route aiohttp matched (the one that will handle the request), never by reading the path
again: only the inference API's ``/ping`` and ``/ping/{model}`` are open; while draining,
``/ping`` (it says ``Draining``), metrics and the management API's reads are answered and
everything else gets 503 with ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import hmac
import itertools
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Awaitable, Callable, Optional

from aiohttp import web

from mmsctl.server.errors import (
    ApiException, InvalidKey, MethodNotAllowed, RequestTooLarge, ResourceNotFound, ServiceUnavailable,
)
from mmsctl.server.http import error_response
from mmsctl.server.metrics import ServerMetrics

__all__ = ["Traffic", "api_middleware", "bearer_matches", "next_request_id"]

log = logging.getLogger("mmsctl.server")
access_log = logging.getLogger("mmsctl.access")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Traffic:
    """The front end's traffic: draining (stop taking requests), answers in flight, and request body
    bytes held at once, bounded by ``max_buffered_bytes`` (a body is held from before it is read until
    its answer is sent: queued predictions hold theirs)."""

    draining: bool = False
    in_flight: int = 0
    buffered: int = 0
    max_buffered: Optional[int] = None

    def hold(self, size: int) -> bool:
        """Reserve *size* body bytes; False (nothing reserved) when that would pass the limit."""
        if self.max_buffered is not None and self.buffered + size > self.max_buffered and self.buffered > 0:
            return False
        self.buffered += size
        return True


_ID_PREFIX = str(uuid.uuid4())[:23]
_ID_COUNTER = itertools.count(1)


def next_request_id() -> str:
    """A request id shaped like a UUID: this process's random prefix and a counter (a uuid4 each time
    costs a system call per request); unique within the server, and between servers with odds a uuid4 gives."""
    return f"{_ID_PREFIX}-{next(_ID_COUNTER):012x}"


#: Routes of the inference API that answer without a token and while draining (health checks).
_HEALTH_ROUTES = frozenset({"/ping", "/ping/{model}"})
_READS = frozenset({"GET", "HEAD", "OPTIONS"})


def _route(request: web.Request) -> str:
    """The canonical path of the route that handles *request* ("" when none matched)."""
    route = request.match_info.route
    resource = getattr(route, "resource", None)
    return resource.canonical if resource is not None else ""


def _authorised(request: web.Request, token: str) -> bool:
    """Whether the request carries ``Authorization: Bearer <token>``."""
    return bearer_matches(request.headers.get("Authorization", ""), token)


def bearer_matches(authorization: str, token: str) -> bool:
    """Whether an ``Authorization`` value is ``Bearer <token>``, compared as bytes.

    Header values are whatever the client sent (undecodable bytes kept as surrogates);
    any value, ASCII or not, is compared in constant time and never raises.
    """
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    sent = value.strip().encode("utf-8", "surrogateescape")
    return hmac.compare_digest(sent, token.encode("utf-8"))


def _open_while_draining(api: str, request: web.Request) -> bool:
    if api == "metrics":
        return True
    if api == "management":
        return request.method in _READS
    return _route(request) in _HEALTH_ROUTES or request.method == "OPTIONS" or _route(request) == "/api-description"


def _error_for(exc: Exception, max_request_size: int) -> web.Response:
    """The MMS error body for anything a handler raised (the connection closes when the body was not read)."""
    response = _error_response_for(exc, max_request_size)
    if response.status in (408, 413):
        response.force_close()
    return response


def _error_response_for(exc: Exception, max_request_size: int) -> web.Response:
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
        request_id = next_request_id()
        request["request_id"] = request_id
        request["model"] = ""
        started = time.monotonic()
        traffic.in_flight += 1
        held = 0
        try:
            open_route = api == "inference" and _route(request) in _HEALTH_ROUTES
            if token and not open_route and not _authorised(request, token):
                raise InvalidKey("Token Authorization failed. Token either incorrect, expired, or not provided correctly")
            if traffic.draining and not _open_while_draining(api, request):
                raise ServiceUnavailable("The server is shutting down: it answers the requests it holds and "
                                         "takes no new ones.", retry_after=1)
            length = request.content_length
            if length is not None and length > max_request_size:
                raise RequestTooLarge(f"Request body of {length} bytes exceeds max_request_size "
                                      f"({max_request_size} bytes).")
            if request.body_exists:
                size = length if length is not None else max_request_size  # chunked: it may grow that big
                if not traffic.hold(size):
                    raise ServiceUnavailable("The server holds as many request bodies as it may "
                                             "(max_buffered_bytes); retry shortly.", retry_after=1)
                held = size
            response = await handler(request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - never leak a traceback to a client
            if not isinstance(exc, (ApiException, web.HTTPException)):
                log.exception("unhandled error on %s %s", request.method, request.path)
            response = _error_for(exc, max_request_size)
        finally:
            traffic.in_flight -= 1
            traffic.buffered -= held
        response.headers["x-request-id"] = request_id
        metrics.count_request(api, request["model"], response.status)
        if access_log.isEnabledFor(logging.INFO):
            access_log.info('%s "%s %s" %s %.1fms', request.remote, request.method, request.path_qs,
                            response.status, (time.monotonic() - started) * 1000)
        return response

    return middleware
