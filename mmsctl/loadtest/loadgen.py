"""The load generator: HTTP/1.1 keep-alive connections driven by callbacks on one event loop.

Why not httpx or aiohttp's client: a coroutine, a future and a response object per request
cost more than the request costs the server, and the tool must not be the bottleneck it
measures (bench/loadgen_vs_hey.py holds it to at least 0.8x of ``hey`` against the same no-op
server). Here each connection is an :class:`asyncio.Protocol` that writes a pre-built request,
reads the answer with the HTTP/1.1 codec (:class:`~mmsctl.http1.answers.AnswerReader`: the status
and the end of the answer, nothing per header) and, once the answer is complete, records it and
writes the next request from the same callback. Coroutines only open connections.

Two ways to load a server:

* **closed loop** (``concurrency``): N clients, each with one request in flight;
  latency runs from the moment a request was sent (or its connection opened);
* **open loop** (``rate``): requests are *scheduled* at a constant rate whatever the
  server does, and latency runs from the scheduled time, so a stalled server shows
  its queueing instead of hiding it (coordinated omission). A request waits in a
  backlog when every connection is busy and ``max_connections`` are open.

Every request has a deadline (``timeout_s``) for its whole answer, and an answer may be at
most ``max_response_bytes`` long: a longer one is a ``too-large`` error, its connection
dropped at the limit rather than read to the end. A level stops on its own clock, after
its request count, or when *stop* is set (Ctrl-C), keeping what it measured.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Coroutine, Optional, Protocol, Sequence, TypeVar
from urllib.parse import quote, urlsplit

from mmsctl.config import DEFAULT_MAX_RESPONSE_BYTES
from mmsctl.http1.answers import AnswerReader
from mmsctl.http1.errors import AnswerTooLarge, ParseError
from mmsctl.loadtest.histogram import LatencyHistogram
from mmsctl.errors import UsageError

__all__ = ["Endpoint", "LevelResult", "LoadSpec", "StopFlag", "build_posts", "build_requests", "event_loop_name", "run_in_loop", "run_load"]

_TICK_S = 0.05  # how often deadlines, the stop flag and progress are checked
_RETRY_PAUSE_S = 0.01  # after a refused or failed connection, so a dead server is not a busy loop
MAX_CONNECTIONS = 10_000
#: Ceilings on what a user can ask of one level (every loop is bounded).
MAX_CONCURRENCY = 10_000
MAX_RATE = 100_000.0


class StopFlag(Protocol):
    """A threading.Event or a multiprocessing one: read once per tick, never per request."""

    def is_set(self) -> bool: ...


@dataclass(frozen=True)
class Endpoint:
    """Where the load goes: one server address and the pre-built requests to cycle through."""

    host: str
    port: int
    tls: bool
    requests: tuple[bytes, ...]


def build_requests(
    inference_url: str,
    model: str,
    bodies: Sequence[tuple[bytes, Optional[str]]],
    *,
    token: Optional[str] = None,
    version: Optional[str] = None,
) -> Endpoint:
    """``POST /predictions/MODEL[/VERSION]`` requests, one per ``(body, content type)``, ready to write.

    Raises:
        UsageError: the URL is not http(s)://HOST[:PORT], or there is no body at all.
    """
    path = "/predictions/" + quote(model, safe="") + ("/" + quote(version, safe="") if version else "")
    return build_posts(inference_url, path, [(body, {"Content-Type": content_type} if content_type else {})
                                             for body, content_type in bodies], token=token)


def build_posts(
    inference_url: str,
    path: str,
    bodies: Sequence[tuple[bytes, dict[str, str]]],
    *,
    token: Optional[str] = None,
) -> Endpoint:
    """``POST PATH`` requests (under the URL's own path), one per ``(body, headers)``, ready to write:
    the MMS API's predictions or a v2 ``…/infer`` (its binary tensor body and header length).

    Raises:
        UsageError: the URL is not http(s)://HOST[:PORT], or there is no body at all.
    """
    parts = urlsplit(inference_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"bad inference URL {inference_url!r}: expected http(s)://HOST:PORT")
    if not bodies:
        raise UsageError("no request body to send")
    tls = parts.scheme == "https"
    port = parts.port or (443 if tls else 80)
    host = parts.netloc.rsplit("@", 1)[-1]
    head = (f"POST {parts.path.rstrip('/') + path} HTTP/1.1\r\nHost: {host}\r\nAccept: */*\r\n"
            "User-Agent: mmsctl-bench\r\n")
    if token:
        head += f"Authorization: Bearer {token}\r\n"
    requests = []
    for body, headers in bodies:
        extra = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        requests.append((head + extra + f"Content-Length: {len(body)}\r\n\r\n").encode("latin-1") + body)
    return Endpoint(parts.hostname, port, tls, tuple(requests))


@dataclass(frozen=True)
class LoadSpec:
    """One level: closed loop (*concurrency*) or open loop (*rate*), for a time or a request count."""

    concurrency: Optional[int] = None
    rate: Optional[float] = None
    duration_s: Optional[float] = None
    requests: Optional[int] = None
    warmup_s: float = 0.0
    timeout_s: float = 30.0
    max_connections: int = 1000  # open loop only
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES  # an answer (head and body) longer is an error

    def __post_init__(self) -> None:
        if (self.concurrency is None) == (self.rate is None):
            raise UsageError("a level has either a concurrency or a rate")
        if self.concurrency is not None and not 1 <= self.concurrency <= MAX_CONCURRENCY:
            raise UsageError(f"concurrency must be 1 to {MAX_CONCURRENCY}, not {self.concurrency}")
        if self.rate is not None and not 0 < self.rate <= MAX_RATE:
            raise UsageError(f"rate must be above 0 and at most {MAX_RATE:g} requests/s, not {self.rate:g}")
        if (self.duration_s is None) == (self.requests is None):
            raise UsageError("a level runs for a duration or a request count")
        if self.duration_s is not None and self.duration_s <= 0:
            raise UsageError("the duration must be more than 0")
        if self.requests is not None and self.requests < 1:
            raise UsageError("the request count must be at least 1")
        if self.timeout_s <= 0 or self.warmup_s < 0:
            raise UsageError("the timeout must be more than 0 and the warm-up 0 or more")
        if not 1 <= self.max_connections <= MAX_CONNECTIONS:
            raise UsageError(f"max connections must be 1 to {MAX_CONNECTIONS}")
        if self.max_response_bytes < 1:
            raise UsageError("the answer size limit must be at least 1 byte")


@dataclass
class LevelResult:
    """What one level measured (warm-up excluded)."""

    sent: int = 0
    ok: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)
    duration_s: float = 0.0
    interrupted: bool = False

    def fail(self, cause: str) -> None:
        self.errors[cause] = self.errors.get(cause, 0) + 1


def _cause(exc: BaseException) -> str:
    """timeout / reset / refused / other, for an exception that cost us a request."""
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "timeout"
    if isinstance(exc, ConnectionRefusedError):
        return "refused"
    if isinstance(exc, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)):
        return "reset"
    return "other"


class _Connection(asyncio.Protocol):
    """One keep-alive connection; the hot path of the whole tool lives in its callbacks."""

    __slots__ = ("driver", "transport", "answer", "t0", "sent_at", "measured", "busy", "closed", "_fresh")

    def __init__(self, driver: "_Driver", closed: "asyncio.Future[None]", t_open: float) -> None:
        self.driver = driver
        #: The answer in flight (at most ``max_response_bytes``, head and body).
        self.answer = AnswerReader(driver.spec.max_response_bytes)
        self.transport: Any = None
        self.t0 = 0.0  # latency origin: send, connect or scheduled time
        self.sent_at = 0.0  # for the deadline
        self.measured = False
        self.busy = False
        self.closed = closed
        self._fresh = t_open

    # asyncio callbacks
    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.driver.ready(self)

    def data_received(self, data: bytes) -> None:
        answer = self.answer
        try:
            complete = answer.feed(data)
        except (AnswerTooLarge, ParseError) as exc:  # read no further: the request failed, the connection goes
            if self.busy:
                self.busy = False
                self.driver.failed(self, "too-large" if isinstance(exc, AnswerTooLarge) else "other")
            self.transport.abort()
            return
        if not complete:
            return
        if not self.busy:  # an answer nobody asked for (or after a timeout): drop the connection
            self.transport.abort()
            return
        self.busy = False
        answer.next()
        self.driver.answered(self, answer.status, answer.keep_alive)

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        if self.busy:
            self.busy = False
            self.driver.failed(self, "reset" if exc is None else _cause(exc))
        if not self.closed.done():
            self.closed.set_result(None)

    def send(self, request: bytes, t0: float, measured: bool) -> None:
        self.busy = True
        self.t0 = t0
        self.sent_at = time.perf_counter()
        self.measured = measured
        self.transport.write(request)


class _Driver:
    """Decides what each free connection does next, and keeps the counts."""

    def __init__(self, endpoint: Endpoint, spec: LoadSpec) -> None:
        self.endpoint = endpoint
        self.spec = spec
        self.stopping = False  # the stop flag as of the last tick (a process-shared flag costs a lock to read)
        self.result = LevelResult()
        self.requests = endpoint.requests
        self.next_body = 0
        self.loop = asyncio.get_running_loop()
        self.ssl = ssl.create_default_context() if endpoint.tls else None
        self.conns: set[_Connection] = set()
        now = time.perf_counter()
        self.start = now
        self.warm_end = now + spec.warmup_s
        self.stop_at = self.warm_end + spec.duration_s if spec.duration_s is not None else float("inf")
        self.measured_issued = 0  # requests mode: how many measured requests were sent
        self.last_done = self.warm_end
        self.warm_sent = 0
        self.finished = self.loop.create_future()
        # open loop
        self.idle: list[_Connection] = []
        self.backlog: collections.deque[tuple[float, bool]] = collections.deque()
        self.scheduled = 0
        self.opening = 0

    # --- what to send -------------------------------------------------------------------------------

    def _request(self) -> bytes:
        requests = self.requests
        if len(requests) == 1:
            return requests[0]
        i = self.next_body
        self.next_body = (i + 1) % len(requests)
        return requests[i]

    def issuing(self) -> bool:
        """Closed loop: may another request start now?"""
        if self.stopping:
            return False
        if self.spec.requests is not None:
            return self.measured_issued < self.spec.requests
        return time.perf_counter() < self.stop_at

    def _start_closed(self, conn: _Connection, t0: float) -> bool:
        if not self.issuing():
            return False
        measured = t0 >= self.warm_end
        if measured:
            self.measured_issued += 1
        conn.send(self._request(), t0, measured)
        return True

    # --- events from connections --------------------------------------------------------------------

    def ready(self, conn: _Connection) -> None:
        self.conns.add(conn)
        if self.spec.rate is None:
            if not self._start_closed(conn, conn._fresh):
                conn.transport.close()
        else:
            self._free_open(conn)

    def answered(self, conn: _Connection, status: int, keep_alive: bool) -> None:
        now = time.perf_counter()
        if conn.measured:
            result = self.result
            result.sent += 1
            if 200 <= status < 300:
                result.ok += 1
                result.latency.record(now - conn.t0)
            else:
                result.fail(str(status))
            self.last_done = now
        else:
            self.warm_sent += 1
        if not keep_alive:
            conn.transport.close()
            return
        if self.spec.rate is None:
            if not self._start_closed(conn, now):
                conn.transport.close()
        else:
            self._free_open(conn)

    def failed(self, conn: _Connection, cause: str) -> None:
        """A request on *conn* got no answer (the connection is going away)."""
        if conn.measured:
            self.result.sent += 1
            self.result.fail(cause)
            self.last_done = time.perf_counter()

    def connect_failed(self, cause: str, t0: float, measured: bool) -> None:
        if measured:
            self.result.sent += 1
            self.result.fail(cause)
            self.last_done = time.perf_counter()

    # --- closed loop --------------------------------------------------------------------------------

    async def client(self) -> None:
        """One closed-loop client: (re)connect while there is work; the connection does the rest."""
        loop = self.loop
        while self.issuing():
            t_open = time.perf_counter()
            closed: asyncio.Future[None] = loop.create_future()
            try:
                await asyncio.wait_for(
                    loop.create_connection(lambda: _Connection(self, closed, t_open), self.endpoint.host,
                                           self.endpoint.port, ssl=self.ssl),
                    self.spec.timeout_s)
            except (OSError, asyncio.TimeoutError, ssl.SSLError) as exc:
                measured = t_open >= self.warm_end
                if measured:
                    self.measured_issued += 1
                self.connect_failed(_cause(exc), t_open, measured)
                await asyncio.sleep(_RETRY_PAUSE_S)
                continue
            await closed
            if self.issuing():
                await asyncio.sleep(0)  # let the loop breathe when a server closes every connection

    # --- open loop ----------------------------------------------------------------------------------

    def _due(self, k: int) -> float:
        assert self.spec.rate is not None
        return self.start + k / self.spec.rate

    def _schedule_more(self, now: float) -> bool:
        """Queue every request due by *now*; False once the schedule is over."""
        spec = self.spec
        while True:
            if self.stopping:
                return False
            t = self._due(self.scheduled)
            if spec.requests is not None and t >= self.warm_end and self.measured_issued >= spec.requests:
                return False
            if t >= self.stop_at:
                return False
            if t > now:
                return True
            self.scheduled += 1
            measured = t >= self.warm_end
            if measured:
                self.measured_issued += 1
            self.backlog.append((t, measured))

    def _dispatch(self) -> None:
        while self.backlog and self.idle:
            conn = self.idle.pop()
            t, measured = self.backlog.popleft()
            conn.send(self._request(), t, measured)
        want = min(len(self.backlog), self.spec.max_connections - len(self.conns) - self.opening)
        for _ in range(max(0, want)):
            self.opening += 1
            self.loop.create_task(self._open())

    def _free_open(self, conn: _Connection) -> None:
        if self.backlog:
            t, measured = self.backlog.popleft()
            conn.send(self._request(), t, measured)
        else:
            self.idle.append(conn)

    async def _open(self) -> None:
        closed: asyncio.Future[None] = self.loop.create_future()
        t_open = time.perf_counter()
        try:
            await asyncio.wait_for(
                self.loop.create_connection(lambda: _Connection(self, closed, t_open), self.endpoint.host,
                                            self.endpoint.port, ssl=self.ssl),
                self.spec.timeout_s)
        except (OSError, asyncio.TimeoutError, ssl.SSLError) as exc:
            if self.backlog:  # the request this connection was opened for fails
                _t, measured = self.backlog.popleft()
                self.connect_failed(_cause(exc), _t, measured)
            await asyncio.sleep(_RETRY_PAUSE_S)
            return
        finally:
            self.opening -= 1
        await closed
        self._dispatch()
        conn_list = self.idle
        for i, c in enumerate(conn_list):  # a closed connection is never handed work again
            if c.closed is closed:
                del conn_list[i]
                break

    async def scheduler(self) -> None:
        """Open loop: release requests at their scheduled times until the schedule ends."""
        while self._schedule_more(time.perf_counter()):
            self._dispatch()
            delay = self._due(self.scheduled) - time.perf_counter()
            await asyncio.sleep(max(0.0, min(delay, _TICK_S)))
        self._dispatch()

    # --- deadlines, stop flag, progress -------------------------------------------------------------

    def expire(self, now: float) -> None:
        deadline = self.spec.timeout_s
        for conn in list(self.conns):
            if conn.busy and now - conn.sent_at > deadline:
                conn.busy = False
                self.failed(conn, "timeout")
                conn.transport.abort()
        while self.backlog and now - self.backlog[0][0] > deadline:
            _t, measured = self.backlog.popleft()
            self.connect_failed("timeout", _t, measured)

    def in_flight(self) -> int:
        return sum(1 for c in self.conns if c.busy) + len(self.backlog)

    def forget(self, conn: _Connection) -> None:
        self.conns.discard(conn)


async def run_load(
    endpoint: Endpoint,
    spec: LoadSpec,
    *,
    stop: Optional[StopFlag] = None,
    on_progress: Optional[Callable[[LevelResult, float], None]] = None,
) -> LevelResult:
    """Run one level and return what it measured.

    Args:
        endpoint: where to send, and the requests to cycle through.
        spec: the level.
        stop: set it (from a signal handler or another thread) to end the level early; the
            result then has ``interrupted=True`` and the figures of the time it ran.
        on_progress: called every 50 ms with the counts so far and the seconds elapsed.
    """
    stop = stop or threading.Event()
    driver = _Driver(endpoint, spec)
    loop = asyncio.get_running_loop()
    if spec.concurrency is not None:
        workers = [loop.create_task(driver.client()) for _ in range(spec.concurrency)]
    else:
        workers = [loop.create_task(driver.scheduler())]
    drain_deadline: Optional[float] = None
    try:
        while True:
            await asyncio.sleep(_TICK_S)
            now = time.perf_counter()
            driver.stopping = driver.stopping or stop.is_set()
            driver.expire(now)
            for conn in [c for c in driver.conns if c.closed.done()]:
                driver.forget(conn)
            if on_progress is not None:
                on_progress(driver.result, now - driver.start)
            if spec.rate is None:
                issuing = driver.issuing()
            else:
                driver._dispatch()
                issuing = not workers[0].done()
            if issuing:
                continue
            if drain_deadline is None:  # sending is over: wait for the answers still due
                drain_deadline = now + (0.5 if driver.stopping else spec.timeout_s + 1.0)
            if driver.in_flight() == 0 or now > drain_deadline:
                break
    finally:
        for conn in list(driver.conns):
            if conn.transport is not None:
                conn.busy = False
                conn.transport.abort()
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    result = driver.result
    result.interrupted = driver.stopping
    if spec.duration_s is not None and not result.interrupted:
        # closed loop: as many requests are in flight at the window's end as at its start, so the
        # window is the fair divisor; open loop: answers drain after the schedule ends, and an
        # overloaded server must not look as fast as the rate it was offered
        result.duration_s = spec.duration_s if spec.rate is None else \
            max(spec.duration_s, driver.last_done - driver.warm_end)
    else:
        result.duration_s = max(0.0, min(driver.last_done, driver.stop_at) - driver.warm_end) \
            if spec.duration_s is not None else max(0.0, driver.last_done - driver.warm_end)
    return result


T = TypeVar("T")


def event_loop_name() -> str:
    """``uvloop`` where it is installed (a cheaper loop: docs/bench.md), else ``asyncio``."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


def run_in_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run *coro* in a fresh event loop: uvloop's where it is installed."""
    if event_loop_name() == "uvloop":
        import uvloop

        return uvloop.run(coro)
    return asyncio.run(coro)
