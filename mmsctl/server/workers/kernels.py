"""The kernel set each model's workers run, measured in the background on this server.

A model whose workers started with MXNet's default (no remembered choice) or an unsure choice is measured once a
worker is READY, in the background (a start never waits for it: docs/kernels.md); workers started afterwards take
the faster set, and the running ones are replaced where it differs, one at a time (the new one READY before the
old one stops), while ``worker_limit`` leaves room for one more.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from mmsctl.server.workers.registry import Registry
from mmsctl.server.workers.supervision import Supervisor
from mmsctl.server.workers.model import Model, WorkerState

__all__ = ["KernelWatch"]

log = logging.getLogger("mmsctl.server")


class KernelWatch:
    """Measures a model's kernel sets after its workers start, and replaces the workers that run the slower."""

    def __init__(self, registry: Registry, supervisor: Supervisor, worker_limit: int) -> None:
        self.registry = registry
        self.supervisor = supervisor
        self.worker_limit = worker_limit

    def measure(self, model: Model) -> None:
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
        if line is not None:
            self.registry.note(line)

    async def _replace_workers(self, model: Model, mkldnn: bool) -> None:
        """Replace the workers that run the other kernel set now that *mkldnn* measured faster, one at a time
        (the new one READY before the old one stops), while the worker limit leaves room for one more."""
        for old in model.ready_workers():
            used = sum(len(m.live_workers()) for m in self.registry.models.values())
            if model.removed or self.registry.models.get(model.name) is not model or used >= self.worker_limit:
                return
            new = self.supervisor.start_worker(model)
            while new.state == WorkerState.STARTING and not new.stop_event.is_set():  # bounded: a start has a timeout
                await asyncio.sleep(0.1)
            if new.state not in (WorkerState.READY, WorkerState.BUSY):
                return
            log.info("%s W-%s replaces W-%s: it runs the measured kernel set", model.name, new.id, old.id)
            old.stop_event.set()
            model.notify()
        from mmsctl.engine.kernels import reset_started

        reset_started(model.name, mkldnn)  # every worker now runs the measured set
        self.registry.publish()
