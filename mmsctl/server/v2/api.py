"""The Open Inference Protocol (KServe v2) REST API on the inference port, beside MMS's routes.

``GET /v2``, ``/v2/health/live``, ``/v2/health/ready``, ``/v2/models/{name}[/versions/{v}]`` (metadata),
``…/ready`` and ``POST …/infer`` (JSON tensors, or Triton's binary tensor data extension). Every
request passes the same middleware and admission gate as MMS's routes (token, draining, sizes, held
bytes), and every image or request goes through the model's one queue and its workers; errors are
the protocol's ``{"error": "..."}`` bodies (the middleware writes them for any path under ``/v2``).
How tensors map onto a model's handler is :mod:`~mmsctl.server.v2.models`'s.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from aiohttp import web

from mmsctl import __version__
from mmsctl.server import openapi
from mmsctl.server.errors import ServiceUnavailable
from mmsctl.server.http.admission import Traffic
from mmsctl.server.http.bodies import read_body
from mmsctl.server.http.calls import Whole
from mmsctl.server.http.middleware import MODEL
from mmsctl.server.http.replies import as_response
from mmsctl.server.workers.manager import ModelManager
from mmsctl.server.workers.model import Model

__all__ = ["V2Api"]

#: The header that says how long the JSON part of a binary body is (:data:`mmsctl.engine.tensors.HEADER_LENGTH`;
#: the codec, with numpy, loads with the first v2 request, not with the server).
HEADER_LENGTH = "Inference-Header-Content-Length"

#: The protocol extensions this server implements (``GET /v2``).
EXTENSIONS = ["binary_tensor_data", "classification", "model_repository"]


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, body=json.dumps(data, separators=(",", ":")).encode("utf-8"),
                        content_type="application/json")


class V2Api:
    """The v2 routes over one ModelManager."""

    def __init__(self, manager: ModelManager, traffic: Traffic, max_request_size: int) -> None:
        self.manager = manager
        self.traffic = traffic
        self.max_request_size = max_request_size

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/v2", self.server_metadata)
        router.add_route("OPTIONS", "/v2", self.describe_api)
        router.add_get("/v2/api-description", self.describe_api)
        router.add_get("/v2/health/live", self.live)
        router.add_get("/v2/health/ready", self.ready)
        router.add_post("/v2/repository/index", self.repository_index)
        for base in ("/v2/models/{model}", "/v2/models/{model}/versions/{version}"):
            router.add_get(base, self.model_metadata)
            router.add_get(base + "/ready", self.model_ready)
            router.add_post(base + "/infer", self.infer)

    async def describe_api(self, request: web.Request) -> web.Response:
        return _json(openapi.v2_api(sorted(self.manager.models)))

    async def server_metadata(self, request: web.Request) -> web.Response:
        return _json({"name": "mmsctl", "version": __version__, "extensions": EXTENSIONS})

    async def live(self, request: web.Request) -> web.Response:
        return _json({"live": True})

    async def ready(self, request: web.Request) -> web.Response:
        """Ready: not draining, and every start-up model with workers to keep has one READY.

        A model registered later does not count: a load balancer checks this path, and one added by hand
        whose workers fail would otherwise have every member replaced (by members without it).
        """
        if self.traffic.draining:
            raise ServiceUnavailable("The server is shutting down.", retry_after=1)
        startup = self.manager.startup_models
        missing = [m.name for m in self.manager.models.values()
                   if m.name in startup and m.min_workers > 0 and not m.ready_workers()]
        if missing:
            raise ServiceUnavailable(f"No worker is ready for model: {', '.join(sorted(missing))}"[:300])
        return _json({"ready": True})

    def _model(self, request: web.Request) -> Model:
        model = self.manager.get(request.match_info["model"], request.match_info.get("version"))
        request[MODEL] = model.name
        return model

    async def repository_index(self, request: web.Request) -> web.Response:
        """Triton's model repository extension: every registered model, READY or UNAVAILABLE."""
        return _json([{"name": m.name, "version": m.version, "state": "READY" if m.ready_workers() else "UNAVAILABLE"}
                      for m in sorted(self.manager.models.values(), key=lambda m: m.name)])

    async def model_metadata(self, request: web.Request) -> web.Response:
        from mmsctl.server.v2 import models as v2_models

        model = self._model(request)
        sig = v2_models.signature_of(model)
        return _json({
            "name": model.name, "versions": [model.version], "platform": model.engine or model.runtime,
            "inputs": sig.input_metadata(), "outputs": [t.metadata() for t in sig.outputs],
        })

    async def model_ready(self, request: web.Request) -> web.Response:
        model = self._model(request)
        if not model.ready_workers():
            raise ServiceUnavailable(f"No worker is ready for model: {model.name}")
        return _json({"name": model.name, "ready": True})

    async def infer(self, request: web.Request) -> web.Response:
        return await self.infer_model(request, self._model(request), request.match_info.get("version"))

    async def infer_model(self, request: web.Request, model: Model, version: Optional[str] = None) -> web.Response:
        """Answer *request*, an infer request's body, with *model* (SageMaker's ``/invocations`` names it by
        header; *version*: the URL's)."""
        from mmsctl.server.v2.calls import V2Call, infer_outcome

        outcome = infer_outcome(model, version, Whole(request, await read_body(request)), self.max_request_size)
        call = outcome if isinstance(outcome, V2Call) else await outcome
        return as_response(call.reply(await self.manager.predict_all(model, call.groups)))
