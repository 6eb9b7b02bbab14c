"""Models and their worker processes: register, scale, restart, drain, unregister.

Every model has one bounded asyncio queue. Every worker is a real process
(:class:`mmsctl.engine.worker.AsyncWorkerProcess`, the runtime ``predict`` uses too),
plus an asyncio task here that pulls batches from the queue, sends them and awaits
the answer. A worker that dies or overruns ``response_timeout`` fails only the
batch it held (503 / 504) and is replaced; queued jobs wait for the next worker.
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
from mmsctl.error_body import error_body
from mmsctl.server.batching import Job, next_batch, until_stopped
from mmsctl.server.config import ServerConfig

__all__ = ["Model", "ModelManager", "Worker", "WorkerState", "error_response"]

if TYPE_CHECKING:
    from mmsctl.archive import ModelArchive

log = logging.getLogger("mmsctl.server")

#: Seconds to wait before restarting a worker after its n-th consecutive failure (MMS's back-off).
BACK_OFF = (0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55)


def error_response(status: int, type_: str, message: str) -> ResponseItem:
    """An MMS error body ``{"code", "type", "message"}`` as a ResponseItem."""
    return ResponseItem(status, error_body(status, type_, message), "application/json")


class WorkerState(str, enum.Enum):
    STARTING = "STARTING"
    READY = "READY"
    BUSY = "BUSY"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"


class WorkerStartError(Exception):
    """A worker process that could not load its model."""


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
        self.task: Optional["asyncio.Task[str]"] = None
        self.batches = 0

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
        self.process = await AsyncWorkerProcess.start(
            replace(m.spec, gpu_id=self.gpu_id), threads=config.worker_threads, tag=f"[{m.name} W-{self.id}]")
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
            raise WorkerStartError(failure.message)
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
            return await next_batch(m.queue, m.batch_size, m.max_batch_delay / 1000.0, self.stop_event)
        finally:
            m.gathering.release()

    async def serve(self, metrics: Any) -> str:
        """Feed batches until stopped ("stopped"), dead ("died") or too slow ("timeout")."""
        m = self.model
        loop = asyncio.get_running_loop()
        assert self.process is not None
        while True:
            jobs = await self._next_batch()
            if jobs is None:
                return "stopped"
            self.state = WorkerState.BUSY
            started = loop.time()
            for job in jobs:
                job.started = started
                metrics.observe_queue(m.name, started - job.enqueued)
            try:
                result = await asyncio.wait_for(self.process.run_batch([j.item for j in jobs]), m.response_timeout)
            except asyncio.TimeoutError:
                log.warning("%s W-%s: no answer in %s s; killing pid %s", m.name, self.id, m.response_timeout, self.pid)
                self.kill()
                _answer_all(jobs, error_response(504, "RequestTimeoutException",
                                                 "Backend worker did not respond in given time"))
                return "timeout"
            except WorkerExited:
                _answer_all(jobs, error_response(503, "ServiceUnavailableException", "Worker died."))
                return "died"
            except BatchFailed as exc:
                _answer_all(jobs, error_response(503, "ServiceUnavailableException", f"Prediction failed: {exc}"))
            else:
                for job, response in zip(jobs, result.responses):
                    job.answer(response)
            finally:
                for _ in jobs:
                    m.queue.task_done()
            self.batches += 1
            metrics.observe_inference(m.name, loop.time() - started, len(jobs))
            self.state = WorkerState.READY

    async def close(self, grace: float = 5.0) -> None:
        """Ask the process to exit, then kill it if it lingers."""
        self.state = WorkerState.STOPPING
        if self.process is not None:
            await self.process.close(grace)
        self.state = WorkerState.STOPPED


def _answer_all(jobs: list[Job], response: ResponseItem) -> None:
    for job in jobs:
        job.answer(response)


async def _acquire_unless(lock: asyncio.Lock, stop: asyncio.Event) -> bool:
    """Take *lock*, or give up (False) once *stop* is set."""
    acquired, _ = await until_stopped(lock.acquire(), stop)
    if acquired and stop.is_set():
        lock.release()
        return False
    return acquired


@dataclass
class Model:
    """A registered model: what its workers load, batching settings, queue and workers."""

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
    queue: "asyncio.Queue[Job]" = field(init=False)
    workers: list[Worker] = field(default_factory=list)
    removed: bool = False
    failures: int = 0
    last_error: Optional[str] = None
    next_worker: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    #: Held by the worker gathering a batch (batch_size > 1), so batches fill one at a time.
    gathering: asyncio.Lock = field(default_factory=asyncio.Lock)
    restarting: int = 0
    idle_since: float = field(default_factory=time.monotonic)
    requests: int = 0

    def __post_init__(self) -> None:
        self.queue = asyncio.Queue(self.queue_size)

    @classmethod
    def from_archive(cls, name: str, url: str, archive: ModelArchive, *, handler: Optional[str] = None,
                     batch_size: int = 1, runtime: Optional[str] = None, **settings: Any) -> "Model":
        """A model registered from an opened archive.

        A register ``handler`` replaces the manifest's one and is looked up inside the archive
        only: unlike ``predict --handler``, a request can never make the server import a file
        from elsewhere on its disk.
        """
        spec = archive.service_spec(name=name, batch_size=batch_size)
        if handler:
            spec = replace(spec, handler=handler, legacy=False)
        manifest = archive.manifest
        return cls(name=name, url=url, spec=spec, version=manifest.model_version or "1.0",
                   runtime=runtime or manifest.runtime or "python", engine=manifest.engine_name or None,
                   **settings)

    @property
    def batch_size(self) -> int:
        return self.spec.batch_size

    def live_workers(self) -> list[Worker]:
        return [w for w in self.workers if w.alive and not w.stop_event.is_set()]

    def ready_workers(self) -> list[Worker]:
        return [w for w in self.live_workers() if w.state in (WorkerState.READY, WorkerState.BUSY)]

    def notify(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()


class ModelManager:
    """All models of one server, and the rules for their workers."""

    def __init__(self, config: ServerConfig, metrics: Any) -> None:
        self.config = config
        self.metrics = metrics
        self.models: dict[str, Model] = {}
        self.startup_models: set[str] = set()
        self._gpu_next = 0

    # -- registration ----------------------------------------------------------------------
    def add(self, model: Model) -> None:
        from mmsctl.server.errors import ConflictError

        if model.name in self.models:
            raise ConflictError(f"Model {model.name} is already registered.")
        self.models[model.name] = model
        log.info("Model %s loaded.", model.name)

    async def register(self, model: Model, workers: int, *, synchronous: bool, timeout: float) -> bool:
        """Add *model* and start *workers* workers; with *synchronous*, wait until they are READY.

        Returns:
            False while the workers are still starting (not *synchronous*), else True.

        Raises:
            ConflictError: a model by that name exists.
            InternalServerError: the workers could not start (the model is removed again).
        """
        from mmsctl.server.errors import InternalServerError

        self.add(model)
        if workers <= 0:
            return True
        await self.scale(model, workers, workers)
        if not synchronous:
            return False
        error = await self.wait_for_workers(model, workers, timeout)
        if error:
            await self.unregister(model.name, 0)
            raise InternalServerError(f'Failed to start workers for model "{model.name}": {error}')
        return True

    def get(self, name: str, version: Optional[str] = None) -> Model:
        """The model called *name*; with *version*, only if that is its version (else 404)."""
        from mmsctl.server.errors import ModelNotFound, ModelVersionNotFound

        model = self.models.get(name)
        if model is None:
            raise ModelNotFound(f"Model not found: {name}")
        if version is not None and version != model.version:
            raise ModelVersionNotFound(f"Model version: {version} does not exist for model: {name}")
        return model

    # -- workers ---------------------------------------------------------------------------
    def _gpu_for_next_worker(self) -> Optional[int]:
        if self.config.number_of_gpu <= 0:
            return None
        gpu = self._gpu_next % self.config.number_of_gpu
        self._gpu_next += 1
        return gpu

    def _start_worker(self, model: Model, delay: float = 0.0) -> Worker:
        worker = Worker(model, str(9000 + model.next_worker), self._gpu_for_next_worker())
        model.next_worker += 1
        model.workers.append(worker)
        worker.task = asyncio.ensure_future(self._run_worker(worker, delay))
        return worker

    async def _run_worker(self, worker: Worker, delay: float) -> str:
        model = worker.model
        if delay:
            try:
                await asyncio.wait_for(worker.stop_event.wait(), delay)
            except asyncio.TimeoutError:
                pass
            if worker.stop_event.is_set():
                worker.state = WorkerState.STOPPED
                self._forget(worker)
                return "stopped"
        worker.start_time = time.time()
        try:
            await worker.spawn(self.config)
        except WorkerStartError as exc:
            worker.state = WorkerState.STOPPED
            model.failures += 1
            model.last_error = str(exc)
            log.error("%s W-%s failed to start: %s", model.name, worker.id, exc)
            self._forget(worker)
            self._after_worker_exit(model)
            return "load_failed"
        except Exception as exc:  # noqa: BLE001 - spawning itself failed (fork, fd limits)
            worker.state = WorkerState.STOPPED
            model.failures += 1
            model.last_error = f"cannot start a worker: {exc}"
            log.exception("%s W-%s cannot start", model.name, worker.id)
            self._forget(worker)
            self._after_worker_exit(model)
            return "load_failed"
        log.info("%s W-%s READY (pid %s)", model.name, worker.id, worker.pid)
        model.failures = 0
        model.notify()
        outcome = await worker.serve(self.metrics)
        if outcome == "stopped":
            await worker.close()
            self._forget(worker)
            self._after_worker_exit(model, crashed=False)
            return outcome
        # Dead or hung: the replacement is registered before we wait for the old process, so
        # requests arriving meanwhile queue for it instead of finding no worker.
        worker.state = WorkerState.STOPPED
        worker.kill()
        self._forget(worker)
        self._after_worker_exit(model, crashed=True)
        model.failures += 1
        code = await worker.exit_code()
        model.last_error = f"worker {worker.id} {outcome} (exit code {code})"
        log.error("%s W-%s %s (pid %s, exit code %s)", model.name, worker.id, outcome, worker.pid, code)
        if worker.process is not None:
            worker.process.close_connection()
        return outcome

    def _forget(self, worker: Worker) -> None:
        model = worker.model
        if worker in model.workers:
            model.workers.remove(worker)
        model.notify()

    def _after_worker_exit(self, model: Model, crashed: bool = True) -> None:
        """Replace lost workers (with back-off) or answer queued jobs if none will come."""
        if model.removed:
            return
        missing = model.min_workers - len(model.live_workers())
        if crashed and missing > 0:
            delay = BACK_OFF[min(model.failures, len(BACK_OFF) - 1)]
            for _ in range(missing):
                self._start_worker(model, delay)
        if not model.live_workers():
            self._reject_queued(model, "No worker is available to serve request for model: " + model.name)

    def _reject_queued(self, model: Model, message: str) -> None:
        while True:
            try:
                job = model.queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            model.queue.task_done()
            job.answer(error_response(503, "ServiceUnavailableException", message))

    async def scale(self, model: Model, min_workers: int, max_workers: int) -> None:
        """Set the worker range and start or stop workers to reach ``min_workers``."""
        model.min_workers, model.max_workers = min_workers, max(max_workers, min_workers)
        model.failures = 0
        model.last_error = None
        live = model.live_workers()
        if len(live) < min_workers:
            for _ in range(min_workers - len(live)):
                self._start_worker(model)
        elif len(live) > model.max_workers:
            self._stop_workers(model, len(live) - model.max_workers)
        model.notify()

    def _stop_workers(self, model: Model, count: int) -> None:
        """Stop *count* workers, idle and still-loading ones first; queued jobs stay queued."""
        order = {WorkerState.STARTING: 0, WorkerState.READY: 1, WorkerState.BUSY: 2}
        victims = sorted(model.live_workers(), key=lambda w: (order.get(w.state, 3), -w.start_time))[:count]
        for worker in victims:
            worker.stop_event.set()
            if worker.state == WorkerState.STARTING and worker.process is not None:
                worker.kill()

    async def wait_for_workers(self, model: Model, count: int, timeout: float) -> Optional[str]:
        """Wait until *count* workers are READY; return an error text if they cannot be."""
        deadline = time.monotonic() + timeout
        while True:
            ready = len(model.ready_workers())
            if ready >= count:
                return None
            if model.removed:
                return "model was unregistered"
            if model.last_error and model.failures > 0 and model.restarting == 0:
                starting = [w for w in model.live_workers() if w.state == WorkerState.STARTING and w.process is not None]
                if not starting:
                    return model.last_error
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return f"only {ready} of {count} workers are ready after {timeout:g} s"
            try:
                await asyncio.wait_for(model.changed.wait(), min(remaining, 1.0))
            except asyncio.TimeoutError:
                pass

    async def unregister(self, name: str, timeout: float) -> None:
        """Remove a model: no new jobs, queued ones answered (until *timeout*), workers stopped."""
        model = self.get(name)
        del self.models[name]
        self.startup_models.discard(name)
        await self._drain_model(model, timeout)
        log.info("Model %s unregistered.", name)

    async def _drain_model(self, model: Model, timeout: float) -> None:
        model.min_workers = 0
        if model.live_workers() and not model.queue.empty():
            try:
                await asyncio.wait_for(model.queue.join(), timeout)
            except asyncio.TimeoutError:
                pass
        model.removed = True
        self._reject_queued(model, f"Model {model.name} was unregistered")
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

    async def shutdown(self, timeout: float) -> None:
        """Answer everything queued or in flight (bounded by *timeout*), then stop every worker."""
        models = list(self.models.values())
        self.models.clear()
        await asyncio.gather(*(self._drain_model(m, timeout) for m in models))

    # -- autoscaling -----------------------------------------------------------------------
    def autoscale(self) -> None:
        """Between min and max workers, follow the queue: grow when it backs up, shrink when idle."""
        now = time.monotonic()
        for model in self.models.values():
            if model.max_workers <= model.min_workers:
                continue
            live = len(model.live_workers())
            pending = model.queue.qsize()
            if pending > 0:
                model.idle_since = now
            if pending > 2 * max(live, 1) * model.batch_size and live < model.max_workers:
                log.info("autoscale %s: %d queued, %d workers -> +1", model.name, pending, live)
                self._start_worker(model)
            elif pending == 0 and live > model.min_workers and now - model.idle_since > 30:
                log.info("autoscale %s: idle, %d workers -> -1", model.name, live)
                self._stop_workers(model, 1)
                model.idle_since = now

    # -- predictions -----------------------------------------------------------------------
    def submit(self, model: Model, item: RequestItem) -> "asyncio.Future[ResponseItem]":
        """Queue one request; raise ServiceUnavailable when no worker or the queue is full."""
        from mmsctl.server.errors import ServiceUnavailable

        if not model.live_workers():
            raise ServiceUnavailable(
                f"No worker is available to serve request for model: {model.name}. "
                "Consider increasing job queue size."
            )
        loop = asyncio.get_running_loop()
        future: asyncio.Future[ResponseItem] = loop.create_future()
        try:
            model.queue.put_nowait(Job(item, future, loop.time()))
        except asyncio.QueueFull:
            raise ServiceUnavailable(
                f"No worker is available to serve request for model: {model.name}. "
                "Consider increasing job queue size.",
                retry_after=1,
            ) from None
        model.requests += 1
        return future
