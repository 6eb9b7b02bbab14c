"""A model's last requests, all by one deadline: what it holds is answered while a READY worker can, then its
workers stop; a worker still busy at the deadline (after a short floor) is killed and its requests are answered
503. Never waits for a worker that cannot serve: one still loading (a handler stuck in ``initialize``) is killed,
and queued jobs no READY worker will take are answered 503."""

from __future__ import annotations

import asyncio
import time
from typing import Optional

from mmsctl.server.workers.supervision import Supervisor
from mmsctl.server.workers.model import Model, WorkerState

__all__ = ["BUSY_FLOOR_S", "KILL_GRACE_S", "drain"]

#: Seconds a busy worker is given to finish its batch even when the deadline has passed (it may be answering).
BUSY_FLOOR_S = 0.25
#: Seconds waited for killed workers' tasks to answer their jobs and end.
KILL_GRACE_S = 1.0


async def drain(supervisor: Supervisor, model: Model, deadline: float, message: Optional[str] = None) -> None:
    """Answer what the model holds while a READY worker can, until *deadline* (``time.monotonic()``), then stop
    its workers; one still busy then is killed, its requests answered 503 (the MMS error body).

    Ends by ``max(deadline, now) + BUSY_FLOOR_S + KILL_GRACE_S``. Never waits for a worker that cannot serve: one
    still loading (a handler stuck in ``initialize``) is killed, and queued jobs no READY worker will take are
    answered 503, with *message* (default: the model was unregistered).
    """
    model.wind_down()
    joined = asyncio.ensure_future(model.queue.join())
    try:
        while not joined.done() and model.ready_workers() and time.monotonic() < deadline:
            await asyncio.wait({joined}, timeout=min(0.1, max(deadline - time.monotonic(), 0.0)))
    finally:
        joined.cancel()
    message = message or f"Model {model.name} was unregistered"
    model.remove(message)
    supervisor.reject_queued(model, message)
    workers = list(model.workers)
    for worker in workers:
        worker.stop_event.set()
        if worker.state == WorkerState.STARTING:
            worker.kill()
    tasks = [w.task for w in workers if w.task is not None]
    if not tasks:
        return
    _, pending = await asyncio.wait(tasks, timeout=max(deadline - time.monotonic(), BUSY_FLOOR_S))
    for w in workers:
        if w.task in pending:
            w.stop_reason = message
            w.kill()
    if pending:
        await asyncio.wait(pending, timeout=KILL_GRACE_S)
