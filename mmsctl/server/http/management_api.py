"""MMS 1.1's management API: list, register, describe, scale and unregister models.

Status codes, messages and JSON shapes follow MMS's ``ManagementRequestHandler``
(``Workers scaled``, 202 ``Processing worker updates...``, 210 ``Partial Success``);
describe adds a few fields (docs/server.md).
"""

from __future__ import annotations

import asyncio
import functools
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Optional

from aiohttp import web

from mmsctl.server import openapi
from mmsctl.server.config import ServerConfig
from mmsctl.server.errors import BadRequest, InternalServerError
from mmsctl.server.http.middleware import MODEL
from mmsctl.server.http.params import (
    MAX_BATCH_DELAY_MS,
    MAX_RESPONSE_TIMEOUT,
    MAX_WAIT_SECONDS,
    bool_param,
    int_param,
    params,
)
from mmsctl.server.http.replies import json_response, status_response
from mmsctl.server.store import resolve_archive
from mmsctl.server.workers.manager import ModelManager
from mmsctl.server.workers.model import Model
from mmsctl.server.workers.registry import valid_model_name

if TYPE_CHECKING:
    from mmsctl.archive import ModelArchive

__all__ = ["ManagementApi"]

_RUNTIMES = ("python", "python2", "python3")
#: MMS pages model lists by 100 at most.
_MAX_PAGE = 100


#: A handler a request may name: ``module`` or ``module:function``, Python identifiers only.
_HANDLER = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*)?", re.ASCII)


def _handler_in(archive: ModelArchive, handler: str) -> str:
    """A register ``handler``, only if it names a module inside the archive (never one elsewhere on disk)."""
    if not _HANDLER.fullmatch(handler):
        raise BadRequest(f"Invalid handler {handler[:80]!r}: expected module or module:function.")
    module = Path(*handler.split(":")[0].split("."))
    root = archive.root
    if not ((root / module).with_suffix(".py").is_file() or (root / module / "__init__.py").is_file()):
        raise BadRequest(f"Invalid handler {handler!r}: no module {module.as_posix()}.py in the archive.")
    return handler


def _response_timeout(p: Any, default_seconds: int) -> int:
    """``response_timeout`` in seconds: MMS's minutes (it multiplies by 60), or ``30s`` for seconds.

    Checked once, on the seconds then used: 1 second to a day, else a 400 naming the parameter
    (MMS silently used the default for a negative one).
    """
    value = p.get("response_timeout")
    if value is None or value == "":
        return default_seconds
    text = str(value).strip().lower()
    if text.endswith("s") and not isinstance(value, bool):
        seconds = int_param({"response_timeout": text[:-1] or text}, "response_timeout", 0, minimum=None)
    else:
        seconds = 60 * int_param(p, "response_timeout", 0, minimum=None, maximum=MAX_RESPONSE_TIMEOUT // 60)
    if not 1 <= seconds <= MAX_RESPONSE_TIMEOUT:
        raise BadRequest(f"Parameter response_timeout must be positive and at most {MAX_RESPONSE_TIMEOUT} "
                         f"seconds, got {str(value)[:40]!r}.")
    return seconds


Handler = Callable[[web.Request], Awaitable[web.Response]]


def _completes(handler: Handler) -> Handler:
    """*handler* run to its end even if its client leaves (aiohttp then cancels the request):
    a register, scale or unregister is never left half done."""

    @functools.wraps(handler)
    async def run(request: web.Request) -> web.Response:
        task = asyncio.ensure_future(handler(request))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved even if nobody waits
        return await asyncio.shield(task)

    return run


class ManagementApi:
    """The management routes over one ModelManager."""

    def __init__(self, config: ServerConfig, manager: ModelManager,
                 record_models: Callable[[], Optional[str]] = lambda: None) -> None:
        self.config = config
        self.manager = manager
        #: Publishes the models in state.json; returns what went wrong (an unwritable state folder).
        self.record_models = record_models

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_route("OPTIONS", "/", self.describe_api)
        router.add_route("GET", "/models", self.list_models)
        router.add_route("POST", "/models", _completes(self.register))
        for path in ("/models/{model}", "/models/{model}/{version}"):
            router.add_route("GET", path, self.describe)
            router.add_route("PUT", path, _completes(self.scale))
            router.add_route("DELETE", path, _completes(self.unregister))

    async def describe_api(self, request: web.Request) -> web.Response:
        return json_response(openapi.management_api())

    async def list_models(self, request: web.Request) -> web.Response:
        limit = int_param(request.query, "limit", _MAX_PAGE, minimum=None)
        token = max(int_param(request.query, "next_page_token", 0, minimum=None), 0)
        if limit > _MAX_PAGE or limit < 0:
            limit = _MAX_PAGE
        names = sorted(self.manager.models)
        last = token + limit
        body: dict[str, Any] = {}
        if last > len(names):
            last = len(names)
        else:
            body["nextPageToken"] = str(last)  # MMS sends it whenever a page is full, the last one too
        body["models"] = [{"modelName": n, "modelUrl": self.manager.models[n].url} for n in names[token:last]]
        return json_response(body)

    async def register(self, request: web.Request) -> web.Response:
        p = await params(request)
        url = str(p.get("url") or "").strip()
        if not url:
            raise BadRequest("Parameter url is required.")
        if p.get("model_name"):
            valid_model_name(str(p["model_name"]))
        runtime = p.get("runtime")
        if runtime is not None and str(runtime).lower() not in _RUNTIMES:
            raise BadRequest(f"Invalid RuntimeType value: {runtime}")
        limit = self.manager.worker_limit
        batch_size = int_param(p, "batch_size", 1, minimum=1, maximum=self.config.job_queue_size,
                               over=" (job_queue_size)")
        max_batch_delay = int_param(p, "max_batch_delay", 100, minimum=0, maximum=MAX_BATCH_DELAY_MS)
        workers = int_param(p, "initial_workers", self.config.register_workers, minimum=0,
                            maximum=limit, over=" (worker_limit)")
        synchronous = bool_param(p, "synchronous", True)
        response_timeout = _response_timeout(p, self.config.default_response_timeout)
        archive = await asyncio.get_running_loop().run_in_executor(None, resolve_archive, url, self.config)
        name = valid_model_name(str(p.get("model_name") or archive.model_name or Path(url.rstrip("/")).name.split(".")[0]))
        handler = _handler_in(archive, str(p["handler"])) if p.get("handler") else None
        model = Model.from_archive(
            name, url, archive, handler=handler, default_handler=self.config.default_service_handler,
            batch_size=batch_size,
            runtime=str(runtime).lower() if runtime else None, max_batch_delay=max_batch_delay,
            response_timeout=response_timeout, queue_size=self.config.job_queue_size,
        )
        done = await self.manager.register(model, workers, synchronous=synchronous,
                                           timeout=self.config.worker_start_timeout)
        error = self.record_models()
        if error is not None:  # the server serves on; this model is not kept half-recorded
            await self.manager.discard(model)
            raise InternalServerError(f'Model "{model.name}" was not registered: {error}')
        if workers <= 0:
            return status_response(f'Model "{model.name}" registered')
        if not done:
            return status_response("Processing worker updates...", 202)
        return status_response("Workers scaled")  # what MMS answers a synchronous register with workers

    async def describe(self, request: web.Request) -> web.Response:
        model = self.manager.get(request.match_info["model"], request.match_info.get("version"))
        request[MODEL] = model.name
        return json_response(self._description(model))

    def _description(self, model: Model) -> dict[str, Any]:
        data: dict[str, Any] = {"modelName": model.name, "modelVersion": model.version, "modelUrl": model.url}
        if model.engine:
            data["engine"] = model.engine
        data.update({
            "runtime": model.runtime,
            "minWorkers": model.min_workers,
            "maxWorkers": model.max_workers,
            "batchSize": model.batch_size,
            "maxBatchDelay": model.max_batch_delay,
            "responseTimeout": model.response_timeout,
            "loadedAtStartup": model.name in self.manager.startup_models,
            "queueStatus": {"pendingRequests": model.pending(), "capacity": model.queue.maxsize},
            "workers": [
                {
                    "id": w.id,
                    "startTime": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(w.start_time))
                    + f".{int(w.start_time * 1000) % 1000:03d}Z",
                    "status": w.state.value if w.state.value != "BUSY" else "READY",
                    "gpu": w.gpu_id is not None,
                    "memoryUsage": w.memory(),
                    "pid": w.pid,
                }
                for w in model.workers
            ],
        })
        return data

    async def scale(self, request: web.Request) -> web.Response:
        q = request.query
        limit = self.manager.worker_limit
        min_workers = int_param(q, "min_worker", 1, maximum=limit, over=" (worker_limit)")
        max_workers = int_param(q, "max_worker", min_workers, maximum=limit, over=" (worker_limit)")
        if max_workers < min_workers:
            raise BadRequest("max_worker cannot be less than min_worker.")
        synchronous = bool_param(q, "synchronous", False)
        timeout = int_param(q, "timeout", int(self.config.worker_start_timeout), minimum=0,
                            maximum=MAX_WAIT_SECONDS)
        model = self.manager.get(request.match_info["model"], request.match_info.get("version"))
        request[MODEL] = model.name
        await self.manager.scale(model, min_workers, max_workers)
        if not synchronous:
            return status_response("Processing worker updates...", 202)
        error = await self.manager.wait_for_workers(model, min_workers, timeout)
        if error is None:
            return status_response("Workers scaled")
        if model.last_error and model.failures:
            raise self.manager.workers_failed(model, error)
        return status_response("Workers scaling in progress...", 210, "Partial Success")

    async def unregister(self, request: web.Request) -> web.Response:
        name = self.manager.get(request.match_info["model"], request.match_info.get("version")).name
        request[MODEL] = name
        await self.manager.unregister(name, self.config.unregister_model_timeout)
        self.record_models()  # an unwritable state folder is logged; the model is gone either way
        return status_response(f'Model "{name}" unregistered')
