"""Dynamic batching: take up to ``batch_size`` queued jobs, waiting at most ``max_batch_delay``.

Each worker pulls its own batches from the model's queue (like MMS's
BatchAggregator); a busy worker takes one batch ahead only while no other worker
of its model is idle (see ``Worker._take_ahead``), and gives it back if it dies first.
"""

from __future__ import annotations

import asyncio
import collections
from dataclasses import dataclass, field
from typing import Any, Awaitable, Optional, TypeVar

from mmsctl.engine.protocol import RequestItem, ResponseItem

__all__ = ["Job", "JobQueue", "next_batch", "until_stopped"]

T = TypeVar("T")


@dataclass
class Job:
    """One prediction waiting for a worker."""

    item: RequestItem
    future: "asyncio.Future[ResponseItem]"
    enqueued: float = 0.0
    started: float = field(default=0.0)

    def answer(self, response: ResponseItem) -> None:
        if not self.future.done():
            self.future.set_result(response)


class JobQueue(asyncio.Queue[Job]):
    """A model's bounded queue of jobs, from which a job whose client left can be taken back.

    It makes the deque that holds its jobs itself (``_init``/``_put``/``_get`` are asyncio.Queue's
    hooks for subclasses, as ``PriorityQueue`` uses them), so :meth:`discard` can remove one.
    """

    def _init(self, maxsize: int) -> None:
        self._queue: collections.deque[Job] = collections.deque()

    def _put(self, item: Job) -> None:
        self._queue.append(item)

    def _get(self) -> Job:
        return self._queue.popleft()

    def discard(self, job: Job) -> bool:
        """Take *job* out if it still waits (its client left); True if it was there."""
        try:
            self._queue.remove(job)
        except ValueError:
            return False
        self.task_done()
        return True

    def put_back(self, job: Job) -> None:
        """Return a job taken but never started (its worker died first) to the front of the queue.

        It still counts as unfinished (``task_done`` was not called for it) and may pass ``maxsize``
        by the few jobs a worker holds ahead."""
        if job.future.done():  # its client left meanwhile
            self.task_done()
            return
        self._queue.appendleft(job)
        self._wakeup_next(self._getters)  # type: ignore[attr-defined]  # asyncio.Queue's own hook


async def until_stopped(awaitable: Awaitable[T], stop: asyncio.Event) -> tuple[bool, Any]:
    """Await *awaitable* unless *stop* is set first.

    Returns ``(True, result)``, or ``(False, None)`` once *stop* is set with the
    awaitable cancelled. A result that arrives while it is being cancelled is still
    returned, so nothing taken (a job, a lock) is ever dropped.
    """
    if stop.is_set():
        if asyncio.iscoroutine(awaitable):
            awaitable.close()  # never started: no "never awaited" warning
        return False, None
    task = asyncio.ensure_future(awaitable)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
    if not task.done():
        task.cancel()
        try:
            return True, await task  # raced: it completed as we cancelled
        except asyncio.CancelledError:
            return False, None
    return True, task.result()


async def next_batch(
    queue: "asyncio.Queue[Job]",
    batch_size: int,
    max_delay: float,
    stop: asyncio.Event,
) -> Optional[list[Job]]:
    """The next batch, or None if *stop* is set while no job has been taken.

    Once the first job is taken the batch is always returned, so a stop never
    drops a job: it only ends the wait for the first one.
    """
    try:
        first = queue.get_nowait()
    except asyncio.QueueEmpty:
        done, first = await until_stopped(queue.get(), stop)
        if not done:
            return None
    jobs = [first]
    if batch_size <= 1:
        return jobs
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_delay
    while len(jobs) < batch_size:
        try:
            jobs.append(queue.get_nowait())
            continue
        except asyncio.QueueEmpty:
            pass
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        try:
            jobs.append(await asyncio.wait_for(queue.get(), remaining))
        except asyncio.TimeoutError:
            break
    return jobs
