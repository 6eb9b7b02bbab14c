"""MMS 1.1's inference API: ``/ping``, ``/predictions/{model}[/{version}]``, the legacy ``/{model}/predict``
and the API description on ``OPTIONS /`` (SageMaker's ``/invocations``: :mod:`~mmsctl.server.http.invocations`).

Routes, status codes and bodies follow MMS's ``InferenceRequestHandler``; a per-model
``/ping/{model}`` is mmsctl's addition (docs/server.md).
"""

from __future__ import annotations

from aiohttp import web

from mmsctl.server import openapi
from mmsctl.server.http.admission import Traffic
from mmsctl.server.errors import ServiceUnavailable
from mmsctl.server.http.aio import json_response, request_item, status_response, web_response
from mmsctl.server.workers.manager import ModelManager

__all__ = ["InferenceApi"]


class InferenceApi:
    """The inference routes over one ModelManager."""

    def __init__(self, manager: ModelManager, traffic: Traffic) -> None:
        self.manager = manager
        self.traffic = traffic

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_route("OPTIONS", "/", self.describe_api)
        router.add_route("GET", "/api-description", self.describe_api)
        router.add_route("*", "/ping", self.ping)
        router.add_route("GET", "/ping/{model}", self.ping_model)
        router.add_route("OPTIONS", "/predictions/{model}", self.model_api)
        router.add_route("*", "/predictions/{model}", self.predictions)
        router.add_route("*", "/predictions/{model}/{version}", self.predictions)
        router.add_route("*", "/{model}/predict", self.legacy_predict)

    async def describe_api(self, request: web.Request) -> web.Response:
        return json_response(openapi.inference_api(sorted(self.manager.models)))

    def health(self) -> tuple[str, int]:
        """``/ping``'s status text and code (the fast path answers it too)."""
        if self.traffic.draining:  # load balancers: take this server out
            return "Draining", 503
        models = self.manager.models.values()
        scaled = sum(m.min_workers for m in models)
        working = sum(len(m.ready_workers()) for m in models)
        status = "Healthy"
        if 0 < working < scaled:
            status = "Partial Healthy"
        elif working == 0 and scaled > 0:
            status = "Unhealthy"
        if self.manager.config.strict_ping and any(m.min_workers > 0 and not m.ready_workers() for m in models):
            return "Unhealthy", 503  # SageMaker reads only the code: no traffic until every model can answer
        return status, 200

    async def ping(self, request: web.Request) -> web.Response:
        return status_response(*self.health())

    async def ping_model(self, request: web.Request) -> web.Response:
        model = self.manager.get(request.match_info["model"], request.match_info.get("version"))
        request["model"] = model.name
        ready = len(model.ready_workers())
        if ready == 0:
            raise ServiceUnavailable(f"No worker is ready for model: {model.name}")
        return status_response("Healthy" if ready >= model.min_workers else "Partial Healthy")

    async def model_api(self, request: web.Request) -> web.Response:
        model = self.manager.get(request.match_info["model"], request.match_info.get("version"))
        return json_response(openapi.model_api(model.name))

    async def predictions(self, request: web.Request) -> web.StreamResponse:
        return await self._predict(request, request.match_info["model"])

    async def legacy_predict(self, request: web.Request) -> web.StreamResponse:
        return await self._predict(request, request.match_info["model"])

    async def _predict(self, request: web.Request, name: str) -> web.StreamResponse:
        model = self.manager.get(name, request.match_info.get("version"))
        request["model"] = model.name
        item = await request_item(request)
        return web_response(await self.manager.predict(model, item))
