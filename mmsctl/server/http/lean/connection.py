"""The lean path's connections: what they share (:class:`LeanServer`, a protocol factory with one timer that
sweeps every connection's deadlines) and each one's state (:class:`LeanConnection`: the HTTP/1.1 codec's reader,
the bytes not fed yet, flow control, deadlines).

Each request is routed by its request line (:mod:`~mmsctl.server.http.lean.routes`). A lean one is parsed to
its last byte by the connection's :class:`~mmsctl.http1.requests.RequestReader` and served by an
:class:`~mmsctl.server.http.lean.exchange.Exchange`, errors included; anything else hands the connection, with
that request's bytes, none of them parsed, to aiohttp's protocol for the rest of its life
(:meth:`LeanConnection.hand_over`). Requests are answered one at a time, in order: what arrives while an
answer is pending waits (reading stops until it is sent), and so does everything while the client does not
read its answers.

Deadlines, as on aiohttp's path: a whole head within ``request_header_timeout`` of the connection's opening or
the last answer (else the connection closes); a whole body within ``request_body_timeout`` of its head (else a
408). After an answer sent before its body was read (408, 413, or a refused request whose client closes), the
rest is read and dropped for at most 10 s (at most the body timeout), so that the client sees the answer, then
the connection closes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable, Optional

from mmsctl.error_body import error_body
from mmsctl.http1.errors import ParseError
from mmsctl.http1.requests import RequestReader
from mmsctl.http1.responses import encode_response
from mmsctl.server.errors import INTERNAL_ERROR, RequestTimeout
from mmsctl.server.http.lean.exchange import Exchange
from mmsctl.server.http.lean.routes import Route, route_at
from mmsctl.server.http.admission import Gate
from mmsctl.server.http.calls import INVALID_ANSWER
from mmsctl.server.http.replies import JSON, Reply
from mmsctl.server.metrics import ServerMetrics
from mmsctl.server.workers.manager import ModelManager

__all__ = ["LeanConnection", "LeanServer"]

log = logging.getLogger("mmsctl.server")
access_log = logging.getLogger("mmsctl.access")

#: The content type of an answer with a body whose handler set none (aiohttp's default, for the same answer on
#: its path; an empty one has none there either).
_OCTETS = b"application/octet-stream"


class LeanServer:
    """The inference API's connections (a protocol factory for ``loop.create_server``)."""

    def __init__(self, manager: ModelManager, gate: Gate, metrics: ServerMetrics, *, header_timeout: float,
                 body_timeout: float, ping: Callable[[], Reply], fallback: Callable[[], asyncio.Protocol]) -> None:
        self.manager = manager
        #: The inference API's admission rules, which aiohttp's path applies too.
        self.gate = gate
        self.max_request_size = gate.max_request_size
        self.metrics = metrics
        #: ``request_header_timeout`` and ``request_body_timeout``, in seconds.
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        #: ``GET /ping``'s answer, the inference API's own.
        self.ping = ping
        #: Makes aiohttp's protocol for a connection that is handed over.
        self.fallback = fallback
        self.connections: set["LeanConnection"] = set()
        self._sweeper: Optional[asyncio.TimerHandle] = None
        #: Resolved when the last connection is gone, once :meth:`close` has been called.
        self._gone: Optional["asyncio.Future[None]"] = None

    def __call__(self) -> "LeanConnection":
        return LeanConnection(self)

    def watch(self) -> None:
        """Make sure deadlines are swept (one timer for all connections, not one per request)."""
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().call_later(self._period(), self._sweep)

    def _period(self) -> float:
        """A quarter of the shorter timeout, within 10 ms and 1 s: a deadline is kept to that."""
        return min(max(min(self.header_timeout, self.body_timeout) / 4, 0.01), 1.0)

    def _sweep(self) -> None:
        self._sweeper = None
        now = time.monotonic()
        for connection in list(self.connections):
            connection.check(now)
        if self.connections:
            self.watch()

    def close(self) -> None:
        """Close the connections still on the lean path (the server stops); each sends what it has written first
        (:meth:`closed` says when they are gone)."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        self._gone = asyncio.get_running_loop().create_future()
        for connection in list(self.connections):
            connection.close()
        self.forget(None)

    def forget(self, connection: Optional["LeanConnection"]) -> None:
        """*connection* (if any) is gone, or handed over to aiohttp's protocol."""
        if connection is not None:
            self.connections.discard(connection)
        if not self.connections and self._gone is not None and not self._gone.done():
            self._gone.set_result(None)

    async def closed(self) -> None:
        """Return once every connection :meth:`close` closed is gone (its answers sent, or the client gone)."""
        if self._gone is not None:
            await asyncio.shield(self._gone)


class LeanConnection(asyncio.Protocol):
    """One inference connection: its requests served here while their request lines are lean routes."""

    def __init__(self, lean: LeanServer) -> None:
        self.lean = lean
        self.transport: Optional[asyncio.Transport] = None
        self.reader = RequestReader(self)
        #: The route of the request whose head is being read, and the request being read or answered.
        self.route: Optional[Route] = None
        self.exchange: Optional[Exchange] = None
        #: Bytes read and not fed yet: a request line not whole yet, or what came while an answer is pending.
        self.pending = b""
        #: When a whole head must have come (None: a request is being read or answered), and its body.
        self.head_by: Optional[float] = None
        self.body_by: Optional[float] = None
        #: After an answer that ends the connection before its body was read: drop what comes until then.
        self.linger_until: Optional[float] = None
        self.writing_paused = False
        self._feeding = False

    # -- asyncio -------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.lean.connections.add(self)
        self._idle()

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.lean.forget(self)
        if self.exchange is not None:  # the client left: its request leaves the queue, its bytes are free
            self.exchange.release()
            self.exchange = None
        self.transport = None

    def data_received(self, data: bytes) -> None:
        if self.linger_until is not None:
            return
        if self.pending:
            data, self.pending = self.pending + data, b""
        self._read(data)

    def pause_writing(self) -> None:
        self.writing_paused = True
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._go_on()

    # -- requests ------------------------------------------------------------------------------
    def _read(self, data: bytes) -> None:
        """Route and parse *data*, request after request, until one waits for its answer."""
        while data:
            transport = self.transport
            if transport is None or transport.is_closing() or self.linger_until is not None:
                return
            exchange = self.exchange
            if self.writing_paused or (exchange is not None and exchange.read):
                self.pending = data  # what follows waits for the answer (bounded: reading stops)
                transport.pause_reading()
                return
            if exchange is None and self.route is None:
                route = route_at(data)
                if route is False:
                    self.pending = data  # (bounded: route_at says None past the line limit)
                    return
                if route is None:
                    self.hand_over(data)
                    return
                self.route = route  # type: ignore[assignment]
            self._feeding = True
            try:
                data = data[self.reader.feed(data):]
            except Exception as exc:  # noqa: BLE001 - answered as aiohttp answers bytes it cannot parse
                self._unparsable(exc)
                return
            finally:
                self._feeding = False
            exchange = self.exchange
            if exchange is not None and exchange.read and exchange.done:
                self._idle()

    def _unparsable(self, exc: Exception) -> None:
        """The lean path's request is not HTTP (or the codec hit a bug: the log has it, the client an MMS 500)."""
        if isinstance(exc, ParseError):
            status, kind = exc.status, "BadRequestException"
            message = str(exc) if exc.status != 400 or exc.public else "Invalid HTTP message."
        else:
            log.exception("unhandled error reading a request on the lean path")
            status, kind, message = 500, "InternalServerException", INTERNAL_ERROR
        self._refuse(Reply(status, error_body(status, kind, message), JSON, close=True))

    def _refuse(self, reply: Reply) -> None:
        """Bytes that end the connection: answered (unless their request was), then read and dropped a while."""
        exchange = self.exchange
        if exchange is None:
            self._write(reply, b"", True)
        elif not exchange.done:
            exchange.answer(reply)
        if self.linger_until is None:
            self._linger()

    # -- the codec's callbacks (RequestSink) ---------------------------------------------------
    def on_head(self, headers: list[tuple[bytes, bytes]], keep_alive: bool, length: Optional[int],
                expect: Optional[bytes]) -> Exchange:
        route, self.route = self.route, None
        assert route is not None  # routed before it was fed
        self.exchange = exchange = Exchange(self, route, headers, keep_alive, length)
        self.head_by = None
        if length != 0:
            self.body_by = time.monotonic() + self.lean.body_timeout
        exchange.open(expect)
        return exchange

    # -- answers -------------------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        if self.transport is not None:
            self.transport.write(data)

    def answer(self, exchange: Exchange, reply: Reply) -> None:
        """Send *exchange*'s answer, count it and log it; then the next request, or the end of the connection."""
        transport = self.transport
        if transport is None:
            return
        close = reply.close or not exchange.keep_alive
        status = self._write(reply, b"x-request-id: %s\r\n" % exchange.request_id.encode(), close)
        model = exchange.model
        self.lean.metrics.count_request("inference", model.name if model is not None else "", status)
        if access_log.isEnabledFor(logging.INFO):
            peer = transport.get_extra_info("peername")
            access_log.info('%s "%s %s" %s %.1fms', peer[0] if peer else "", exchange.method, exchange.path, status,
                            (time.monotonic() - exchange.started) * 1000)
        if close:
            if exchange.read:
                transport.close()
            else:  # its body is still coming: read and drop it for a while, so that the client sees the answer
                self._linger()
        elif exchange.read and not self._feeding:
            self._idle()
            self._go_on()

    def _write(self, reply: Reply, extra: bytes, close: bool) -> int:
        """Write *reply* (with the header lines *extra*); the status sent (500 for an answer no HTTP can carry)."""
        try:
            body = reply.body
            data = encode_response(reply.status, reply.reason, reply.content_type or (_OCTETS if body else None),
                                   reply.headers, body, extra, close=close)
            status = reply.status
        except (ValueError, TypeError, UnicodeEncodeError):  # a handler's status or header no HTTP can carry
            status, data = 500, encode_response(500, None, JSON, {}, INVALID_ANSWER, extra, close=close)
        assert self.transport is not None
        self.transport.write(data)
        return status

    def _idle(self) -> None:
        """No request in progress: the next head must come within the header timeout."""
        self.exchange, self.route, self.body_by = None, None, None
        self.head_by = time.monotonic() + self.lean.header_timeout
        self.lean.watch()

    def _go_on(self) -> None:
        """Read on, and serve what waits, unless an answer is pending or the client is not reading."""
        transport = self.transport
        if transport is None or self.writing_paused or (self.exchange is not None and self.exchange.read):
            return
        transport.resume_reading()
        if self.pending:
            data, self.pending = self.pending, b""
            self._read(data)

    def _linger(self) -> None:
        self.exchange, self.pending, self.head_by, self.body_by = None, b"", None, None
        self.linger_until = time.monotonic() + min(10.0, self.lean.body_timeout)
        if self.transport is not None:
            self.transport.resume_reading()
        self.lean.watch()

    # -- deadlines -----------------------------------------------------------------------------
    def check(self, now: float) -> None:
        """Close, or answer 408, what is past its deadline (the server's sweeper calls this)."""
        if self.linger_until is not None:
            if now >= self.linger_until:
                self.close()
        elif self.head_by is not None and now >= self.head_by:
            self.close()  # no whole head in time (idle keep-alive included): closed without an answer, as aiohttp does
        elif self.body_by is not None and now >= self.body_by:
            exchange = self.exchange
            if exchange is not None and not exchange.done:
                timeout = self.lean.body_timeout
                exchange.fail(RequestTimeout(f"The request body did not arrive within {timeout:g} s "
                                             "(request_body_timeout)."))
            else:
                self.close()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    # -- aiohttp's path ------------------------------------------------------------------------
    def hand_over(self, data: bytes) -> None:
        """Give this connection to aiohttp's protocol, starting with *data* (a request not parsed here)."""
        transport = self.transport
        if transport is None:
            return
        self.lean.forget(self)
        self.transport = None
        protocol = self.lean.fallback()
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        if data:
            protocol.data_received(data)
        transport.resume_reading()
