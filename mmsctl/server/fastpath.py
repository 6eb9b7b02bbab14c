"""The inference API's hot path: plain predictions and pings answered straight off httptools.

Every connection to the inference API starts with a :class:`LeanProtocol`. A request that
arrives whole (in one read, or in several within a second: clients such as Go's and curl
write the head and a larger body separately) and is one of

* ``POST /predictions/{model}`` or ``POST /predictions/{model}/{version}`` with a raw body
  (``Content-Length``, not a form, no ``Expect``), the token (if one is set) and a model that
  takes it;
* ``GET /ping`` without a body;
* SageMaker's ``POST /invocations`` for the default answer form (:mod:`~mmsctl.server.http.invocations` says
  which), its body as for a prediction, or a v2 infer body (below);
* ``POST /v2/models/{model}[/versions/{version}]/infer`` (the Open Inference Protocol) that makes one
  request of the model's queue: :mod:`~mmsctl.server.v2.recipes` says which, and renders its answer
  with the full path's own steps;

is parsed by httptools (llhttp, C), queued for a worker and answered from the worker's answer,
without an asyncio task, an aiohttp request or the middleware; it is counted in the metrics,
carries ``x-request-id`` and is access-logged like any other request. The connection stays
keep-alive, is closed after ``request_header_timeout`` idle, and a client that leaves takes
its request out of the queue, as on the full path.

Everything else (a request still incomplete after a second or larger than
``max_request_size`` or 1 MiB, pipelined or chunked requests, a query,
a percent-escape, a form, ``Expect``, ``Connection: close``, HTTP/1.0, any method or path
not above, and every request the full path would refuse: a bad token, an unknown model, a
full queue, a draining server, a body over ``max_request_size`` or ``max_buffered_bytes``)
hands the connection, with the bytes of that request, to aiohttp's protocol
(:mod:`~mmsctl.server.http.connections`), which serves it and the rest of the connection exactly
as it serves the management and metrics APIs. What the full path would refuse is judged by the
same admission gate (:mod:`~mmsctl.server.http.admission`: header anomalies, token, draining, sizes,
buffered bytes) on both paths. The fast path therefore never answers an error of its own
making except a worker's answer it cannot send (500).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from email.utils import formatdate
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

import httptools

from mmsctl.engine.protocol import Parameter, RequestItem, ResponseItem
from mmsctl.error_body import error_body
from mmsctl.server.http import invocations
from mmsctl.server.http.admission import Gate, Ticket
from mmsctl.server.workers.batching import Job
from mmsctl.server.errors import ApiException
from mmsctl.server.metrics import ServerMetrics
from mmsctl.server.http.middleware import next_request_id
from mmsctl.server.workers.manager import ModelManager
from mmsctl.server.workers.model import Model

if TYPE_CHECKING:  # numpy and the v2 codec load with the first v2 request
    from mmsctl.server.v2.recipes import V2Call

__all__ = ["LeanInference", "LeanProtocol"]

access_log = logging.getLogger("mmsctl.access")

#: A request with more header fields, or a longer head, goes to the full path (which sets the limits).
_MAX_FIELDS = 64
_MAX_HEAD = 8190
#: The most bytes of one request read here before it is complete (head and body); larger ones are the full path's.
_MAX_PARTIAL = 1 << 20
#: Forms and 100-continue are the full path's.
_FORMS = frozenset({"multipart/form-data", "application/x-www-form-urlencoded"})
_PHRASES = {s.value: s.phrase for s in HTTPStatus}
#: The content type of an answer whose handler set none (what the full path, aiohttp, sends).
_OCTETS = b"application/octet-stream"
#: The route a prediction URL of so many "/"-separated parts is the full path's.
_ROUTES = {3: "/predictions/{model}", 4: "/predictions/{model}/{version}"}


@dataclass
class LeanInference:
    """What every fast-path connection of one inference API shares."""

    manager: ModelManager
    #: The inference API's admission rules, which the full path applies too.
    gate: Gate
    metrics: ServerMetrics
    #: Seconds a connection may sit without sending a complete head (``request_header_timeout``).
    header_timeout: float
    #: ``GET /ping``'s answer (status text, code), the inference API's own rule.
    health: Callable[[], tuple[str, int]]
    #: Makes the full path's protocol for a connection that is handed over.
    fallback: Callable[[], asyncio.Protocol]
    connections: set["LeanProtocol"] = field(default_factory=set)
    _sweeper: Optional[asyncio.TimerHandle] = None

    def __call__(self) -> "LeanProtocol":
        return LeanProtocol(self)

    def watch(self) -> None:
        """Make sure idle connections are swept (one timer for all of them, not one per request)."""
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().call_later(self._period(), self._sweep)

    def _period(self) -> float:
        return min(max(self.header_timeout / 4, 0.01), 1.0)

    def _sweep(self) -> None:
        """Close the connections idle for ``request_header_timeout`` (within a quarter of it, at most 1 s)."""
        self._sweeper = None
        now = time.monotonic()
        period = self._period()
        for connection in list(self.connections):
            since = connection.idle_since
            if since is not None and now - since >= self.header_timeout:
                connection.close()
            elif connection.partial_since is not None and now - connection.partial_since >= period:
                connection.give_up_partial()  # a slow upload: the full path and its timeouts take it
        if self.connections:
            self.watch()

    def close(self) -> None:
        """Close the connections still on the fast path (the server stops)."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for connection in list(self.connections):
            connection.close()


class _Date:
    """The ``Date`` header value, formatted once a second."""

    second = -1
    value = b""

    @classmethod
    def now(cls) -> bytes:
        second = int(time.time())
        if second != cls.second:
            cls.second, cls.value = second, formatdate(second, usegmt=True).encode()
        return cls.value


class LeanProtocol(asyncio.Protocol):
    """One inference connection: served here while its requests are plain, else handed to aiohttp."""

    def __init__(self, lean: LeanInference) -> None:
        self.lean = lean
        self.transport: Optional[asyncio.Transport] = None
        self.parser = httptools.HttpRequestParser(self)
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._begun = 0
        self._complete = 0
        self._head_size = 0
        #: Whether the request just parsed lets the connection stay open (read as it completes: llhttp
        #: forgets ``Connection: close`` once the message is done).
        self._keep_alive = True
        #: The bytes of a request not yet complete, what they hold of the traffic, and since when.
        self._partial: list[bytes] = []
        self._partial_ticket: Optional[Ticket] = None
        self.partial_since: Optional[float] = None
        #: The request being answered, what it holds, and its model.
        self._job: Optional[Job] = None
        self._ticket: Optional[Ticket] = None
        self._model: Optional[Model] = None
        #: A v2 infer request's call (its answer is rendered as the protocol's), or None.
        self._v2: Optional["V2Call"] = None
        self._request_id = ""
        self._method = b""
        self._started = 0.0
        #: What arrived while an answer was pending (the client pipelines); read once it is sent.
        self._stash = b""
        #: Since when the connection has waited for a request (None: it is being served).
        self.idle_since: Optional[float] = None
        #: The client reads its answers slower than it sends requests: read nothing until it catches up.
        self._writing_paused = False

    # -- httptools callbacks -------------------------------------------------------------------
    def on_message_begin(self) -> None:
        self._begun += 1

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))
        self._head_size += len(name) + len(value)

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        self._complete += 1
        self._keep_alive = self.parser.should_keep_alive()

    # -- connection --------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.lean.connections.add(self)
        self._arm()

    def _arm(self) -> None:
        self.idle_since = time.monotonic()
        self.lean.watch()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.lean.connections.discard(self)
        self._drop_partial()
        if self._job is not None and self._model is not None:  # the client left: its request leaves the queue
            self._model.withdraw(self._job)
        self.transport = None

    def data_received(self, data: bytes) -> None:
        if self._job is not None or self._writing_paused:  # what follows waits (bounded: reading stops)
            self._stash += data
            assert self.transport is not None
            self.transport.pause_reading()
            return
        self.idle_since = None
        if self.partial_since is not None:
            self._feed(data)
        else:
            self._serve(data)

    def _serve(self, data: bytes) -> None:
        """Serve *data* (it starts a request) here, or hand the connection over with it."""
        self._url, self._headers, self._body = b"", [], []
        self._begun = self._complete = self._head_size = 0
        self._feed(data)

    def _feed(self, data: bytes) -> None:
        """Parse *data* (the next bytes of the request being read); serve the request once it is whole."""
        try:
            self.parser.feed_data(data)
        except Exception:  # noqa: BLE001 - httptools' errors and upgrades: the full path answers them
            self._hand_over(self._take_partial(data))
            return
        if self._begun == 1 and self._complete == 0 and self._wait_for_rest(data):
            return
        data = self._take_partial(data)
        if self._begun != 1 or self._complete != 1 or not self._take():
            self._hand_over(data)

    # -- a request in several reads ------------------------------------------------------------
    def _wait_for_rest(self, data: bytes) -> bool:
        """Keep *data*, the start of a request that may still be plain, until the rest arrives; False
        when it is the full path's already (too large, chunked, ``Expect``, or no room in the buffers)."""
        ticket, limit = self._partial_ticket, self.lean.gate.max_request_size
        size = (ticket.size if ticket is not None else 0) + len(data)
        if (size > min(_MAX_PARTIAL, limit + _MAX_HEAD) or self._head_size > _MAX_HEAD
                or len(self._url) > 2048 or len(self._headers) > _MAX_FIELDS):
            return False
        for name, value in self._headers:
            lower = name.lower()
            if lower in (b"transfer-encoding", b"expect"):
                return False  # 100-continue: the client waits for an answer before it sends the body
            declared = value.strip()
            if lower == b"content-length" and (not declared.isdigit() or len(declared) > 18
                                               or int(declared) > limit):
                return False  # (a length of thousands of digits is past what int() takes)
        if ticket is None:
            ticket = self.lean.gate.traffic.reserve(len(data), counted=False)
            if ticket is None:
                return False
            self._partial_ticket, self.partial_since = ticket, time.monotonic()
            self.lean.watch()
        elif not ticket.grow(len(data)):
            return False
        self._partial.append(data)
        return True

    def _take_partial(self, data: bytes) -> bytes:
        """The whole request read so far, ending with *data*; what it held is released."""
        if self.partial_since is None:
            return data
        whole = b"".join(self._partial) + data
        self._drop_partial()
        return whole

    def _drop_partial(self) -> None:
        if self._partial_ticket is not None:
            self._partial_ticket.release()
        self._partial, self._partial_ticket, self.partial_since = [], None, None

    def give_up_partial(self) -> None:
        """The request has been incomplete too long: the full path (and its body timeout) takes it."""
        if self.partial_since is not None:
            self._hand_over(self._take_partial(b""))

    # -- the two routes ------------------------------------------------------------------------
    def _take(self) -> bool:
        """Start answering the request just parsed; False when it is the full path's."""
        parser, url = self.parser, self._url
        if (not self._keep_alive or parser.get_http_version() != "1.1" or len(url) > 2048
                or len(self._headers) > _MAX_FIELDS or self._head_size > _MAX_HEAD or not url.isascii()
                or b"?" in url or b"%" in url or b"#" in url or b"/." in url):
            return False
        method = parser.get_method()
        if method == b"GET" and url == b"/ping":
            return self._ping()
        parts = url.split(b"/")
        if method != b"POST" or parts[0] or not all(parts[1:]):
            return False
        if parts[1] == b"v2":
            return self._take_v2(parts)
        if len(parts) == 2 and parts[1] == b"invocations":
            return self._take_invocation()
        if len(parts) not in (3, 4) or parts[1] != b"predictions":
            return False
        body = b"".join(self._body)
        try:
            ticket = self.lean.gate.admit("POST", _ROUTES[len(parts)], self._headers, True, len(body), bool(body))
        except ApiException:
            return False
        if not self._enqueue(ticket, parts[2].decode(), parts[3].decode() if len(parts) == 4 else None, body,
                             _mime(ticket.headers)):
            ticket.release()
            return False
        return True

    def _take_invocation(self) -> bool:
        """SageMaker's ``POST /invocations`` in its default form, or with a v2 body
        (:mod:`~mmsctl.server.http.invocations` decides); False when it is the full path's."""
        body = b"".join(self._body)
        try:
            ticket = self.lean.gate.admit("POST", "/invocations", self._headers, True, len(body), bool(body))
        except ApiException:
            return False
        headers = ticket.headers
        name = invocations.lean_model(self.lean.manager, headers)
        if name is not None:
            mime = _mime(headers)
            if invocations.maybe_v2_body(mime, body, headers):
                if self._start_v2(ticket, name, None, body):
                    return True
            elif self._enqueue(ticket, name, None, body, mime):
                return True
        ticket.release()
        return False

    def _enqueue(self, ticket: Ticket, name: str, version: Optional[str], body: bytes, mime: Optional[str]) -> bool:
        """Queue an admitted prediction of media type *mime*; False when it is the full path's (a form,
        ``Expect``, an unknown model, a full queue: what the full path answers, or refuses, itself)."""
        headers = ticket.headers
        if "transfer-encoding" in headers or "expect" in headers:
            return False
        if mime in _FORMS:
            return False
        manager = self.lean.manager
        request_id = next_request_id()
        try:
            model = manager.get(name, version)
            job = manager.enqueue(model, RequestItem(request_id, [Parameter("body", body, mime)], headers))
        except ApiException:
            return False
        self._start(job, ticket, model, request_id, None)
        return True

    def _take_v2(self, parts: list[bytes]) -> bool:
        """Start answering a v2 infer request (:mod:`~mmsctl.server.v2.recipes`); False when it is the full path's."""
        fastpath_v2 = _V2[0] if _V2 else _load_v2()
        target = fastpath_v2.infer_route(parts)
        if target is None:
            return False
        route, name, version = target
        body = b"".join(self._body)
        try:
            ticket = self.lean.gate.admit("POST", route, self._headers, True, len(body), bool(body))
        except ApiException:
            return False
        if self._start_v2(ticket, name, version, body):
            return True
        ticket.release()
        return False

    def _start_v2(self, ticket: Ticket, name: str, version: Optional[str], body: bytes) -> bool:
        """Queue an admitted v2 infer request for model *name*; False when it is the full path's."""
        fastpath_v2 = _V2[0] if _V2 else _load_v2()
        request_id = next_request_id()
        call = fastpath_v2.prepare(self.lean.manager, ticket.headers, self._headers, name, version, body, request_id,
                                   self.lean.gate.max_request_size)
        try:
            if call is not None:
                self._start(self.lean.manager.enqueue(call.model, call.item), ticket, call.model, request_id,
                            call)
                return True
        except ApiException:  # a full queue, a model without workers: the full path's answer
            pass
        return False

    def _start(self, job: Job, ticket: Ticket, model: Model, request_id: str, v2: Optional["V2Call"]) -> None:
        """Wait for *job*'s answer (a v2 infer's is rendered by *v2*)."""
        self._job, self._ticket, self._model, self._request_id, self._v2 = job, ticket, model, request_id, v2
        self._method, self._started = b"POST", time.monotonic()
        job.future.add_done_callback(self._answered)

    def _ping(self) -> bool:
        if self._body:
            return False
        try:
            ticket = self.lean.gate.admit("GET", "/ping", self._headers, True, None, False)
        except ApiException:
            return False
        with ticket:
            status, code = self.lean.health()
            body = (json.dumps({"status": status}, indent=2) + "\n").encode()
            request_id = next_request_id()
            self._write(code, None, body, b"application/json; charset=utf-8", {}, request_id)
        self._finish(code, "", request_id, b"GET", time.monotonic())
        return True

    # -- answers -------------------------------------------------------------------------------
    def _answered(self, future: "asyncio.Future[ResponseItem]") -> None:
        if self._ticket is not None:
            self._ticket.release()
        self._job, self._ticket = None, None
        if future.cancelled() or self.transport is None:  # the client left
            return
        response = future.result()
        try:
            if self._v2 is not None:
                reply = self._v2.reply(response)
                status = self._write(reply.status, None, reply.body, reply.content_type, reply.headers,
                                     self._request_id)
            else:
                status = self._write(response.status, response.reason, response.body,
                                     response.content_type.encode() if response.content_type else _OCTETS,
                                     response.headers, self._request_id)
        except (ValueError, TypeError, UnicodeEncodeError):  # a handler's status or header no HTTP can carry
            status = 500
            self._write(500, None, error_body(500, "InternalServerException", "Invalid response from the model."),
                        b"application/json", {}, self._request_id)
        self._finish(status, self._model.name if self._model is not None else "", self._request_id, self._method,
                     self._started)

    def _finish(self, status: int, model: str, request_id: str, method: bytes, started: float) -> None:
        """Count the answered request, log it, and read on."""
        self.lean.metrics.count_request("inference", model, status)
        if access_log.isEnabledFor(logging.INFO) and self.transport is not None:
            peer = self.transport.get_extra_info("peername")
            access_log.info('%s "%s %s" %s %.1fms', peer[0] if peer else "", method.decode(),
                            self._url.decode(), status, (time.monotonic() - started) * 1000)
        if self.transport is not None and self._job is None:
            self._arm()  # closes a connection that sends no request, or does not read its answers, in time
            self._read_on()

    def _read_on(self) -> None:
        """Serve what waits, or read on, unless an answer is pending or the client is not reading."""
        if self.transport is None or self._job is not None or self._writing_paused:
            return
        self.transport.resume_reading()
        if self._stash:
            data, self._stash = self._stash, b""
            self.idle_since = None
            self._serve(data)

    def pause_writing(self) -> None:
        self._writing_paused = True
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._read_on()

    def _write(self, status: int, reason: Optional[str], body: bytes, content_type: Optional[bytes],
               headers: dict[str, str], request_id: str) -> int:
        """Send one answer (raise ValueError, and send nothing, if it cannot be sent as it is)."""
        if not isinstance(status, int) or not 200 <= status <= 999:
            raise ValueError(f"status {status!r}")
        phrase = reason if reason is not None else _PHRASES.get(status, "")
        lines = [b"HTTP/1.1 %d %s\r\n" % (status, _field(phrase))]
        if content_type is not None:
            lines.append(b"Content-Type: " + _field(content_type.decode()) + b"\r\n")
        for key, value in headers.items():
            lines.append(_field(str(key)) + b": " + _field(str(value)) + b"\r\n")
        lines.append(b"x-request-id: %s\r\nDate: %s\r\nContent-Length: %d\r\n\r\n"
                     % (request_id.encode(), _Date.now(), len(body)))
        lines.append(body)
        assert self.transport is not None
        self.transport.write(b"".join(lines))
        return status

    # -- the full path ---------------------------------------------------------------------------
    def _hand_over(self, data: bytes) -> None:
        """Give this connection to aiohttp's protocol, starting with *data* (the start of a request)."""
        transport = self.transport
        if transport is None:
            return
        self.lean.connections.discard(self)
        self.transport = None
        protocol = self.lean.fallback()
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        if data:
            protocol.data_received(data)
        transport.resume_reading()


#: :mod:`~mmsctl.server.v2.recipes` once the first v2 request has loaded it (with numpy and the codec).
_V2: list[Any] = []


def _load_v2() -> Any:
    from mmsctl.server.v2 import recipes as fastpath_v2

    _V2.append(fastpath_v2)
    return fastpath_v2


def _mime(headers: Mapping[str, str]) -> Optional[str]:
    """The request's media type, lower case, without parameters (None: no Content-Type)."""
    content_type = headers.get("content-type")
    return content_type.split(";")[0].strip().lower() if content_type else None


def _field(text: Any) -> bytes:
    """A status phrase, header name or value as bytes; ValueError for one that would split the head."""
    value = str(text)
    if "\r" in value or "\n" in value:
        raise ValueError("line break in a header")
    return value.encode("utf-8")
