"""All models of one server and the rules for their workers: register, scale, restart, drain, unregister.

Every model has one bounded queue and its workers (:mod:`mmsctl.server.workers.model`). A worker
that dies, overruns ``response_timeout`` or fails to start is replaced with MMS's back-off;
queued jobs wait for the replacement of a worker that died, but once a worker fails to start
and none is READY, queued and new requests are answered 503 at once (a model whose handler
cannot load never makes a request hang). A request whose client leaves is taken out of the
queue. Between ``minWorkers`` and ``maxWorkers`` the number of workers follows the queue,
and the workers of all models together never pass ``worker_limit``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any, Optional

from mmsctl.engine.protocol import RequestItem, ResponseItem
from mmsctl.server.workers.batching import Job
from mmsctl.server.config import ServerConfig
from mmsctl.server.workers.model import Model, Worker, WorkerStartError, WorkerState

if TYPE_CHECKING:
    from mmsctl.server.errors import ApiException

__all__ = ["BACK_OFF", "ModelManager"]

log = logging.getLogger("mmsctl.server")

#: Seconds to wait before restarting a worker after its n-th exit in a row (MMS's WorkerThread.BACK_OFF).
BACK_OFF = (0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 987, 1597)


class ModelManager:
    """All models of one server, and the rules for their workers."""

    def __init__(self, config: ServerConfig, metrics: Any) -> None:
        self.config = config
        self.metrics = metrics
        self.models: dict[str, Model] = {}
        self.startup_models: set[str] = set()
        self._gpu_next = 0
        #: The most workers of all models together (``worker_limit``), fixed at start.
        self.worker_limit = config.workers_allowed
        #: Lines for ``serve start``'s output (published in state.json): the kernel measurements begun.
        self.notes: list[str] = []
        from mmsctl.engine.kernels import defer_measurement

        defer_measurement()  # a start never waits for a kernel measurement (see _measure_kernels)

    # -- registration ----------------------------------------------------------------------
    def add(self, model: Model) -> None:
        from mmsctl.server.errors import ConflictError

        if model.name in self.models:
            raise ConflictError(f"Model {model.name} is already registered.")
        self.models[model.name] = model
        log.info("Model %s loaded.", model.name)
        self.publish()

    async def register(self, model: Model, workers: int, *, synchronous: bool, timeout: float) -> bool:
        """Add *model* and start *workers* workers; with *synchronous*, wait until they are READY.

        Returns:
            False while the workers are still starting (not *synchronous*), else True.

        Raises:
            ConflictError: a model by that name exists.
            InternalServerError: the workers could not start (the model is removed again).
        """
        self._check_worker_limit(model, workers)
        self.add(model)
        if workers <= 0:
            return True
        await self.scale(model, workers, workers)
        if not synchronous:
            return False
        await self.await_workers(model, workers, timeout)
        return True

    async def await_workers(self, model: Model, workers: int, timeout: float) -> None:
        """Wait until *workers* workers of *model* are READY; if they cannot be, the model is removed again.

        Raises:
            InternalServerError: the workers could not start (see :meth:`workers_failed`).
        """
        error = await self.wait_for_workers(model, workers, timeout)
        if error:
            await self.unregister(model.name, 0)
            raise self.workers_failed(model, error)

    @staticmethod
    def workers_failed(model: Model, error: str) -> ApiException:
        """MMS's answer when workers cannot start: 500 ``Failed to start workers`` (507 when the load ran out of
        memory), with why in the body's ``cause``."""
        from mmsctl.server.errors import InternalServerError

        status = model.last_error_status if error == model.last_error else 500
        return InternalServerError("Failed to start workers", cause=f'model "{model.name}": {error}', status=status)

    @staticmethod
    async def launched(model: Model) -> None:
        """Wait until every worker of *model* has its process (or failed to get one): a server starting up
        lets its start-up workers import mxnet while it sets up its own APIs."""
        waits = [asyncio.ensure_future(w.launched.wait()) for w in model.workers]
        if waits:
            await asyncio.wait(waits)

    def get(self, name: str, version: Optional[str] = None) -> Model:
        """The model called *name*; with *version*, only if that is its version (else 404)."""
        from mmsctl.server.errors import ModelNotFound, ModelVersionNotFound

        model = self.models.get(name)
        if model is None:
            raise ModelNotFound(f"Model not found: {name}")
        if version is not None and version != model.version:
            raise ModelVersionNotFound(f"Model version: {version} does not exist for model: {name}")
        return model

    # -- state.json --------------------------------------------------------------------------
    def _update_state(self, **changes: Any) -> None:
        from mmsctl.instances import Instance

        try:
            Instance(self.config.instance_name).update(**changes)
        except (OSError, ValueError) as exc:
            log.warning("cannot update state.json: %s", exc)

    def publish(self) -> None:
        """Each model's archive digest and handler in ``state.json``: a local ``mmsctl predict`` of the same
        archive sends its inputs here instead of starting mxnet (:mod:`mmsctl.predict.warm`)."""
        from pathlib import Path

        from mmsctl.engine.kernels import started_with

        served: dict[str, dict[str, Any]] = {}
        for name, m in self.models.items():
            root = Path(m.spec.root)
            if root.parent.name != "extracted" or len(root.name) != 32 or m.spec.gpu_id is not None \
                    or not self.config.decode_input_request:
                continue  # a folder, not the cached extraction of an archive file, or not what predict runs
            served[name] = {"archive": root.name, "handler": m.spec.chosen_handler or "",
                            "override": m.spec.handler_override is not None, "mkldnn": started_with(name)}
        self._update_state(served=served)

    async def _replace_workers(self, model: Model, mkldnn: bool) -> None:
        """Replace the workers that run the other kernel set now that *mkldnn* measured faster, one at a time
        (the new one READY before the old one stops), while the worker limit leaves room for one more."""
        for old in model.ready_workers():
            used = sum(len(m.live_workers()) for m in self.models.values())
            if model.removed or self.models.get(model.name) is not model or used >= self.worker_limit:
                return
            new = self._start_worker(model)
            while new.state == WorkerState.STARTING and not new.stop_event.is_set():  # bounded: a start has a timeout
                await asyncio.sleep(0.1)
            if new.state not in (WorkerState.READY, WorkerState.BUSY):
                return
            log.info("%s W-%s replaces W-%s: it runs the measured kernel set", model.name, new.id, old.id)
            old.stop_event.set()
            model.notify()
        from mmsctl.engine.kernels import reset_started

        reset_started(model.name, mkldnn)  # every worker now runs the measured set
        self.publish()

    # -- workers ---------------------------------------------------------------------------
    def _measure_kernels(self, model: Model) -> None:
        """A model whose workers started with MXNet's default (no remembered kernel choice) or an unsure choice
        (measured on a busy machine, or at the margin) is measured now, in the background; workers started
        afterwards take the faster set, and the running ones are replaced where it differs."""
        from mmsctl.engine.kernels import measure_later, started_with

        loop = asyncio.get_running_loop()

        def measured(choice: Any) -> None:  # in the measuring thread
            # the running workers have MXNet's default (on), or an earlier, unsure measurement's set
            if choice is not None and choice.mkldnn is not None and started_with(model.name) != [choice.mkldnn]:
                with contextlib.suppress(RuntimeError):  # the loop is closed: the server has stopped
                    loop.call_soon_threadsafe(
                        lambda: asyncio.ensure_future(self._replace_workers(model, choice.mkldnn)))

        line = measure_later(model.name, measured)
        if line is None:
            return
        self.notes.append(line)
        self._update_state(notes=list(self.notes))

    def _gpu_for_next_worker(self) -> Optional[int]:
        if self.config.number_of_gpu <= 0:
            return None
        gpu = self._gpu_next % self.config.number_of_gpu
        self._gpu_next += 1
        return gpu

    def _start_worker(self, model: Model, delay: float = 0.0) -> Worker:
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
        self._measure_kernels(model)
        self.publish()  # the kernel set its workers run with (predict's warm path matches it)
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
            self._reject_queued(model, f"Model {model.name} was unregistered")
            return
        missing = model.min_workers - len(model.live_workers())
        if crashed and missing > 0:
            delay = BACK_OFF[min(model.count_failure(), len(BACK_OFF) - 1)]
            log.info("%s: %d worker(s) to restart in %d s (exit %d in a row)", model.name, missing, delay,
                     model.failures)
            for _ in range(missing):
                self._start_worker(model, delay)
        if not model.serving():
            self._reject_queued(model, self._unavailable(model))

    @staticmethod
    def _unavailable(model: Model) -> str:
        message = f"No worker is available to serve request for model: {model.name}"
        if model.start_failed and model.last_error:
            message += f" (its workers fail to start: {model.last_error})"
        return message

    def _reject_queued(self, model: Model, message: str) -> None:
        while True:
            try:
                job = model.queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            model.queue.task_done()
            job.answer(ResponseItem.error(503, "ServiceUnavailableException", message))

    def _check_worker_limit(self, model: Model, wanted: int) -> None:
        """Refuse (400) a worker range that would take the server over ``worker_limit``.

        Every model holds its ``maxWorkers`` (autoscaling may start that many), so the sum over
        all models never passes the limit, however the requests come.
        """
        from mmsctl.server.errors import BadRequest

        others = sum(max(m.min_workers, m.max_workers) for m in self.models.values() if m is not model)
        if others + wanted > self.worker_limit:
            raise BadRequest(
                f"Cannot run {wanted} workers for model {model.name}: the server runs at most "
                f"{self.worker_limit} workers in all (worker_limit) and other models hold {others}.")

    async def scale(self, model: Model, min_workers: int, max_workers: int) -> None:
        """Set the worker range and start or stop workers to reach ``min_workers``.

        Raises:
            BadRequest: the range would take the server over its worker limit.
        """
        self._check_worker_limit(model, max(min_workers, max_workers))
        model.set_range(min_workers, max_workers)
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

    async def unregister(self, name: str, timeout: float) -> None:
        """Remove a model: no new jobs, queued ones answered (until *timeout*), workers stopped."""
        model = self.get(name)
        del self.models[name]
        from mmsctl.engine.kernels import forget_started

        forget_started(name)
        self.publish()
        self.startup_models.discard(name)
        await self._drain_model(model, timeout)
        log.info("Model %s unregistered.", name)

    async def _drain_model(self, model: Model, timeout: float) -> None:
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
        """Answer everything queued or in flight (bounded by *timeout*), then stop every worker.

        The models stay listed (describe shows the queues going down) until they are drained.
        """
        models = list(self.models.values())
        await asyncio.gather(*(self._drain_model(m, timeout) for m in models))
        self.models.clear()

    # -- autoscaling -----------------------------------------------------------------------
    def autoscale(self) -> None:
        """Between min and max workers, follow the queue: grow when it backs up, shrink when idle."""
        now = time.monotonic()
        for model in self.models.values():
            if model.max_workers <= model.min_workers:
                continue
            live = len(model.live_workers())
            pending = model.pending()
            if pending > 0:
                model.busy(now)
            if pending > 2 * max(live, 1) * model.batch_size and live < model.max_workers:
                log.info("autoscale %s: %d queued, %d workers -> +1", model.name, pending, live)
                self._start_worker(model)
            elif pending == 0 and live > model.min_workers and now - model.idle_since > 30:
                log.info("autoscale %s: idle, %d workers -> -1", model.name, live)
                self._stop_workers(model, 1)
                model.busy(now)

    # -- predictions -----------------------------------------------------------------------
    def enqueue(self, model: Model, item: RequestItem, *more: RequestItem) -> Job:
        """Queue one request (with *more*: several, for one handler call); raise ServiceUnavailable when no
        worker can take it or the queue is full."""
        from mmsctl.server.errors import ServiceUnavailable

        if not model.serving():
            raise ServiceUnavailable(self._unavailable(model) + ".")
        loop = asyncio.get_running_loop()
        job = Job(item, loop.create_future(), time.perf_counter(), more=more)  # the clock Worker.serve times with
        try:
            model.enqueue(job)
        except asyncio.QueueFull:
            raise ServiceUnavailable(
                f"No worker is available to serve request for model: {model.name}. "
                "Consider increasing job queue size.",
                retry_after=1,
            ) from None
        return job

    async def predict(self, model: Model, item: RequestItem) -> ResponseItem:
        """Queue one request and wait for its answer; a request whose client leaves leaves the queue."""
        return (await self.predict_together(model, [item]))[0]

    async def predict_together(self, model: Model, items: list[RequestItem]) -> list[ResponseItem]:
        """Queue *items* as one job (the handler gets them in one call) and wait for their answers."""
        job = self.enqueue(model, *items)
        try:
            await job.future
        except asyncio.CancelledError:
            model.withdraw(job)
            raise
        return job.answers

    def enqueue_all(self, model: Model, groups: list[list[RequestItem]]) -> list[Job]:
        """Queue each group as one job; if one cannot be queued, those already queued leave again and the
        ServiceUnavailable is raised."""
        jobs: list[Job] = []
        try:
            for group in groups:
                jobs.append(self.enqueue(model, *group))
        except BaseException:
            for job in jobs:
                model.withdraw(job)
            raise
        return jobs

    async def predict_all(self, model: Model, groups: list[list[RequestItem]]) -> list[ResponseItem]:
        """Every group through the model's queue, each one handler call, answered together in order (the client
        leaving withdraws them all)."""
        if len(groups) == 1:
            return await self.predict_together(model, groups[0])
        tasks = [asyncio.ensure_future(self.predict_together(model, group)) for group in groups]
        try:
            answers = await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
        return [answer for group in answers for answer in group]
