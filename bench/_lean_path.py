"""The inference front end's own cost per request on the lean path, in this process: no sockets, no workers.

A :class:`~mmsctl.server.http.lean.connection.LeanConnection` is fed whole requests over and over; its manager answers each
at once (a no-op model's answer) and its transport swallows the answer, so what is timed is what the front end
does for one request: parse it, admit it, pick the model, queue it, write the answer, count it. Used by
bench/serve.py ``--invocations-only`` beside its end-to-end runs, whose figures swing with the machine's load
far more than the few tenths of a microsecond the routes differ by.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any, Callable

__all__ = ["lean_path_us"]

_HEAD = b"Host: 127.0.0.1:8080\r\nContent-Type: application/octet-stream\r\n"
#: (what is sent, the request): the model in the URL, SageMaker's one-model form, and both naming it by header.
CASES = (
    ("/predictions/noop", b"POST /predictions/noop HTTP/1.1\r\n" + _HEAD),
    ("/invocations", b"POST /invocations HTTP/1.1\r\n" + _HEAD),
    ("/predictions/noop + X-Model-Name", b"POST /predictions/noop HTTP/1.1\r\n" + _HEAD + b"X-Model-Name: noop\r\n"),
    ("/invocations + X-Model-Name", b"POST /invocations HTTP/1.1\r\n" + _HEAD + b"X-Model-Name: noop\r\n"),
)


class _Answered:
    """A job's future that is done already: the protocol's callback runs at once."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def cancelled(self) -> bool:
        return False

    def done(self) -> bool:
        return True

    def result(self) -> Any:
        return self.answer

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        callback(self)


def _lean() -> Any:
    from mmsctl.engine.protocol import ResponseItem
    from mmsctl.server.http.admission import Gate, Traffic
    from mmsctl.server.http.lean.connection import LeanServer
    from mmsctl.server.metrics import ServerMetrics

    answer = ResponseItem(200, b"hello", "application/octet-stream")
    model = SimpleNamespace(name="noop", withdraw=lambda job: None)

    def enqueue(m: Any, *items: Any) -> Any:
        return SimpleNamespace(future=_Answered(answer), answers=[answer])

    manager = SimpleNamespace(startup_models={"noop": 1}, get=lambda name, version: model, enqueue=enqueue,
                              enqueue_all=lambda m, groups: [enqueue(m, *group) for group in groups])
    lean = LeanServer(manager, Gate("inference", None, 6 << 20, Traffic()),  # type: ignore[arg-type]
                      ServerMetrics(lambda: {}), header_timeout=60.0, body_timeout=60.0, ping=lambda: None,  # type: ignore[arg-type]
                      fallback=lambda: None)  # type: ignore[arg-type,return-value]
    lean.watch = lambda: None  # type: ignore[method-assign] - no event loop here: nothing to sweep
    return lean


def lean_path_us(requests: int = 50_000, repeats: int = 7) -> dict[str, float]:
    """Microseconds per request of each of :data:`CASES` (5-byte bodies), the best of *repeats* runs."""
    from mmsctl.server.http.lean.connection import LeanConnection

    transport = SimpleNamespace(write=lambda data: None, pause_reading=lambda: None, resume_reading=lambda: None,
                                get_extra_info=lambda key: None, close=lambda: None, is_closing=lambda: False)
    lean, best = _lean(), {}
    for _ in range(repeats):
        for name, head in CASES:
            data = head + b"Content-Length: 5\r\n\r\nhello"
            protocol = LeanConnection(lean)
            protocol.connection_made(transport)  # type: ignore[arg-type]
            started = time.perf_counter()
            for _ in range(requests):
                protocol.data_received(data)
            took = (time.perf_counter() - started) / requests * 1e6
            best[name] = min(best.get(name, took), took)
    return best
