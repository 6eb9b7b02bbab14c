"""All models of one server and what is done with them: register, scale, predict, unregister, drain.

The one face the HTTP side and the server's lifecycle use, over the jobs it delegates: the models by name and
``state.json`` (:mod:`~mmsctl.server.workers.registry`), each worker's life
(:mod:`~mmsctl.server.workers.supervision`), the worker ranges within ``worker_limit``
(:mod:`~mmsctl.server.workers.scaling`), the kernel sets measured in the background
(:mod:`~mmsctl.server.workers.kernels`) and a model's last requests (:mod:`~mmsctl.server.workers.drain`). Every
model has one bounded queue; a request whose client leaves is taken out of it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Optional

from mmsctl.engine.protocol import RequestItem, ResponseItem
from mmsctl.server.config import ServerConfig
from mmsctl.server.errors import ApiException, InternalServerError, ServiceUnavailable
from mmsctl.server.workers.batching import Job
from mmsctl.server.workers.drain import drain
from mmsctl.server.workers.kernels import KernelWatch
from mmsctl.server.workers.model import Model
from mmsctl.server.workers.registry import Registry
from mmsctl.server.workers.scaling import Scaling
from mmsctl.server.workers.supervision import Supervisor

#: The 503 of a request the server's drain could not finish (queued or still running at the drain's end).
_STOPPED = "The server is shutting down and did not finish this request within its drain timeout"

__all__ = ["ModelManager"]

log = logging.getLogger("mmsctl.server")


class ModelManager:
    """All models of one server, and what is done with them."""

    def __init__(self, config: ServerConfig, metrics: Any) -> None:
        self.config = config
        self.metrics = metrics
        self.registry = Registry(config)
        self.supervisor = Supervisor(config, metrics, self.registry)
        self.scaling = Scaling(self.registry, self.supervisor, config.workers_allowed)
        kernels = KernelWatch(self.registry, self.supervisor, config.workers_allowed)
        self.supervisor.on_ready = kernels.measure
        from mmsctl.engine.kernels import defer_measurement

        defer_measurement()  # a start never waits for a kernel measurement (workers/kernels.py)

    @property
    def models(self) -> dict[str, Model]:
        return self.registry.models

    @property
    def startup_models(self) -> set[str]:
        return self.registry.startup_models

    @property
    def notes(self) -> list[str]:
        return self.registry.notes

    @property
    def worker_limit(self) -> int:
        """The most workers of all models together (``worker_limit``), fixed at start."""
        return self.scaling.worker_limit

    def get(self, name: str, version: Optional[str] = None) -> Model:
        """The model called *name*; with *version*, only if that is its version (else 404)."""
        return self.registry.get(name, version)

    # -- registration ----------------------------------------------------------------------
    async def register(self, model: Model, workers: int, *, synchronous: bool, timeout: float) -> bool:
        """Add *model* and start *workers* workers; with *synchronous*, wait until they are READY.

        Returns:
            False while the workers are still starting (not *synchronous*), else True.

        Raises:
            ConflictError: a model by that name exists.
            InternalServerError: the workers could not start (the model is removed again).
        """
        self.scaling.check_limit(model, workers)
        self.registry.add(model)
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
            await self.discard(model)
            raise self.workers_failed(model, error)

    @staticmethod
    def workers_failed(model: Model, error: str) -> ApiException:
        """MMS's answer when workers cannot start: 500 ``Failed to start workers`` (507 when the load ran out of
        memory), with why in the body's ``cause``."""
        status = model.last_error_status if error == model.last_error else 500
        return InternalServerError("Failed to start workers", cause=f'model "{model.name}": {error}', status=status)

    @staticmethod
    async def launched(model: Model) -> None:
        """Wait until every worker of *model* has its process (or failed to get one): a server starting up
        lets its start-up workers import mxnet while it sets up its own APIs."""
        waits = [asyncio.ensure_future(w.launched.wait()) for w in model.workers]
        if waits:
            await asyncio.wait(waits)

    async def scale(self, model: Model, min_workers: int, max_workers: int) -> None:
        """Set the worker range and start or stop workers to reach ``min_workers`` (BadRequest: the range would take
        the server over ``worker_limit``)."""
        await self.scaling.scale(model, min_workers, max_workers)

    async def wait_for_workers(self, model: Model, count: int, timeout: float) -> Optional[str]:
        """Wait until *count* workers are READY; return an error text if they cannot be."""
        return await self.scaling.wait_for_workers(model, count, timeout)

    def autoscale(self) -> None:
        """Between min and max workers, follow the queue (the server's main loop calls this every second)."""
        self.scaling.autoscale()

    async def unregister(self, name: str, timeout: float) -> None:
        """Remove a model: no new jobs, queued and in-flight ones answered within *timeout* (one still running
        then is answered 503, its worker killed), workers stopped."""
        await self._retire(self.registry.remove(name), time.monotonic() + timeout)

    async def discard(self, model: Model) -> None:
        """Remove *model* again, its register failed, unless it is gone already: a DELETE that came while its
        register waited has drained it, and its name may be a newer model's, which stays."""
        if self.registry.discard(model):
            await self._retire(model, time.monotonic())

    async def _retire(self, model: Model, deadline: float) -> None:
        await drain(self.supervisor, model, deadline)
        log.info("Model %s unregistered.", model.name)

    def flush(self) -> None:
        """No batch of any model waits for more requests from now on (the server stops: see :meth:`Model.flush`)."""
        for model in self.models.values():
            model.flush()

    async def shutdown(self, deadline: float) -> None:
        """Answer everything queued or in flight until *deadline* (``time.monotonic()``), then stop every worker:
        what is still running then is answered 503 and its worker killed (see :func:`drain`).

        The models stay listed (describe shows the queues going down) until they are drained.
        """
        models = list(self.models.values())
        await asyncio.gather(*(drain(self.supervisor, m, deadline, _STOPPED) for m in models))
        self.models.clear()

    # -- predictions -----------------------------------------------------------------------
    def enqueue(self, model: Model, item: RequestItem, *more: RequestItem) -> Job:
        """Queue one request (with *more*: several, for one handler call); raise ServiceUnavailable when no
        worker can take it or the queue is full."""
        if not model.serving():
            raise ServiceUnavailable(self.supervisor.unavailable(model) + ".")
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

    async def predict_together(self, model: Model, items: list[RequestItem]) -> list[ResponseItem]:
        """Queue *items* as one job (the handler gets them in one call) and wait for their answers; a request
        whose client leaves leaves the queue."""
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
