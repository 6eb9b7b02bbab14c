"""Each worker's life: started, watched, and replaced with MMS's back-off when it dies, hangs or fails to start.

A worker that dies, overruns ``response_timeout`` or fails to start is replaced with MMS's back-off; queued jobs
wait for the replacement of a worker that died, but once a worker fails to start and none is READY, queued and
new requests are answered 503 at once (a model whose handler cannot load never makes a request hang).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable, Optional

from mmsctl.engine.protocol import ResponseItem
from mmsctl.server.config import ServerConfig
from mmsctl.server.workers.registry import Registry
from mmsctl.server.workers.model import Model, Worker, WorkerStartError, WorkerState

__all__ = ["BACK_OFF", "Supervisor"]

log = logging.getLogger("mmsctl.server")

#: Seconds to wait before restarting a worker after its n-th exit in a row (MMS's WorkerThread.BACK_OFF).
BACK_OFF = (0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 987, 1597)


class Supervisor:
    """Starts the workers of every model, watches them, and replaces those lost."""

    def __init__(self, config: ServerConfig, metrics: Any, registry: Registry) -> None:
        self.config = config
        self.metrics = metrics
        self.registry = registry
        self._gpu_next = 0
        #: Called with a model each time one of its workers becomes READY (the kernel measurement's hook).
        self.on_ready: Callable[[Model], None] = lambda model: None

    def _gpu_for_next_worker(self) -> Optional[int]:
        if self.config.number_of_gpu <= 0:
            return None
        gpu = self._gpu_next % self.config.number_of_gpu
        self._gpu_next += 1
        return gpu

    def start_worker(self, model: Model, delay: float = 0.0) -> Worker:
        worker = model.new_worker(self._gpu_for_next_worker())
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
                worker.launched.set()
                model.forget(worker)
                return "stopped"
        worker.start_time = time.time()
        try:
            await worker.spawn(self.config)
        except Exception as exc:  # noqa: BLE001 - WorkerStartError, or spawning itself failed (fork, fd limits)
            worker.state = WorkerState.STOPPED
            error = str(exc) if isinstance(exc, WorkerStartError) else f"cannot start a worker: {exc}"
            log.error("%s W-%s failed to start: %s", model.name, worker.id, error)
            model.forget(worker)
            killed_on_purpose = worker.stop_event.is_set()  # a scale down or unregister, not a failure
            model.worker_failed_to_start(error, on_purpose=killed_on_purpose,
                                         status=exc.status if isinstance(exc, WorkerStartError) else 500)
            self._after_worker_exit(model, crashed=not killed_on_purpose)
            return "load_failed"
        log.info("%s W-%s READY (pid %s)", model.name, worker.id, worker.pid)
        model.worker_ready()
        self.on_ready(model)
        self.registry.publish()  # the kernel set its workers run with (predict's warm path matches it)
        outcome = await worker.serve(self.metrics)
        if outcome == "stopped":
            await worker.close()
            model.forget(worker)
            self._after_worker_exit(model, crashed=False)
            return outcome
        # Dead or hung: the replacement is registered before we wait for the old process, so
        # requests arriving meanwhile queue for it instead of finding no worker.
        worker.state = WorkerState.STOPPED
        worker.kill()
        model.forget(worker)
        model.worker_lost(f"worker {worker.id} {outcome}")
        self._after_worker_exit(model, crashed=True)
        code = await worker.exit_code()
        model.worker_lost(f"worker {worker.id} {outcome} (exit code {code})")
        log.error("%s W-%s %s (pid %s, exit code %s)", model.name, worker.id, outcome, worker.pid, code)
        if worker.process is not None:
            worker.process.close_connection()
        return outcome

    def _after_worker_exit(self, model: Model, crashed: bool = True) -> None:
        """Replace lost workers with MMS's back-off; answer the queue 503 if no worker can serve it."""
        if model.removed:  # what a dying worker gave back (jobs sent ahead) has no one left to serve it
            self.reject_queued(model, model.removed_reason)
            return
        missing = model.min_workers - len(model.live_workers())
        if crashed and missing > 0:
            delay = BACK_OFF[min(model.count_failure(), len(BACK_OFF) - 1)]
            log.info("%s: %d worker(s) to restart in %d s (exit %d in a row)", model.name, missing, delay,
                     model.failures)
            for _ in range(missing):
                self.start_worker(model, delay)
        if not model.serving():
            self.reject_queued(model, self.unavailable(model))

    @staticmethod
    def unavailable(model: Model) -> str:
        message = f"No worker is available to serve request for model: {model.name}"
        if model.start_failed and model.last_error:
            message += f" (its workers fail to start: {model.last_error})"
        return message

    def reject_queued(self, model: Model, message: str) -> None:
        while True:
            try:
                job = model.queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            model.queue.task_done()
            job.answer(ResponseItem.error(503, "ServiceUnavailableException", message))

    def stop_workers(self, model: Model, count: int) -> None:
        """Stop *count* workers, idle and still-loading ones first; queued jobs stay queued."""
        order = {WorkerState.STARTING: 0, WorkerState.READY: 1, WorkerState.BUSY: 2}
        victims = sorted(model.live_workers(), key=lambda w: (order.get(w.state, 3), -w.start_time))[:count]
        for worker in victims:
            worker.stop_event.set()
            if worker.state == WorkerState.STARTING and worker.process is not None:
                worker.kill()
