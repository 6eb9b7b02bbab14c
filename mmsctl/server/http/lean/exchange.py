"""One request on the lean path, from its head to its answer (uvicorn's request/response cycle).

The connection (:mod:`~mmsctl.server.http.lean.connection`) holds what outlives a request: the parser, the
bytes not fed yet, flow control, deadlines. An :class:`Exchange` holds what one request has: its route and
head, the ticket admission gave it, its body, the call it makes and the jobs it waits for. What a request
means is decided by the same functions aiohttp's routes call (:func:`~mmsctl.server.http.inference_api.
prediction_call`, :func:`~mmsctl.server.http.invocations.invocation_call`,
:func:`~mmsctl.server.v2.calls.infer_call`), in the same order: admission and the model once the head is
whole, the rest once the body is.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Optional, Protocol

from aiohttp import web

from mmsctl.engine.protocol import ResponseItem
from mmsctl.http1.responses import CONTINUE
from mmsctl.server.errors import ApiException, RequestTooLarge
from mmsctl.server.http.admission import Ticket
from mmsctl.server.http.calls import Call, Outcome
from mmsctl.server.http.inference_api import prediction_call
from mmsctl.server.http.invocations import invocation_call, invocation_model
from mmsctl.server.http.lean.routes import INVOKE, PING, PREDICT, V2, Route
from mmsctl.server.http.middleware import next_request_id
from mmsctl.server.http.replies import Reply, error_reply
from mmsctl.server.workers.batching import Job
from mmsctl.server.workers.model import Model

__all__ = ["Channel", "Exchange"]

log = logging.getLogger("mmsctl.server")


class Channel(Protocol):
    """What an exchange needs of its connection (:class:`~mmsctl.server.http.lean.connection.LeanConnection`)."""

    #: What the connections share: ``manager``, ``gate``, ``ping``, ``body_timeout``
    #: (:class:`~mmsctl.server.http.lean.connection.LeanServer`).
    lean: Any
    transport: Any
    body_by: Optional[float]

    def write(self, data: bytes) -> None: ...

    def answer(self, exchange: "Exchange", reply: Reply) -> None: ...


class Exchange:
    """One request: read, admitted, queued, answered. (Slots, no dataclass: one is made per request.)"""

    __slots__ = ("conn", "route", "raw_headers", "headers", "keep_alive", "length", "request_id", "started",
                 "ticket", "model", "chunks", "size", "body", "jobs", "call", "preparing", "read", "done")

    #: The lean path takes no query (:mod:`~mmsctl.server.http.lean.routes`).
    query: tuple[tuple[str, str], ...] = ()

    def __init__(self, conn: Channel, route: Route, raw_headers: list[tuple[bytes, bytes]],
                 keep_alive: bool, length: Optional[int]) -> None:
        self.conn = conn
        self.route = route
        self.raw_headers = raw_headers
        self.headers: dict[str, str] = {}
        self.keep_alive = keep_alive
        #: The declared body length (None: chunked).
        self.length = length
        self.request_id = next_request_id()
        self.started = time.monotonic()
        self.ticket: Optional[Ticket] = None
        self.model: Optional[Model] = None
        self.chunks: list[bytes] = []
        self.size = 0
        self.body = b""
        self.jobs: list[Job] = []
        self.call: Optional[Call] = None
        #: The task making the call of a multipart form or of a body decoded off the loop (held: the loop keeps only
        #: a weak reference).
        self.preparing: Optional["asyncio.Future[Any]"] = None
        #: The whole request has been read.
        self.read = False
        #: Answered (or refused): the rest of its body is read and dropped.
        self.done = False

    @property
    def method(self) -> str:
        return "GET" if self.route[0] == PING else "POST"

    @property
    def path(self) -> str:
        """The request's path (a lean route's target is its path: :mod:`~mmsctl.server.http.lean.routes`)."""
        _, path, name, version = self.route
        return path.replace("{model}", name or "").replace("{version}", version or "")

    @property
    def v2(self) -> bool:
        """Whether its errors are the Open Inference Protocol's (``{"error": ...}``)."""
        return self.route[1].startswith("/v2/") or (self.call is not None and self.call.v2)

    # -- the head --------------------------------------------------------------------------------
    def open(self, expect: Optional[bytes]) -> None:
        """The head is whole: admit the request and find its model, or answer it now (before its body); a client
        that *expect*s ``100-continue`` is told to send its body once the request is admitted."""
        lean = self.conn.lean
        try:
            if expect is not None and expect.lower() != b"100-continue":
                raise web.HTTPExpectationFailed()
            kind, path, name, version = self.route
            self.ticket = ticket = lean.gate.admit("GET" if kind == PING else "POST", path, self.raw_headers, True,
                                                   self.length, self.length != 0)
            self.headers = ticket.headers
            if kind == PREDICT or kind == V2:
                self.model = lean.manager.get(name or "", version)
            elif kind == INVOKE:
                self.model = invocation_model(lean.manager, None, self.headers)
            if expect is not None:
                self.conn.write(CONTINUE)
        except Exception as exc:  # noqa: BLE001 - answered as its error body, never a traceback
            # a client told no 100 Continue may send its body or not: the connection cannot go on after it
            self.fail(exc, close=expect is not None and self.length != 0)

    def on_body(self, chunk: bytes) -> None:
        """The next bytes of the body (dropped once the request is answered)."""
        if self.done:
            return
        self.size += len(chunk)
        self.chunks.append(chunk)
        if self.length is None and self.size > self.conn.lean.gate.max_request_size:
            limit = self.conn.lean.gate.max_request_size
            self.fail(RequestTooLarge(f"Request body exceeds max_request_size ({limit} bytes)."))

    # -- the body is whole -------------------------------------------------------------------------
    def on_complete(self) -> None:
        """The body is whole: make the request's call, queue it, and answer when its jobs are answered."""
        self.read = True
        self.conn.body_by = None
        if self.done:
            return
        self.body = b"".join(self.chunks) if len(self.chunks) != 1 else self.chunks[0]
        self.chunks = []
        try:
            if self.route[0] == PREDICT:
                outcome = prediction_call(self.model, self, self.conn.lean.max_request_size)  # type: ignore[arg-type]
            else:
                outcome = self._outcome()
            if not isinstance(outcome, (Reply, Call)):
                self.preparing = asyncio.ensure_future(outcome)  # a multipart form, or a decode off the loop
                self.preparing.add_done_callback(self._prepared)
                return
            self._dispatch(outcome)
        except Exception as exc:  # noqa: BLE001 - answered as its error body, never a traceback
            self.fail(exc)

    def _outcome(self) -> Outcome:
        """What a ping, an invocation or a v2 infer request makes (a prediction's is made in :meth:`on_complete`,
        first: the most common)."""
        lean = self.conn.lean
        kind, _, _, version = self.route
        if kind == PING:
            return lean.ping()
        model = self.model
        assert model is not None
        limit = lean.gate.max_request_size
        if kind == INVOKE:
            return invocation_call(model, self, limit)
        return (_V2[0] if _V2 else _load_v2())(model, version, self, limit)

    def _prepared(self, task: "asyncio.Future[Any]") -> None:
        if task.cancelled() or self.conn.transport is None:
            return
        try:
            self._dispatch(task.result())
        except Exception as exc:  # noqa: BLE001 - answered as its error body, never a traceback
            self.fail(exc)

    def _dispatch(self, outcome: Any) -> None:
        if isinstance(outcome, Reply):
            self.answer(outcome)
            return
        self.call = outcome
        manager, groups = self.conn.lean.manager, outcome.groups
        if len(groups) == 1:
            self.jobs = jobs = [manager.enqueue(outcome.model, *groups[0])]
        else:
            self.jobs = jobs = manager.enqueue_all(outcome.model, groups)
        for job in jobs:
            job.future.add_done_callback(self._answered)

    def _answered(self, future: "asyncio.Future[ResponseItem]") -> None:
        jobs = self.jobs
        if self.done or future.cancelled() or self.conn.transport is None:  # (cancelled: the client left)
            return
        if len(jobs) > 1 and not all(job.future.done() for job in jobs):
            return
        call = self.call
        assert call is not None
        answers = jobs[0].answers if len(jobs) == 1 else [answer for job in jobs for answer in job.answers]
        self.jobs = []
        self.answer(call.reply(answers))

    # -- answers ---------------------------------------------------------------------------------
    def fail(self, exc: BaseException, *, close: bool = False) -> None:
        """Answer *exc* as its error body (the protocol's on a v2 route or call); *close*: the connection ends."""
        if not isinstance(exc, (ApiException, web.HTTPException)):
            log.exception("unhandled error on %s %s (request %s)", self.method, self.path,
                          self.request_id)
        reply = error_reply(exc, self.conn.lean.gate.max_request_size)
        if self.v2:
            from mmsctl.server.v2.errors import as_v2_error

            reply = as_v2_error(reply)
        reply.close = reply.close or close
        self.answer(reply)

    def answer(self, reply: Reply) -> None:
        """Send *reply* (once), give back what the request held, and let the connection go on."""
        if self.done:
            return
        self.done = True
        if self.ticket is not None:
            self.ticket.release()
        if self.jobs:
            self.release()
        self.conn.answer(self, reply)

    def release(self) -> None:
        """Give back the request's place and body bytes; a request not answered yet leaves its queue, and one
        whose call is still being made stops being made (a decode running on a thread ends first: the bytes it
        reads are given back then, see :func:`~mmsctl.server.http.calls.off_loop`)."""
        preparing = self.preparing
        if preparing is not None and not preparing.done():
            preparing.cancel()
            ticket = self.ticket
            if ticket is not None:
                preparing.add_done_callback(lambda _: ticket.release())
            return
        if self.ticket is not None:
            self.ticket.release()
        if self.jobs and self.call is not None:
            for job in self.jobs:
                self.call.model.withdraw(job)
        self.jobs = []


#: :func:`~mmsctl.server.v2.calls.infer_outcome` once the first v2 request has loaded it (numpy and the v2 codec load
#: with it, not with the server).
_V2: list[Any] = []


def _load_v2() -> Any:
    from mmsctl.server.v2.calls import infer_outcome

    _V2.append(infer_outcome)
    return infer_outcome
