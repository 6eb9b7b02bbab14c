"""A registered model: what its workers load, its batching settings, its bounded queue and its workers.

Its fields are read by anyone (describe, metrics); they change only through its methods
(tests/server/test_admission.py checks that no other module assigns them).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Optional

from mmsctl.engine.spec import ServiceSpec
from mmsctl.server.workers.batching import Job, JobQueue
from mmsctl.server.workers.worker import Worker, WorkerState

if TYPE_CHECKING:
    from mmsctl.archive import ModelArchive

__all__ = ["Model"]


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
        return not self.removed and bool(self.live_workers()) and not (self.start_failed and not self.ready_workers())

    def enqueue(self, job: Job) -> None:
        """Queue *job* (asyncio.QueueFull when the queue is full)."""
        self.queue.put_nowait(job)
        self.requests += 1

    def withdraw(self, job: Job) -> None:
        """The client of *job* left: it leaves the queue (if it still waits) and its answer is cancelled.

        The one way out for a request whose client leaves, on the full path and the lean path alike.
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
        """No worker is replaced any more (the model is being unregistered or the server stops)."""
        self.min_workers = 0

    def remove(self) -> None:
        """The model is gone: nothing queues for it again."""
        self.removed = True
