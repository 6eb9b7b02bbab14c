"""HTTP connections: what happens before a request reaches the middleware.

aiohttp answers a request it cannot parse (a URL or header line over 8190 bytes, too many
headers, a malformed request line) itself, in plain text, without our middleware. Here such
a request gets MMS's JSON error body like every other error: 414 for a URL that is too long,
431 for headers, 400 for anything else malformed (MMS says "Invalid HTTP message."), and
the connection is closed. A connection that has not sent a complete request head within
``request_header_timeout`` seconds (counted from its opening, or from the end of the
previous answer) is closed: aiohttp's keep-alive timer already closes a connection whose
parser is waiting for a head, partial or not, so that timer is set to this setting.

Requests pipelined before bytes that cannot be parsed are each answered, then the 400 is sent
and the connection closed (:mod:`~mmsctl.http1.splitter` cuts the read that fails).
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from aiohttp import web
from aiohttp.http_exceptions import LineTooLong
from aiohttp.web_protocol import RequestHandler

from mmsctl.http1.splitter import RequestSplitter
from mmsctl.server.errors import INTERNAL_ERROR
from mmsctl.server.http.replies import error_response

__all__ = ["MmsAppRunner"]

log = logging.getLogger("mmsctl.server")


def _parse_error(exc: Optional[BaseException], status: int) -> web.Response:
    if status >= 500:
        return error_response(500, "InternalServerException", INTERNAL_ERROR)
    text = str(exc or "")
    if isinstance(exc, LineTooLong):
        # aiohttp says which line only by quoting it: the request target starts with "/" or a scheme.
        line = exc.args[0] if exc.args and isinstance(exc.args[0], (bytes, bytearray, str)) else b""
        head = bytes(line[:8], "latin-1") if isinstance(line, str) else bytes(line[:8])
        if head.startswith(b"/") or head.lower().startswith(b"http"):
            return error_response(414, "BadRequestException", "Request URI too long.")
        return error_response(431, "BadRequestException", "Request header fields too large.")
    if "too many headers" in text.lower():
        return error_response(431, "BadRequestException", "Too many request header fields.")
    return error_response(400, "BadRequestException", "Invalid HTTP message.")


class _MmsRequestHandler(RequestHandler):
    """aiohttp's protocol, answering what it cannot parse with an MMS error body, after the requests before it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._splitter = RequestSplitter()

    def data_received(self, data: bytes) -> None:
        pieces = self._splitter.split(data)
        if len(pieces) == 1:
            super().data_received(pieces[0])
            return
        for piece in pieces:  # whole requests, then what fails to parse
            super().data_received(piece)

    def handle_error(self, request: Any, status: int = 500, exc: Optional[BaseException] = None,
                     message: Optional[str] = None) -> web.StreamResponse:
        if request.writer.output_size > 0:  # an answer already started: nothing more can be said
            raise ConnectionError("Response is sent already, cannot send another response with the error message")
        log.debug("unparsable request from %s: %s", request.remote, exc)
        response = _parse_error(exc, status)
        response.force_close()
        return response


class _MmsServer(web.Server):
    def __call__(self) -> RequestHandler:
        return _MmsRequestHandler(self, loop=self._loop, **self._kwargs)


class MmsAppRunner(web.AppRunner):
    """An AppRunner whose connections use :class:`_MmsRequestHandler`.

    ``header_timeout`` becomes aiohttp's keep-alive timeout (see the module's docstring); a body
    that stops coming is cut by ``request_body_timeout`` in :func:`mmsctl.server.http.read_body`.
    Bodies are never decompressed (as in MMS, a handler gets the bytes that were sent; no
    gzip bomb reaches memory), and a client that leaves cancels its request's handler.
    """

    def __init__(self, app: web.Application, *, header_timeout: float, body_timeout: float, **kwargs: Any) -> None:
        # lingering_time: after an answer sent before the body was read (408, 413), how long the rest is
        # read (and thrown away) so the client sees the answer; at most the body timeout.
        super().__init__(app, keepalive_timeout=header_timeout, auto_decompress=False, handler_cancellation=True,
                         lingering_time=min(10.0, body_timeout), **kwargs)

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _MmsServer  # the same server, making our protocol for each connection
        return server
