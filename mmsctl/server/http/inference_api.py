"""MMS 1.1's inference API: ``/ping``, ``/predictions/{model}[/{version}]``, the legacy ``/{model}/predict``
and the API description on ``OPTIONS /`` (SageMaker's ``/invocations``: :mod:`~mmsctl.server.http.invocations`).

Routes, status codes and bodies follow MMS's ``InferenceRequestHandler``; a per-model
``/ping/{model}`` is mmsctl's addition (docs/server.md).
"""

from __future__ import annotations

from aiohttp import web

from mmsctl.engine.protocol import Parameter
from mmsctl.server import openapi
from mmsctl.server.errors import ServiceUnavailable
from mmsctl.server.http.admission import Traffic
from mmsctl.server.http.bodies import FORMS, MULTIPART, body_parameters, media_type, multipart_parameters, read_body, \
    request_item
from mmsctl.server.http.calls import Call, Outcome, Prediction, Whole, WholeRequest, answer
from mmsctl.server.http.middleware import MODEL
from mmsctl.server.http.replies import Reply, as_response, json_reply, json_response, status_response
from mmsctl.server.workers.manager import ModelManager
from mmsctl.server.workers.model import Model

__all__ = ["InferenceApi", "prediction_call"]


def prediction_call(model: Model, request: WholeRequest, max_request_size: int) -> Outcome:
    """A prediction of *model* from its whole request (the query's parameters, then a form's fields or the
    raw body)."""
    content_type = request.headers.get("content-type")
    mime = media_type(content_type)
    if mime == MULTIPART:
        return _form_prediction(model, request, content_type or "", max_request_size)
    parameters = body_parameters(mime, request.body) if mime in FORMS else [Parameter("body", request.body, mime)]
    return Prediction(model, request_item(request.request_id, request.query, request.headers, parameters))


async def _form_prediction(model: Model, request: WholeRequest, content_type: str, max_request_size: int) -> Call:
    fields = await multipart_parameters(content_type, request.body, max_request_size)
    return Prediction(model, request_item(request.request_id, request.query, request.headers, fields))


class InferenceApi:
    """The inference routes over one ModelManager."""

    def __init__(self, manager: ModelManager, traffic: Traffic, max_request_size: int) -> None:
        self.manager = manager
        self.traffic = traffic
        self.max_request_size = max_request_size

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

    def ping_reply(self) -> Reply:
        """``/ping``'s answer, on both paths."""
        status, code = self.health()
        return json_reply({"status": status}, code)

    def health(self) -> tuple[str, int]:
        """``/ping``'s status text and code."""
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
        return as_response(self.ping_reply())

    async def ping_model(self, request: web.Request) -> web.Response:
        model = self.manager.get(request.match_info["model"], request.match_info.get("version"))
        request[MODEL] = model.name
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
        request[MODEL] = model.name
        outcome = prediction_call(model, Whole(request, await read_body(request)), self.max_request_size)
        return as_response(await answer(self.manager, outcome, self.max_request_size))
