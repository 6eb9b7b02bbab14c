"""Dynamic batching on a real asyncio queue: size, delay, and stops that never drop a job."""

from __future__ import annotations

import asyncio

from mmsctl.engine.protocol import RequestItem
from mmsctl.server.workers.batching import Job, next_batch, until_stopped


def _job(loop: asyncio.AbstractEventLoop, i: int) -> Job:
    return Job(RequestItem.from_body(str(i), b"x"), loop.create_future())


def test_a_batch_takes_what_arrives_within_the_delay() -> None:
    async def scenario() -> list[str]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Job] = asyncio.Queue()
        queue.put_nowait(_job(loop, 0))
        loop.call_later(0.02, queue.put_nowait, _job(loop, 1))
        loop.call_later(0.5, queue.put_nowait, _job(loop, 2))  # too late for this batch
        batch = await next_batch(queue, 8, 0.1, asyncio.Event())
        assert batch is not None
        return [j.item.request_id for j in batch]

    assert asyncio.run(scenario()) == ["0", "1"]


def test_a_full_batch_does_not_wait_for_the_delay() -> None:
    async def scenario() -> tuple[int, float]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Job] = asyncio.Queue()
        for i in range(5):
            queue.put_nowait(_job(loop, i))
        t0 = loop.time()
        batch = await next_batch(queue, 3, 10.0, asyncio.Event())
        assert batch is not None
        return len(batch), loop.time() - t0

    size, waited = asyncio.run(scenario())
    assert size == 3 and waited < 5.0


def test_stop_ends_the_wait_for_a_first_job_and_loses_nothing() -> None:
    async def scenario() -> tuple[object, int]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Job] = asyncio.Queue()
        stop = asyncio.Event()
        loop.call_later(0.02, stop.set)
        result = await next_batch(queue, 4, 0.1, stop)
        queue.put_nowait(_job(loop, 7))  # arrives after the stop: still in the queue for others
        return result, queue.qsize()

    result, left = asyncio.run(scenario())
    assert result is None and left == 1


def test_until_stopped_returns_the_result_or_gives_up() -> None:
    async def scenario() -> tuple[tuple[bool, object], tuple[bool, object], bool]:
        stop = asyncio.Event()
        got = await until_stopped(asyncio.sleep(0, result="done"), stop)
        lock = asyncio.Lock()
        await lock.acquire()
        asyncio.get_running_loop().call_later(0.02, stop.set)
        gave_up = await until_stopped(lock.acquire(), stop)
        lock.release()
        return got, gave_up, lock.locked()

    got, gave_up, still_locked = asyncio.run(scenario())
    assert got == (True, "done")
    assert gave_up == (False, None)
    assert not still_locked  # the abandoned acquire did not take the lock behind our back


def _group(loop: asyncio.AbstractEventLoop, first: int, size: int) -> Job:
    """A client's batch: *size* requests that must reach the handler in one call."""
    items = [RequestItem.from_body(str(first + i), b"x") for i in range(size)]
    return Job(items[0], loop.create_future(), more=tuple(items[1:]))


def test_a_clients_batch_is_never_split_and_joins_only_a_batch_it_fits() -> None:
    from mmsctl.server.workers.batching import JobQueue

    async def scenario() -> list[list[list[str]]]:
        loop = asyncio.get_running_loop()
        queue: JobQueue = JobQueue()
        for job in (_job(loop, 0), _group(loop, 10, 3), _job(loop, 1), _group(loop, 20, 6), _job(loop, 2)):
            queue.put_nowait(job)
        batches = []
        while not queue.empty():
            batch = await next_batch(queue, 4, 0.0, asyncio.Event())
            assert batch is not None
            batches.append([[item.request_id for item in job.items()] for job in batch])
        return batches

    assert asyncio.run(scenario()) == [
        [["0"], ["10", "11", "12"]],            # 1 + 3 = the batch size
        [["1"]],                                 # the 6 do not fit beside it: back to the front of the queue
        [["20", "21", "22", "23", "24", "25"]],  # more than the batch size, whole, on its own
        [["2"]],
    ]


def test_a_clients_batch_is_answered_each_in_order_and_a_failure_answers_them_all() -> None:
    from mmsctl.engine.protocol import ResponseItem

    async def scenario() -> tuple[list[bytes], list[int], bytes]:
        loop = asyncio.get_running_loop()
        job = _group(loop, 0, 3)
        job.answer_each([ResponseItem(200, str(i).encode()) for i in range(3)])
        failed = _group(loop, 0, 2)
        failed.answer(ResponseItem.error(503, "ServiceUnavailableException", "Worker died."))
        return [a.body for a in job.answers], [a.status for a in failed.answers], (await job.future).body

    bodies, statuses, first = asyncio.run(scenario())
    assert bodies == [b"0", b"1", b"2"] and first == b"0" and statuses == [503, 503]


async def _gathering(queue: "asyncio.Queue[Job]", stop: asyncio.Event, flush: asyncio.Event) -> "asyncio.Task[object]":
    """next_batch gathering a batch of 4 for up to 600 s, its first job taken."""
    loop = asyncio.get_running_loop()
    queue.put_nowait(_job(loop, 0))
    task = asyncio.ensure_future(next_batch(queue, 4, 600.0, stop, flush))
    while not queue.empty():  # bounded: the task takes it on its first step
        await asyncio.sleep(0)
    return task


def test_a_stop_or_a_flush_sends_the_batch_being_gathered_as_it_is() -> None:
    """A drain's stop (or the model's flush) comes while a batch waits ``max_batch_delay`` for more: the batch goes
    at once with what it holds, not after the delay (which may be past the drain, when the worker is killed)."""
    async def scenario(which: str) -> tuple[list[str], list[str]]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Job] = asyncio.Queue()
        stop, flush = asyncio.Event(), asyncio.Event()
        task = await _gathering(queue, stop, flush)
        (stop if which == "stop" else flush).set()
        batch = await asyncio.wait_for(task, 60)
        assert isinstance(batch, list)
        queue.put_nowait(_job(loop, 1))  # after the batch went: left for the next one
        after = await asyncio.wait_for(next_batch(queue, 4, 600.0, asyncio.Event(), flush), 60) if which == "flush" \
            else []
        return [j.item.request_id for j in batch], [j.item.request_id for j in after or []]

    assert asyncio.run(scenario("stop")) == (["0"], [])
    assert asyncio.run(scenario("flush")) == (["0"], ["1"])  # flushed: the next batch takes what is queued, no wait
