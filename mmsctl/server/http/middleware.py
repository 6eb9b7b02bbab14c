"""What every request of every API goes through: an id, admission (:mod:`~mmsctl.server.http.admission`), MMS error bodies.

No request ever gets a traceback: an ``ApiException`` becomes its MMS error body, aiohttp's
own HTTP errors are mapped to MMS's types, and anything else is a 500 that is logged here.
Every answer carries ``x-request-id``, is counted in the metrics and (with
``MMSCTL_ACCESS_LOG=1``) written to the access log.

Which requests need a token, and which a draining server still takes, is decided by the
route aiohttp matched (the one that will handle the request), never by reading the path
again; the rules themselves are the admission gate's, which the lean path applies too.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import uuid
from typing import Awaitable, Callable

from aiohttp import HttpVersion11, web

from mmsctl.server.errors import ApiException
from mmsctl.server.http.admission import Gate
from mmsctl.server.http.replies import as_response, error_reply
from mmsctl.server.metrics import ServerMetrics
from mmsctl.server.v2.errors import as_v2_error, is_v2_path

__all__ = ["HEADERS", "MODEL", "REQUEST_ID", "api_middleware", "next_request_id"]

log = logging.getLogger("mmsctl.server")
access_log = logging.getLogger("mmsctl.access")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: What the middleware keeps on each request: its id, the model a handler names (for the metrics) and the headers
#: as admission read them.
REQUEST_ID = web.RequestKey("request_id", str)
MODEL = web.RequestKey("model", str)
HEADERS = web.RequestKey("headers", dict)


_ID_PREFIX = str(uuid.uuid4())[:23]
_ID_COUNTER = itertools.count(1)


def next_request_id() -> str:
    """A request id shaped like a UUID: this process's random prefix and a counter (a uuid4 each time
    costs a system call per request); unique within the server, and between servers with odds a uuid4 gives."""
    return f"{_ID_PREFIX}-{next(_ID_COUNTER):012x}"


def _route(request: web.Request) -> str:
    """The canonical path of the route that handles *request* ("" when none matched)."""
    route = request.match_info.route
    resource = getattr(route, "resource", None)
    return resource.canonical if resource is not None else ""


def api_middleware(gate: Gate, metrics: ServerMetrics) -> Callable[..., Awaitable[web.StreamResponse]]:
    """The middleware of the API whose admission rules are *gate*."""
    api, max_request_size = gate.api, gate.max_request_size

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        request_id = next_request_id()
        request[REQUEST_ID] = request_id
        request[MODEL] = ""
        started = time.monotonic()
        try:
            with gate.admit(request.method, _route(request), request.raw_headers, request.version == HttpVersion11,
                            request.content_length, request.body_exists) as ticket:
                request[HEADERS] = ticket.headers
                response = await handler(request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - never leak a traceback to a client
            if not isinstance(exc, (ApiException, web.HTTPException)):
                log.exception("unhandled error on %s %s (request %s)", request.method, request.path, request_id)
            reply = error_reply(exc, max_request_size)
            if is_v2_path(request.path):  # the Open Inference Protocol's {"error": ...}
                reply = as_v2_error(reply)
            response = as_response(reply)
        response.headers["x-request-id"] = request_id
        metrics.count_request(api, request[MODEL], response.status)
        if access_log.isEnabledFor(logging.INFO):
            access_log.info('%s "%s %s" %s %.1fms', request.remote, request.method, request.path_qs,
                            response.status, (time.monotonic() - started) * 1000)
        return response

    return middleware
