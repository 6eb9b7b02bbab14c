"""Dynamic batching: take up to ``batch_size`` queued requests, waiting at most ``max_batch_delay``.

A job that holds a client's batch (several requests, :attr:`Job.more`) is never split: it joins a batch
it fits in, or starts one of its own, whatever its size.

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
    """One prediction waiting for a worker, or several that must run in one handler call (a client's batch:
    a v2 infer request's images); *future* gets the first one's answer, :attr:`answers` all of them."""

    item: RequestItem
    future: "asyncio.Future[ResponseItem]"
    enqueued: float = 0.0  #: time.perf_counter() when it was queued (the clock its latencies are timed with)
    started: float = field(default=0.0)
    #: The requests after *item* that go to the handler together with it.
    more: tuple[RequestItem, ...] = ()
    #: Every request's answer, in order, set before *future* resolves.
    answers: list[ResponseItem] = field(default_factory=list)

    @property
    def size(self) -> int:
        """How many requests the handler gets for this job."""
        return 1 + len(self.more)

    def items(self) -> list[RequestItem]:
        return [self.item, *self.more]

    def answer(self, response: ResponseItem) -> None:
        """The same answer for each of the job's requests (a failure)."""
        self.answer_each([response] * self.size)

    def answer_each(self, responses: list[ResponseItem]) -> None:
        """One answer per request, in order (*responses*: a list of the job's own)."""
        if not self.future.done():
            self.answers = responses
            self.future.set_result(responses[0])


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


async def until_stopped(awaitable: Awaitable[T], stop: asyncio.Event, *more: asyncio.Event) -> tuple[bool, Any]:
    """Await *awaitable* unless *stop* (or one of *more*) is set first.

    Returns ``(True, result)``, or ``(False, None)`` once a stop is set with the
    awaitable cancelled. A result that arrives while it is being cancelled is still
    returned, so nothing taken (a job, a lock) is ever dropped.
    """
    stops = (stop, *more)
    if any(event.is_set() for event in stops):
        if asyncio.iscoroutine(awaitable):
            awaitable.close()  # never started: no "never awaited" warning
        return False, None
    task = asyncio.ensure_future(awaitable)
    stoppers = [asyncio.ensure_future(event.wait()) for event in stops]
    try:
        await asyncio.wait({task, *stoppers}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for stopper in stoppers:
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
    flush: Optional[asyncio.Event] = None,
) -> Optional[list[Job]]:
    """The next batch, or None if *stop* is set while no job has been taken.

    Once the first job is taken the batch is always returned, so a stop never
    drops a job: it ends the wait for the first one, and the wait for more (the
    batch goes as it is, not ``max_delay`` later, which may be past the drain).
    *flush* set (the model drains: no request is coming that the batch could wait
    for) ends only the wait for more.
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
    stops = (stop,) if flush is None else (stop, flush)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_delay
    taken = first.size
    while taken < batch_size:
        try:
            job = queue.get_nowait()
        except asyncio.QueueEmpty:
            remaining = deadline - loop.time()
            if remaining <= 0 or any(event.is_set() for event in stops):
                break
            try:
                taken_one, job = await until_stopped(asyncio.wait_for(queue.get(), remaining), *stops)
            except asyncio.TimeoutError:
                break
            if not taken_one:  # stopped: the batch goes as it is, its jobs answered
                break
        if taken + job.size > batch_size and isinstance(queue, JobQueue):  # a client's batch that does not fit
            queue.put_back(job)
            break
        jobs.append(job)
        taken += job.size
    return jobs
