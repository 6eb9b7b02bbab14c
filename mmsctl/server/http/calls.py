"""What one HTTP request asks of a model, and how the answers become its reply: the same on both paths.

A route decides what a request means once (:mod:`~mmsctl.server.http.inference_api`,
:mod:`~mmsctl.server.http.invocations`, :mod:`~mmsctl.server.v2.calls`) and makes a :class:`Call`: the model,
the requests it queues (each group one handler call, answered together) and :meth:`Call.reply`. aiohttp's
path awaits the answers (:meth:`~mmsctl.server.workers.manager.ModelManager.predict_all`); the lean path
queues the groups and is called back (:meth:`~mmsctl.server.workers.manager.ModelManager.enqueue_all`).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Optional, Protocol, Sequence, Union

from mmsctl.engine.protocol import RequestItem, ResponseItem
from mmsctl.error_body import error_body
from mmsctl.http1.responses import BODILESS
from mmsctl.server.errors import ApiException
from mmsctl.server.http.middleware import HEADERS, REQUEST_ID
from mmsctl.server.http.replies import JSON, Reply, error_reply
from mmsctl.server.workers.model import Model

if TYPE_CHECKING:
    from mmsctl.server.workers.manager import ModelManager

__all__ = ["OFF_LOOP_BYTES", "INVALID_ANSWER", "SERVER_HEADERS", "Call", "Outcome", "Prediction", "Whole", "WholeRequest", "answer", "first_header", "off_loop"]


class WholeRequest(Protocol):
    """What a route reads of a request whose body has arrived, whichever path it came by."""

    @property
    def request_id(self) -> str: ...

    @property
    def query(self) -> Iterable[tuple[str, str]]:
        """The query's pairs (none on the lean path)."""

    @property
    def headers(self) -> dict[str, str]:
        """As the admission gate read them: names lower-cased, the last of repeated ones."""

    @property
    def raw_headers(self) -> Sequence[tuple[bytes, bytes]]:
        """As sent (values without trailing blanks)."""

    @property
    def body(self) -> bytes: ...


class Whole:
    """aiohttp's request, with its whole body read, as a :class:`WholeRequest`."""

    __slots__ = ("request_id", "query", "headers", "raw_headers", "body")

    def __init__(self, request: Any, body: bytes) -> None:
        self.request_id = request[REQUEST_ID]
        self.query = request.query.items()
        self.headers = request.get(HEADERS) or {}
        self.raw_headers = request.raw_headers
        self.body = body


def first_header(request: WholeRequest, name: bytes) -> "str | None":
    """The first value of header *name* (lower case), decoded as the gate decodes values."""
    raw = request.raw_headers
    if len(raw) == len(request.headers):  # no name repeats: the gate's mapping has each header's one value
        return request.headers.get(name.decode())
    for key, value in raw:
        if len(key) == len(name) and key.lower() == name:
            return value.decode("utf-8", "surrogateescape")
    return None


class Call:
    """The requests one HTTP request puts in *model*'s queue; *v2*: its errors are the Open Inference
    Protocol's ``{"error": ...}`` whatever the route (SageMaker's ``/invocations`` with a v2 body)."""

    __slots__ = ("model", "groups", "v2")

    def __init__(self, model: Model, groups: list[list[RequestItem]], v2: bool = False) -> None:
        self.model = model
        self.groups = groups
        self.v2 = v2

    def reply(self, answers: list[ResponseItem]) -> Reply:
        """The reply to the workers' *answers* (one per request, in order)."""
        raise NotImplementedError


#: The body of the 500 that answers a handler's answer no HTTP/1.1 answer can carry (a status outside 200-999:
#: a 1xx is not a final answer, a 101 would tell the client the protocol changed).
INVALID_ANSWER = error_body(500, "InternalServerException", "Invalid response from the model.")
#: Headers each path writes itself (framing, the connection's, ``Date``, ``x-request-id``): a handler's are
#: dropped, so that an answer is framed once and by the server, whichever path sends it.
SERVER_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive", "proxy-connection",
                            "upgrade", "trailer", "te", "date", "x-request-id"})


class Prediction(Call):
    """One request; its reply is the handler's answer: status, reason, body (none for a 204 or 304), its headers
    but :data:`SERVER_HEADERS`, and its content type only if it set one; a status outside 200-999 is a 500
    (:data:`INVALID_ANSWER`)."""

    __slots__ = ()

    def __init__(self, model: Model, item: RequestItem) -> None:
        self.model, self.groups, self.v2 = model, [[item]], False

    def reply(self, answers: list[ResponseItem]) -> Reply:
        answer = answers[0]
        content_type, headers = answer.content_type, answer.headers
        if headers:
            headers, content_type = _handler_headers(headers, content_type)
        status = answer.status
        if type(status) is not int or not 200 <= status <= 999:
            return Reply(500, INVALID_ANSWER, JSON)
        return Reply(status, b"" if status in BODILESS else answer.body,
                     content_type.encode() if content_type else None, headers, reason=answer.reason)


def _handler_headers(headers: dict[str, str], content_type: Optional[str]) -> tuple[dict[str, str], Optional[str]]:
    """A handler's *headers* without :data:`SERVER_HEADERS`, and its content type (*content_type*, else one it
    set as a header in any case)."""
    kept = {}
    for key, value in headers.items():
        name = key.lower()
        if name == "content-type":
            content_type = content_type or value
        elif name not in SERVER_HEADERS:
            kept[key] = value
    return kept, content_type


#: What a route makes of a whole request: an answer already, a call, or (a multipart form, whose parser is
#: asynchronous) one to await.
Outcome = Union[Reply, Call, Awaitable[Union[Reply, Call]]]
#: A request with at least this many bytes of JSON is decoded on a thread of the loop's default executor
#: (:func:`off_loop`), not on the event loop: parsing and converting megabytes of JSON holds the thread that
#: runs it, and ``/ping`` must answer meanwhile.
OFF_LOOP_BYTES = 1 << 20


def off_loop(work: Callable[..., Any], *args: Any) -> "asyncio.Task[Any]":
    """*work* (CPU-bound, on what the request already holds) on a thread of the loop's default executor: an
    outcome both paths await (the lean path's :meth:`~mmsctl.server.http.lean.exchange.Exchange.on_complete`,
    aiohttp's :func:`answer`).

    Cancelled (the client left), a job not started never runs, and one running (a thread cannot be stopped) is
    waited for: the task ends when the job does, so whoever releases what the request holds (its body's bytes,
    counted against ``max_buffered_bytes``) once the task is done releases it when nothing uses it any more."""
    return asyncio.ensure_future(_off_loop(work, args))


async def _off_loop(work: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    wanted = True

    def run() -> Any:
        if not wanted:  # cancelled before a thread took it
            return None
        return work(*args)

    job = asyncio.get_running_loop().run_in_executor(None, run)
    try:
        return await asyncio.shield(job)
    except asyncio.CancelledError:
        wanted = False
        await asyncio.wait({job})  # (a second cancel ends this wait; the job still ends on its thread)
        raise


async def answer(manager: "ModelManager", outcome: Outcome, max_request_size: int) -> Reply:
    """aiohttp's path: the reply to what a route made of a request, its call's answers awaited (a v2 call's
    failure to queue is the protocol's error, as its other errors are)."""
    if not isinstance(outcome, (Reply, Call)):
        outcome = await outcome
    if isinstance(outcome, Reply):
        return outcome
    try:
        answers = await manager.predict_all(outcome.model, outcome.groups)
    except ApiException as exc:
        if not outcome.v2:
            raise
        from mmsctl.server.v2.errors import as_v2_error

        return as_v2_error(error_reply(exc, max_request_size))
    return outcome.reply(answers)
