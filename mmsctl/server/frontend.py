"""The HTTP front end: MMS 1.1's inference, management and metrics APIs on aiohttp.

Routes, status codes, error bodies and JSON shapes follow MMS's Java front end
(InferenceRequestHandler, ManagementRequestHandler). Deliberate differences are
listed in docs/server.md (stricter query validation, per-model ``/ping/{model}``,
extra describe fields, 401 for a bad token).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from pathlib import Path
from typing import Any, Awaitable, Callable, Optional

from aiohttp import web

from mmsctl.engine.protocol import Parameter, RequestItem, ResponseItem
from mmsctl.error_body import error_body
from mmsctl.server import openapi
from mmsctl.server.config import ServerConfig
from mmsctl.server.errors import (
    ApiException, BadRequest, InternalServerError, InvalidKey, MethodNotAllowed,
    RequestTooLarge, ResourceNotFound, ServiceUnavailable,
)
from mmsctl.server.metrics import ServerMetrics
from mmsctl.server.store import resolve_archive, served_spec
from mmsctl.server.supervisor import Model, ModelManager

__all__ = ["Frontend"]

log = logging.getLogger("mmsctl.server")
access_log = logging.getLogger("mmsctl.access")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(data: Any, status: int = 200, reason: Optional[str] = None) -> web.Response:
    body = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    return web.Response(status=status, reason=reason, text=body, content_type="application/json")


def _status(message: str, status: int = 200, reason: Optional[str] = None) -> web.Response:
    return _json({"status": message}, status, reason)


def _error(status: int, type_: str, message: str) -> web.Response:
    return web.Response(status=status, body=error_body(status, type_, message), content_type="application/json")


# -- query parameters ---------------------------------------------------------------------------
def _int_param(params: Any, key: str, default: int, minimum: Optional[int] = 0) -> int:
    """An integer query value; unlike MMS (which silently uses the default) a bad one is a 400."""
    value = params.get(key)
    if value is None or value == "":
        return default
    try:
        number = int(str(value).strip())
    except ValueError:
        raise BadRequest(f"Parameter {key} must be an integer, got {value!r}.") from None
    if minimum is not None and number < minimum:
        raise BadRequest(f"Parameter {key} must be >= {minimum}, got {number}.")
    return number


def _bool_param(params: Any, key: str, default: bool) -> bool:
    value = params.get(key)
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise BadRequest(f"Parameter {key} must be true or false, got {value!r}.")


def _timeout_param(params: Any, key: str, default_seconds: int) -> int:
    """MMS's ``response_timeout`` is in minutes (it multiplies by 60); ``30s`` gives seconds."""
    value = params.get(key)
    if value is None or value == "":
        return default_seconds
    text = str(value).strip().lower()
    if text.endswith("s") and text[:-1].isdigit():
        seconds = int(text[:-1])
    else:
        seconds = 60 * _int_param(params, key, 0, minimum=None)
        if seconds < 0:
            return default_seconds
    if seconds <= 0:
        raise BadRequest(f"Parameter {key} must be positive, got {value!r}.")
    return seconds


class Frontend:
    """Builds the three aiohttp applications around one ModelManager."""

    def __init__(self, config: ServerConfig, manager: ModelManager, metrics: ServerMetrics) -> None:
        self.config = config
        self.manager = manager
        self.metrics = metrics
        self.tokens = config.api_keys()
        self.draining = False
        self.in_flight = 0

    # -- middleware --------------------------------------------------------------------------
    def _middleware(self, api: str) -> Any:
        token = self.tokens.get(api)

        @web.middleware
        async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
            request_id = str(uuid.uuid4())
            request["request_id"] = request_id
            request["model"] = ""
            started = time.monotonic()
            self.in_flight += 1
            try:
                if token and not request.path.startswith("/ping") and not self._authorised(request, token):
                    raise InvalidKey("Token Authorization failed. Token either incorrect, expired, or not provided correctly")
                length = request.content_length
                if length is not None and length > self.config.max_request_size:
                    raise RequestTooLarge(f"Request body of {length} bytes exceeds max_request_size "
                                          f"({self.config.max_request_size} bytes).")
                response = await handler(request)
            except ApiException as exc:
                response = _error(exc.status, exc.type_name, exc.message)
                if exc.retry_after:
                    response.headers["Retry-After"] = str(exc.retry_after)
                if exc.status == 401:
                    response.headers["WWW-Authenticate"] = "Bearer"
            except web.HTTPRequestEntityTooLarge:
                response = _error(413, "RequestEntityTooLargeException",
                                  f"Request body exceeds max_request_size ({self.config.max_request_size} bytes).")
            except web.HTTPMethodNotAllowed:
                exc2 = MethodNotAllowed()
                response = _error(exc2.status, exc2.type_name, exc2.message)
            except web.HTTPNotFound:
                exc3 = ResourceNotFound()
                response = _error(exc3.status, exc3.type_name, exc3.message)
            except web.HTTPException as exc:
                response = _error(exc.status, "BadRequestException" if exc.status < 500 else "InternalServerException",
                                  exc.reason)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - never leak a traceback to a client
                log.exception("unhandled error on %s %s", request.method, request.path)
                response = _error(500, "InternalServerException", f"{type(exc).__name__}: {exc}")
            finally:
                self.in_flight -= 1
            response.headers["x-request-id"] = request_id
            self.metrics.count_request(api, request["model"], response.status)
            if access_log.isEnabledFor(logging.INFO):
                access_log.info('%s "%s %s" %s %.1fms', request.remote, request.method, request.path_qs,
                                response.status, (time.monotonic() - started) * 1000)
            return response

        return middleware

    @staticmethod
    def _authorised(request: web.Request, token: str) -> bool:
        import hmac

        header = request.headers.get("Authorization", "")
        scheme, _, value = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip(), token)

    # -- applications ------------------------------------------------------------------------
    def _app(self, api: str) -> web.Application:
        # The body limit is checked by us (413 with an MMS body); aiohttp's own is a backstop.
        return web.Application(middlewares=[self._middleware(api)],
                               client_max_size=self.config.max_request_size + 1, handler_args={})

    def inference_app(self) -> web.Application:
        app = self._app("inference")
        r = app.router
        r.add_route("OPTIONS", "/", self.describe_inference_api)
        r.add_route("GET", "/api-description", self.describe_inference_api)
        r.add_route("*", "/ping", self.ping)
        r.add_route("GET", "/ping/{model}", self.ping_model)
        r.add_route("OPTIONS", "/predictions/{model}", self.model_api)
        r.add_route("*", "/predictions/{model}", self.predictions)
        r.add_route("*", "/predictions/{model}/{version}", self.predictions)
        r.add_route("*", "/invocations", self.invocations)
        r.add_route("*", "/models/{model}/invoke", self.invocations)
        r.add_route("*", "/{model}/predict", self.legacy_predict)
        return app

    def management_app(self) -> web.Application:
        app = self._app("management")
        r = app.router
        r.add_route("OPTIONS", "/", self.describe_management_api)
        r.add_route("GET", "/models", self.list_models)
        r.add_route("POST", "/models", self.register)
        r.add_route("GET", "/models/{model}", self.describe)
        r.add_route("GET", "/models/{model}/{version}", self.describe)
        r.add_route("PUT", "/models/{model}", self.scale)
        r.add_route("PUT", "/models/{model}/{version}", self.scale)
        r.add_route("DELETE", "/models/{model}", self.unregister)
        r.add_route("DELETE", "/models/{model}/{version}", self.unregister)
        return app

    def metrics_app(self) -> web.Application:
        app = self._app("metrics")
        app.router.add_get("/metrics", self.prometheus)
        return app

    # -- inference API -----------------------------------------------------------------------
    async def describe_inference_api(self, request: web.Request) -> web.Response:
        return _json(openapi.inference_api(sorted(self.manager.models)))

    async def describe_management_api(self, request: web.Request) -> web.Response:
        return _json(openapi.management_api())

    async def ping(self, request: web.Request) -> web.Response:
        scaled = sum(m.min_workers for m in self.manager.models.values())
        working = sum(len(m.ready_workers()) for m in self.manager.models.values())
        status = "Healthy"
        if 0 < working < scaled:
            status = "Partial Healthy"
        elif working == 0 and scaled > 0:
            status = "Unhealthy"
        return _status(status)

    async def ping_model(self, request: web.Request) -> web.Response:
        model = self.manager.get(request.match_info["model"], request.match_info.get("version"))
        request["model"] = model.name
        ready = len(model.ready_workers())
        if ready == 0:
            raise ServiceUnavailable(f"No worker is ready for model: {model.name}")
        return _status("Healthy" if ready >= model.min_workers else "Partial Healthy")

    async def model_api(self, request: web.Request) -> web.Response:
        model = self.manager.get(request.match_info["model"], request.match_info.get("version"))
        return _json(openapi.model_api(model.name))

    async def predictions(self, request: web.Request) -> web.StreamResponse:
        return await self._predict(request, request.match_info["model"], include_query=False)

    async def legacy_predict(self, request: web.Request) -> web.StreamResponse:
        return await self._predict(request, request.match_info["model"], include_query=True)

    async def invocations(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info.get("model") or request.query.get("model_name") \
            or request.headers.get("model_name") or request.headers.get("X-Model-Name")
        if not name and len(self.manager.startup_models) == 1:
            name = next(iter(self.manager.startup_models))
        if not name:
            raise BadRequest("Parameter model_name is required.")
        return await self._predict(request, name, include_query=True)

    async def _predict(self, request: web.Request, name: str, include_query: bool) -> web.StreamResponse:
        model = self.manager.get(name, request.match_info.get("version"))
        request["model"] = model.name
        if self.draining:
            raise ServiceUnavailable("The server is shutting down.", retry_after=1)
        item = await self._request_item(request, include_query)
        future = self.manager.submit(model, item)
        result: ResponseItem = await future
        return self._response(result)

    @staticmethod
    def _response(item: ResponseItem) -> web.Response:
        resp = web.Response(status=item.status, body=item.body, reason=item.reason)
        if item.content_type:
            resp.headers["Content-Type"] = item.content_type
        else:
            resp.headers.popall("Content-Type", None)
        for key, value in item.headers.items():
            resp.headers[key] = value
        return resp

    async def _request_item(self, request: web.Request, include_query: bool) -> RequestItem:
        params: list[Parameter] = []
        if include_query:
            params.extend(Parameter(k, v) for k, v in request.query.items())
        headers = {k.lower(): v for k, v in request.headers.items()}
        content_type = request.headers.get("Content-Type")
        mime = content_type.split(";")[0].strip().lower() if content_type else None
        if mime in ("multipart/form-data", "application/x-www-form-urlencoded"):
            try:
                form = await request.post()
            except ValueError as exc:
                raise BadRequest(f"Invalid form data: {exc}") from None
            for key, value in form.items():
                if isinstance(value, web.FileField):
                    params.append(Parameter(key, value.file.read(), value.content_type))
                else:
                    params.append(Parameter(key, str(value)))
        else:
            body = await request.read()
            params.append(Parameter("body", body, mime))
        return RequestItem(request["request_id"], params, headers)

    # -- management API ----------------------------------------------------------------------
    async def _params(self, request: web.Request) -> Any:
        content_type = (request.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if content_type == "application/json" and request.can_read_body:
            try:
                data = await request.json()
            except ValueError:
                raise BadRequest("Invalid JSON body.") from None
            if not isinstance(data, dict):
                raise BadRequest("The JSON body must be an object.")
            merged = dict(request.query)
            merged.update({k: v for k, v in data.items() if v is not None})
            return merged
        return request.query

    async def list_models(self, request: web.Request) -> web.Response:
        q = request.query
        limit = _int_param(q, "limit", 100, minimum=None)
        token = _int_param(q, "next_page_token", 0, minimum=None)
        if limit > 100 or limit < 0:
            limit = 100
        token = max(token, 0)
        names = sorted(self.manager.models)
        last = token + limit
        body: dict[str, Any] = {}
        if last > len(names):
            last = len(names)
        else:
            body["nextPageToken"] = str(last)
        body["models"] = [{"modelName": n, "modelUrl": self.manager.models[n].url} for n in names[token:last]]
        return _json(body)

    async def register(self, request: web.Request) -> web.Response:
        p = await self._params(request)
        url = p.get("url")
        if not url:
            raise BadRequest("Parameter url is required.")
        url = str(url)
        runtime = p.get("runtime")
        if runtime is not None and str(runtime).lower() not in ("python", "python2", "python3"):
            raise BadRequest(f"Invalid RuntimeType value: {runtime}")
        batch_size = _int_param(p, "batch_size", 1, minimum=1)
        max_batch_delay = _int_param(p, "max_batch_delay", 100, minimum=0)
        initial_workers = _int_param(p, "initial_workers", self.config.default_workers_per_model, minimum=0)
        synchronous = _bool_param(p, "synchronous", True)
        response_timeout = _timeout_param(p, "response_timeout", self.config.default_response_timeout)
        loop = asyncio.get_running_loop()
        archive = await loop.run_in_executor(None, resolve_archive, url, self.config)
        name = str(p.get("model_name") or archive.model_name or Path(url.rstrip("/")).name.split(".")[0])
        handler = str(p["handler"]) if p.get("handler") else None
        model = Model(name=name, url=url, spec=served_spec(archive, name=name, handler=handler, batch_size=batch_size),
                      version=archive.manifest.model_version or "1.0",
                      runtime=str(runtime).lower() if runtime else archive.manifest.runtime or "python",
                      engine=archive.manifest.engine_name or None, max_batch_delay=max_batch_delay,
                      response_timeout=response_timeout, queue_size=self.config.job_queue_size)
        return await self.add_model(model, initial_workers, synchronous)

    async def add_model(self, model: Model, workers: int, synchronous: bool) -> web.Response:
        """Register *model* and start its workers (used by the API and for start-up models)."""
        self.manager.add(model)
        message = f'Model "{model.name}" registered'
        if workers <= 0:
            return _status(message)
        await self.manager.scale(model, workers, workers)
        if not synchronous:
            return _status("Processing worker updates...", 202)
        error = await self.manager.wait_for_workers(model, workers, self.config.worker_start_timeout)
        if error:
            await self.manager.unregister(model.name, 0)
            raise InternalServerError(f'Failed to start workers for model "{model.name}": {error}')
        return _status("Workers scaled")  # what MMS answers a synchronous register with workers

    async def describe(self, request: web.Request) -> web.Response:
        model = self.manager.get(request.match_info["model"], request.match_info.get("version"))
        request["model"] = model.name
        return _json(self.describe_model(model))

    def describe_model(self, model: Model) -> dict[str, Any]:
        data: dict[str, Any] = {
            "modelName": model.name,
            "modelVersion": model.version,
            "modelUrl": model.url,
        }
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
            "queueStatus": {"pendingRequests": model.queue.qsize(), "capacity": model.queue.maxsize},
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
        min_workers = _int_param(q, "min_worker", 1)
        max_workers = _int_param(q, "max_worker", min_workers)
        if max_workers < min_workers:
            raise BadRequest("max_worker cannot be less than min_worker.")
        synchronous = _bool_param(q, "synchronous", False)
        timeout = _int_param(q, "timeout", int(self.config.worker_start_timeout), minimum=None)
        if timeout < 0:
            timeout = int(self.config.worker_start_timeout)
        model = self.manager.get(request.match_info["model"], request.match_info.get("version"))
        request["model"] = model.name
        await self.manager.scale(model, min_workers, max_workers)
        if not synchronous:
            return _status("Processing worker updates...", 202)
        error = await self.manager.wait_for_workers(model, min_workers, timeout)
        if error is None:
            return _status("Workers scaled")
        if model.last_error and model.failures:
            raise InternalServerError(f"Failed to start workers: {error}")
        return _status("Workers scaling in progress...", 210, "Partial Success")

    async def unregister(self, request: web.Request) -> web.Response:
        name = self.manager.get(request.match_info["model"], request.match_info.get("version")).name
        request["model"] = name
        await self.manager.unregister(name, self.config.unregister_model_timeout)
        return _status(f'Model "{name}" unregistered')

    # -- metrics -----------------------------------------------------------------------------
    async def prometheus(self, request: web.Request) -> web.Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        resp = web.Response(body=self.metrics.exposition())
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp
