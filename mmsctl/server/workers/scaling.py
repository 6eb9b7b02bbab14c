"""How many workers each model runs: the range a register or scale sets, within ``worker_limit``, and
autoscaling between ``minWorkers`` and ``maxWorkers`` by the queue. Scaling never drops a queued request: a
stopping worker finishes its batch, and queued jobs stay for the others."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Optional

from mmsctl.server.errors import BadRequest
from mmsctl.server.workers.registry import Registry
from mmsctl.server.workers.supervision import Supervisor
from mmsctl.server.workers.model import Model, WorkerState

__all__ = ["Scaling"]

log = logging.getLogger("mmsctl.server")


class Scaling:
    """The worker ranges of every model, within the server's ``worker_limit``."""

    def __init__(self, registry: Registry, supervisor: Supervisor, worker_limit: int) -> None:
        self.registry = registry
        self.supervisor = supervisor
        #: The most workers of all models together (``worker_limit``), fixed at start.
        self.worker_limit = worker_limit

    def check_limit(self, model: Model, wanted: int) -> None:
        """Refuse (400) a worker range that would take the server over ``worker_limit``.

        Every model holds its ``maxWorkers`` (autoscaling may start that many), so the sum over
        all models never passes the limit, however the requests come.
        """
        others = sum(max(m.min_workers, m.max_workers) for m in self.registry.models.values() if m is not model)
        if others + wanted > self.worker_limit:
            raise BadRequest(
                f"Cannot run {wanted} workers for model {model.name}: the server runs at most "
                f"{self.worker_limit} workers in all (worker_limit) and other models hold {others}.")

    async def scale(self, model: Model, min_workers: int, max_workers: int) -> None:
        """Set the worker range and start or stop workers to reach ``min_workers``.

        Raises:
            BadRequest: the range would take the server over its worker limit.
        """
        self.check_limit(model, max(min_workers, max_workers))
        model.set_range(min_workers, max_workers)
        live = model.live_workers()
        if len(live) < min_workers:
            for _ in range(min_workers - len(live)):
                self.supervisor.start_worker(model)
        elif len(live) > model.max_workers:
            self.supervisor.stop_workers(model, len(live) - model.max_workers)
        model.notify()

    async def wait_for_workers(self, model: Model, count: int, timeout: float) -> Optional[str]:
        """Wait until *count* workers are READY; return an error text if they cannot be."""
        deadline = time.monotonic() + timeout
        while True:
            ready = len(model.ready_workers())
            if ready >= count:
                return None
            if model.removed:
                return "model was unregistered"
            if model.start_failed:
                loading = [w for w in model.live_workers() if w.state == WorkerState.STARTING and w.process is not None]
                if not loading:  # the last start failed and the retries wait out their back-off
                    return model.last_error
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return f"only {ready} of {count} workers are ready after {timeout:g} s"
            try:
                await asyncio.wait_for(model.changed.wait(), min(remaining, 1.0))
            except asyncio.TimeoutError:
                pass

    def autoscale(self) -> None:
        """Between min and max workers, follow the queue: grow when it backs up, shrink when idle."""
        now = time.monotonic()
        for model in self.registry.models.values():
            if model.max_workers <= model.min_workers:
                continue
            live = len(model.live_workers())
            pending = model.pending()
            if pending > 0:
                model.busy(now)
            if pending > 2 * max(live, 1) * model.batch_size and live < model.max_workers:
                log.info("autoscale %s: %d queued, %d workers -> +1", model.name, pending, live)
                self.supervisor.start_worker(model)
            elif pending == 0 and live > model.min_workers and now - model.idle_since > 30:
                log.info("autoscale %s: idle, %d workers -> -1", model.name, live)
                self.supervisor.stop_workers(model, 1)
                model.busy(now)
