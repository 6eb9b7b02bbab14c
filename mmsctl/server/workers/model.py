"""A registered model, its queue and its workers: each a worker process plus the task that feeds it.

A :class:`Worker` pulls batches from its model's queue (one worker gathers at a time when batching, as MMS's
aggregator does), sends them to its :class:`~mmsctl.engine.worker.AsyncWorkerProcess` and answers the jobs. A
worker that dies or overruns ``response_timeout`` fails only the batch it held (503 / 504); replacing it is the
supervisor's job (:mod:`~mmsctl.server.workers.supervision`). A :class:`Model`'s fields are read by anyone
(describe, metrics); they change only through its methods (tests/server/test_admission.py checks that no other
module assigns them).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Optional

from mmsctl.engine.protocol import RequestItem, ResponseItem
from mmsctl.engine.spec import ServiceSpec
from mmsctl.engine.worker import AsyncWorkerProcess, BatchFailed, WorkerExited
from mmsctl.server.config import ServerConfig
from mmsctl.server.workers.batching import Job, JobQueue, next_batch, until_stopped

if TYPE_CHECKING:
    from mmsctl.archive import ModelArchive

__all__ = ["Model", "Worker", "WorkerStartError", "WorkerState"]

log = logging.getLogger("mmsctl.server")

#: The most batches a worker takes at once (sent to it in one frame) once its model's queue backs up:
#: ``PIPELINE_FROM`` jobs or more wait per ready worker.
PIPELINE_DEPTH = 32
PIPELINE_FROM = 8
#: A worker holds more than one batch only while its batches take less than this (seconds): there the
#: round trip to the worker is a good part of a request's cost; with slower models jobs stay queued,
#: where any worker can take them, a client that leaves takes them back, and describe shows them.
PIPELINE_BELOW = 0.002


class WorkerState(str, enum.Enum):
    STARTING = "STARTING"
    READY = "READY"
    BUSY = "BUSY"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"


class WorkerStartError(Exception):
    """A worker process that could not load its model; *status* is what a request waiting for it is answered
    (507 when the load ran out of memory, as MMS answers, else 500)."""

    def __init__(self, message: str, status: int = 500) -> None:
        super().__init__(message)
        self.status = status


class Worker:
    """One worker process (:class:`~mmsctl.engine.worker.AsyncWorkerProcess`) and the task that feeds it."""

    def __init__(self, model: "Model", worker_id: str, gpu_id: Optional[int]) -> None:
        self.model = model
        self.id = worker_id
        self.gpu_id = gpu_id
        self.state = WorkerState.STARTING
        self.start_time = time.time()
        self.pid: Optional[int] = None
        self.process: Optional[AsyncWorkerProcess] = None
        self.stop_event = asyncio.Event()
        #: Why the worker was killed on purpose while busy (a drain's deadline): its requests' 503 message.
        self.stop_reason: Optional[str] = None
        #: Set once the process is started, or could not be (the start-up overlaps the server's own set-up).
        self.launched = asyncio.Event()
        self.task: Optional["asyncio.Task[str]"] = None
        self.batches = 0
        #: Whether the last batches took less than PIPELINE_BELOW each (no batch yet: not known).
        self.quick = False
        #: Batches sent to the worker ahead of the one it runs, not started yet (they count as pending).
        self.ahead: list[list[Job]] = []

    @property
    def alive(self) -> bool:
        return self.state in (WorkerState.STARTING, WorkerState.READY, WorkerState.BUSY)

    def memory(self) -> int:
        """Resident memory of the worker process in bytes (0 if unknown)."""
        if not self.pid:
            return 0
        try:
            import psutil

            return int(psutil.Process(self.pid).memory_info().rss)
        except Exception:  # noqa: BLE001 - gone or not permitted
            return 0

    async def spawn(self, config: ServerConfig) -> None:
        """Start the process and wait until it says READY (raise WorkerStartError if not)."""
        m = self.model
        try:
            self.process = await AsyncWorkerProcess.start(
                replace(m.spec, gpu_id=self.gpu_id, decode_input=config.decode_input_request),
                threads=config.worker_threads, tag=f"[{m.name} W-{self.id}]",
                env={"MMSCTL_MAX_IMAGE_PIXELS": str(config.max_image_pixels),
                     "MMSCTL_MAX_MODEL_MEMORY": str(config.model_memory_allowed)})
        finally:
            self.launched.set()
        self.pid = self.process.pid
        try:
            failure = await asyncio.wait_for(self.process.wait_ready(), config.worker_start_timeout)
        except asyncio.TimeoutError:
            self.kill()
            raise WorkerStartError(f"worker did not load the model in {config.worker_start_timeout:g} s") from None
        except WorkerExited:
            code = await self.process.exit_code()
            raise WorkerStartError(f"worker exited while loading the model (exit code {code}); see the server log") from None
        if failure is not None:
            await self.process.exit_code()
            raise WorkerStartError(failure.message, 507 if failure.out_of_memory else 500)
        self.state = WorkerState.READY

    async def exit_code(self) -> Optional[int]:
        return await self.process.exit_code() if self.process is not None else None

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()

    async def _next_batch(self) -> Optional[list[Job]]:
        """The next batch; with batching, one worker at a time gathers (as MMS's aggregator does).

        Workers gathering at once split the waiting requests between them and each then waits
        out ``max_batch_delay`` for a batch that never fills; one at a time, batches fill.
        """
        m = self.model
        if m.batch_size <= 1:
            return await next_batch(m.queue, m.batch_size, 0.0, self.stop_event)
        if not await _acquire_unless(m.gathering, self.stop_event):
            return None
        try:
            return await next_batch(m.queue, m.batch_size, m.max_batch_delay / 1000.0, self.stop_event, m.draining)
        finally:
            m.gathering.release()

    def _more_batches(self) -> list[list[Job]]:
        """Jobs already queued that this worker may take on top of the batch it holds (one per batch,
        models without batching only), once the queue is backed up (``PIPELINE_FROM`` jobs per ready
        worker wait): at most its share of the queue, so a burst is still spread over every worker."""
        m = self.model
        if m.batch_size > 1 or not self.quick:
            return []
        waiting, ready = m.queue.qsize(), max(len(m.ready_workers()), 1)
        if waiting < PIPELINE_FROM * ready:
            return []
        share = min(PIPELINE_DEPTH - 1, waiting // ready)
        more: list[list[Job]] = []
        for _ in range(share):
            try:
                more.append([m.queue.get_nowait()])
            except asyncio.QueueEmpty:
                break
        return more

    def _take_ahead(self) -> list[list[Job]]:
        """Queued jobs to send to this worker while it is busy, so it starts them the moment it
        answers (no idle round trip through the front end): one batch, for a model whose batches
        are not quick, and only while every other worker of the model is busy too (an idle worker
        would take it) and the worker is not being stopped."""
        m = self.model
        if self.quick or self.stop_event.is_set() or m.queue.qsize() < max(m.batch_size, 1):
            return []
        if any(w is not self and w.state == WorkerState.READY for w in m.workers):
            return []
        if m.batch_size > 1 and m.gathering.locked():
            return []
        jobs: list[Job] = []
        taken = 0
        while taken < max(m.batch_size, 1) and not m.queue.empty():
            job = m.queue.get_nowait()
            if jobs and taken + job.size > m.batch_size:  # a client's batch that does not fit: the next batch's
                m.queue.put_back(job)
                break
            jobs.append(job)
            taken += job.size
        return [jobs]

    async def serve(self, metrics: Any) -> str:
        """Feed batches until stopped ("stopped"), dead ("died") or too slow ("timeout").

        Under load, and while its batches are quick (``PIPELINE_BELOW``), a worker takes up to
        ``PIPELINE_DEPTH`` batches at once, sent in one frame and answered in one, all within
        ``response_timeout``. A slower model's busy worker is sent its next batch before it answers
        the one it runs (:meth:`_take_ahead`); each batch still has the whole ``response_timeout`` from
        when the worker starts it.
        """
        m = self.model
        assert self.process is not None
        while True:
            if self.ahead:
                batches, self.ahead = self.ahead, []
            else:
                jobs = await self._next_batch()
                if jobs is None:
                    return "stopped"
                batches = [jobs, *self._more_batches()]
                self.process.send(_requests(batches))
            self.state = WorkerState.BUSY
            started = time.perf_counter()  # not loop.time(): uvloop's is libuv's millisecond clock
            for batch in batches:
                for job in batch:
                    job.started = started
                    metrics.observe_queue(m.name, started - job.enqueued)
            self.ahead = self._take_ahead()
            if self.ahead:
                self.process.send(_requests(self.ahead))
            outcome = await self._answer(batches, metrics, started)
            if outcome is not None:
                ahead, self.ahead = self.ahead, []
                for jobs in reversed(ahead):  # never started: back to the front of the queue for another worker
                    for job in reversed(jobs):
                        m.queue.put_back(job)
                return outcome
            self.quick = time.perf_counter() - started < PIPELINE_BELOW * len(batches)
            if not self.ahead:
                self.state = WorkerState.READY

    async def _answer(self, batches: list[list[Job]], metrics: Any, started: float) -> Optional[str]:
        """Wait for the worker's answer to *batches* (sent in one frame) and answer their jobs; None, or
        why the worker is finished ("timeout", "died")."""
        m = self.model
        assert self.process is not None
        items = _requests(batches)
        try:
            outcomes = await asyncio.wait_for(self.process.receive(items), m.response_timeout)
        except asyncio.TimeoutError:
            log.warning("%s W-%s: no answer in %s s; killing pid %s", m.name, self.id, m.response_timeout, self.pid)
            self.kill()
            _fail(batches, m, ResponseItem.error(504, "RequestTimeoutException",
                                                 "Backend worker did not respond in given time"))
            return "timeout"
        except WorkerExited:
            _fail(batches, m, ResponseItem.error(503, "ServiceUnavailableException", self.stop_reason or "Worker died."))
            return "died"
        elapsed = (time.perf_counter() - started) / len(batches)
        for jobs, outcome in zip(batches, outcomes):
            if isinstance(outcome, BatchFailed):
                _answer_all(jobs, ResponseItem.error(503, "ServiceUnavailableException",  # the log has why
                                                     "Prediction failed"))
            else:
                at, responses = 0, outcome.responses
                for job in jobs:
                    size = 1 + len(job.more)
                    job.answer_each(responses[at:at + size])
                    at += size
            for _ in jobs:
                m.queue.task_done()
            self.batches += 1
            metrics.observe_inference(m.name, elapsed, sum(job.size for job in jobs))
        return None

    async def close(self, grace: float = 5.0) -> None:
        """Ask the process to exit, then kill it if it lingers."""
        self.state = WorkerState.STOPPING
        if self.process is not None:
            await self.process.close(grace)
        self.state = WorkerState.STOPPED


def _requests(batches: list[list[Job]]) -> list[list[RequestItem]]:
    """What the worker is sent for *batches*: each batch's requests, a client's batch's all in place."""
    return [[item for job in jobs for item in job.items()] for jobs in batches]


def _answer_all(jobs: list[Job], response: ResponseItem) -> None:
    for job in jobs:
        job.answer(response)


def _fail(batches: list[list[Job]], model: "Model", response: ResponseItem) -> None:
    """Answer every job of *batches* with *response* (their worker is gone) and mark them done."""
    for jobs in batches:
        _answer_all(jobs, response)
        for _ in jobs:
            model.queue.task_done()


async def _acquire_unless(lock: asyncio.Lock, stop: asyncio.Event) -> bool:
    """Take *lock*, or give up (False) once *stop* is set."""
    acquired, _ = await until_stopped(lock.acquire(), stop)
    if acquired and stop.is_set():
        lock.release()
        return False
    return acquired


@dataclass
class Model:
    """A registered model: what its workers load, batching settings, queue and workers.

    Its fields are read by anyone (describe, metrics); they change only through its methods, which keep
    them consistent (a range with ``max_workers >= min_workers``, a removed model never serving again,
    every change of its workers announced on ``changed``).
    """

    name: str
    url: str
    #: What each worker loads (its GPU is chosen per worker); ``spec.batch_size`` is the batch size.
    spec: ServiceSpec
    version: str = "1.0"
    runtime: str = "python"
    engine: Optional[str] = None
    max_batch_delay: int = 100
    response_timeout: int = 120
    min_workers: int = 0
    max_workers: int = 0
    queue_size: int = 1000
    queue: JobQueue = field(init=False)
    workers: list[Worker] = field(default_factory=list)
    removed: bool = False
    #: Why it was removed (unregistered, or the server's drain ended): the 503 of what still waited.
    removed_reason: str = ""
    #: Worker exits in a row (crash or failed start) since one last became READY: the back-off index.
    failures: int = 0
    last_error: Optional[str] = None
    #: The status a request waiting for workers is answered when the last start failed (507: out of memory).
    last_error_status: int = 500
    #: The last worker start failed and none has become READY since: requests are answered 503 at once.
    start_failed: bool = False
    next_worker: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    #: Held by the worker gathering a batch (batch_size > 1), so batches fill one at a time.
    gathering: asyncio.Lock = field(default_factory=asyncio.Lock)
    #: Set once the model drains (:meth:`wind_down`): a batch being gathered goes as it is.
    draining: asyncio.Event = field(default_factory=asyncio.Event)
    idle_since: float = field(default_factory=time.monotonic)
    requests: int = 0

    def __post_init__(self) -> None:
        self.queue = JobQueue(self.queue_size)

    @classmethod
    def from_archive(cls, name: str, url: str, archive: ModelArchive, *, handler: Optional[str] = None,
                     default_handler: Optional[str] = None, batch_size: int = 1, runtime: Optional[str] = None,
                     **settings: Any) -> "Model":
        """A model registered from an opened archive.

        A register ``handler`` replaces the manifest's one and is looked up inside the archive
        only: unlike ``predict --handler``, a request can never make the server import a file
        from elsewhere on its disk. An archive that names no handler runs the server's
        *default_handler* (``default_service_handler``, the operator's: a module of the archive, or a
        ``.py`` file anywhere), where there is one.
        """
        spec = archive.service_spec(name=name, batch_size=batch_size)
        if handler:
            spec = replace(spec, handler=handler, legacy=False)
        elif default_handler and not spec.handler:
            spec = replace(spec, handler_override=default_handler, legacy=False)
        manifest = archive.manifest
        return cls(name=name, url=url, spec=spec, version=manifest.model_version or "1.0",
                   runtime=runtime or manifest.runtime or "python", engine=manifest.engine_name or None,
                   **settings)

    @property
    def batch_size(self) -> int:
        return self.spec.batch_size

    def live_workers(self) -> list[Worker]:
        return [w for w in self.workers if w.alive and not w.stop_event.is_set()]

    def pending(self) -> int:
        """Requests not started yet: queued, or sent to a busy worker ahead of the batch it runs."""
        return self.queue.qsize() + sum(len(jobs) for w in self.workers for jobs in w.ahead)

    def ready_workers(self) -> list[Worker]:
        return [w for w in self.live_workers() if w.state in (WorkerState.READY, WorkerState.BUSY)]

    def notify(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    # -- requests --------------------------------------------------------------------------------
    def serving(self) -> bool:
        """Whether a request may queue: the model is registered, a worker lives, and its workers do not
        fail to start with none READY."""
        if self.removed or not any(w.alive and not w.stop_event.is_set() for w in self.workers):
            return False
        return not (self.start_failed and not self.ready_workers())

    def enqueue(self, job: Job) -> None:
        """Queue *job* (asyncio.QueueFull when the queue is full)."""
        self.queue.put_nowait(job)
        self.requests += 1

    def withdraw(self, job: Job) -> None:
        """The client of *job* left: it leaves the queue (if it still waits) and its answer is cancelled.

        The one way out for a request whose client leaves, on aiohttp's path and the lean path alike.
        """
        if job.future.done() and not job.future.cancelled():
            return  # answered already
        self.queue.discard(job)
        job.future.cancel()

    def busy(self, now: float) -> None:
        """Requests were pending at *now* (autoscaling shrinks a model idle for a while)."""
        self.idle_since = now

    # -- workers ---------------------------------------------------------------------------------
    def new_worker(self, gpu_id: Optional[int]) -> Worker:
        """A worker for this model, with the next id, counted among its workers."""
        worker = Worker(self, str(9000 + self.next_worker), gpu_id)
        self.next_worker += 1
        self.workers.append(worker)
        return worker

    def forget(self, worker: Worker) -> None:
        """*worker* is gone (stopped, dead or never started)."""
        if worker in self.workers:
            self.workers.remove(worker)
        self.notify()

    def set_range(self, min_workers: int, max_workers: int) -> None:
        """A new worker range (``max_workers`` at least ``min_workers``), with a clean failure record."""
        self.min_workers, self.max_workers = min_workers, max(max_workers, min_workers)
        self.failures, self.last_error, self.start_failed = 0, None, False

    def worker_ready(self) -> None:
        """A worker became READY: the back-off starts over and requests queue again."""
        self.failures, self.start_failed = 0, False
        self.notify()

    def worker_failed_to_start(self, error: str, *, on_purpose: bool, status: int = 500) -> None:
        """A worker did not load (*status*: 507 when it ran out of memory); unless it was stopped *on_purpose*,
        requests are refused until one does."""
        self.last_error, self.last_error_status = error, status
        if not on_purpose:
            self.start_failed = True

    def worker_lost(self, error: str) -> None:
        """A READY worker died or hung (*error* says which)."""
        self.last_error = error

    def count_failure(self) -> int:
        """One more worker exit in a row; the count (the back-off index)."""
        self.failures += 1
        return self.failures

    def wind_down(self) -> None:
        """No worker is replaced any more (the model is being unregistered or the server stops), and no batch
        waits for more requests (:meth:`flush`)."""
        self.min_workers = 0
        self.flush()

    def flush(self) -> None:
        """From now on no batch waits for more requests than are queued: the one being gathered goes as it is (the
        model drains, and ``max_batch_delay`` may be longer than the drain)."""
        self.draining.set()

    def remove(self, reason: Optional[str] = None) -> None:
        """The model is gone: nothing queues for it again; what still waits is answered 503 with *reason*."""
        self.removed = True
        self.removed_reason = reason or f"Model {self.name} was unregistered"
