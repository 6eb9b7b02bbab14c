"""What every lean connection of one inference API shares: the models, the gate, the metrics, the timeouts,
aiohttp's protocol for the connections handed over, and one timer that sweeps every connection's deadlines."""

from __future__ import annotations

import asyncio
import time
from typing import Callable, Optional

from mmsctl.server.http.admission import Gate
from mmsctl.server.http.lean.connection import LeanConnection
from mmsctl.server.http.replies import Reply
from mmsctl.server.metrics import ServerMetrics
from mmsctl.server.workers.manager import ModelManager

__all__ = ["LeanServer"]


class LeanServer:
    """The inference API's connections (a protocol factory for ``loop.create_server``)."""

    def __init__(self, manager: ModelManager, gate: Gate, metrics: ServerMetrics, *, header_timeout: float,
                 body_timeout: float, ping: Callable[[], Reply], fallback: Callable[[], asyncio.Protocol]) -> None:
        self.manager = manager
        #: The inference API's admission rules, which aiohttp's path applies too.
        self.gate = gate
        self.metrics = metrics
        #: ``request_header_timeout`` and ``request_body_timeout``, in seconds.
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        #: ``GET /ping``'s answer, the inference API's own.
        self.ping = ping
        #: Makes aiohttp's protocol for a connection that is handed over.
        self.fallback = fallback
        self.connections: set[LeanConnection] = set()
        self._sweeper: Optional[asyncio.TimerHandle] = None

    def __call__(self) -> LeanConnection:
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
        """Close the connections still on the lean path (the server stops)."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for connection in list(self.connections):
            connection.close()
