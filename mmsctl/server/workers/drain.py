"""A model's last requests: what it holds is answered while a READY worker can (bounded by a timeout), then its
workers stop. Never waits for a worker that cannot serve: one still loading (a handler stuck in ``initialize``)
is killed, and queued jobs no READY worker will take are answered 503."""

from __future__ import annotations

import asyncio
import time

from mmsctl.server.workers.supervision import Supervisor
from mmsctl.server.workers.model import Model, WorkerState

__all__ = ["drain"]


async def drain(supervisor: Supervisor, model: Model, timeout: float) -> None:
    """Answer what the model holds while a READY worker can (bounded by *timeout*), then stop its workers.

    Never waits for a worker that cannot serve: one still loading (a handler stuck in
    ``initialize``) is killed, and queued jobs no READY worker will take are answered 503.
    """
    model.wind_down()
    if timeout > 0:
        deadline = time.monotonic() + timeout
        joined = asyncio.ensure_future(model.queue.join())
        try:
            while not joined.done() and model.ready_workers() and time.monotonic() < deadline:
                await asyncio.wait({joined}, timeout=min(0.1, max(deadline - time.monotonic(), 0.0)))
        finally:
            joined.cancel()
    model.remove()
    supervisor.reject_queued(model, f"Model {model.name} was unregistered")
    workers = list(model.workers)
    for worker in workers:
        worker.stop_event.set()
        if worker.state == WorkerState.STARTING:
            worker.kill()
    tasks = [w.task for w in workers if w.task is not None]
    if tasks:
        done, pending = await asyncio.wait(tasks, timeout=max(timeout, 1.0))
        for w in workers:
            if w.task in pending:
                w.kill()
        if pending:
            await asyncio.wait(pending, timeout=5)
