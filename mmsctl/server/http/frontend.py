"""The HTTP front end: MMS 1.1's inference, management and metrics APIs as three aiohttp applications.

Routes, status codes, error bodies and JSON shapes follow MMS's Java front end; each API
lives in its own module (:mod:`~mmsctl.server.http.inference_api`,
:mod:`~mmsctl.server.http.management_api`), every request passes the same middleware
(:mod:`~mmsctl.server.http.middleware`: ids, tokens, size limit, error bodies). Deliberate
differences are listed in docs/server.md.
"""

from __future__ import annotations

import asyncio
from typing import Callable, Optional

from aiohttp import web

from mmsctl.server.config import ServerConfig
from mmsctl.server.http.admission import Gate, Traffic
from mmsctl.server.http.bodies import BODY_TIMEOUT
from mmsctl.server.http.inference_api import InferenceApi
from mmsctl.server.http.invocations import InvocationsApi
from mmsctl.server.http.lean.connection import LeanServer
from mmsctl.server.http.management_api import ManagementApi
from mmsctl.server.http.middleware import api_middleware
from mmsctl.server.metrics import ServerMetrics
from mmsctl.server.v2.api import V2Api
from mmsctl.server.workers.manager import ModelManager

__all__ = ["Frontend"]


class Frontend:
    """Builds the three aiohttp applications around one ModelManager."""

    def __init__(self, config: ServerConfig, manager: ModelManager, metrics: ServerMetrics, *,
                 record_models: Callable[[], Optional[str]] = lambda: None) -> None:
        self.config = config
        self.metrics = metrics
        self.keys = config.api_keys()  # a token file that does not give both keys stops the start here
        self.traffic = Traffic(max_buffered=config.buffered_bytes_allowed)
        self.manager = manager
        self.inference = InferenceApi(manager, self.traffic, config.max_request_size)
        self.v2 = V2Api(manager, self.traffic, config.max_request_size)
        self.invocations = InvocationsApi(manager, config.max_request_size)
        self.management = ManagementApi(config, manager, record_models)

    def gate(self, api: str) -> Gate:
        """The admission rules of *api* (its token, the size limit, the shared traffic)."""
        return Gate(api, self.keys.get(api), self.config.max_request_size, self.traffic)

    def _app(self, api: str) -> web.Application:
        middleware = api_middleware(self.gate(api), self.metrics)
        # A declared length over the limit is refused by the middleware before anything is read; a chunked
        # body is cut by aiohttp at exactly max_request_size bytes (413 too).
        app = web.Application(middlewares=[middleware], client_max_size=self.config.max_request_size,
                              handler_args={})
        app[BODY_TIMEOUT] = self.config.request_body_timeout
        return app

    def inference_app(self) -> web.Application:
        app = self._app("inference")
        self.v2.add_routes(app.router)  # before MMS's catch-all /{model}/predict
        self.invocations.add_routes(app.router)
        self.inference.add_routes(app.router)
        return app

    def management_app(self) -> web.Application:
        app = self._app("management")
        self.management.add_routes(app.router)
        return app

    def lean_inference(self, fallback: Callable[[], asyncio.Protocol]) -> LeanServer:
        """The inference API's connections: its lean routes served on the lean path
        (:mod:`~mmsctl.server.http.lean`), the rest handed to *fallback* (the inference app's protocol)."""
        return LeanServer(self.manager, self.gate("inference"), self.metrics,
                          header_timeout=self.config.request_header_timeout,
                          body_timeout=self.config.request_body_timeout, ping=self.inference.ping_reply,
                          fallback=fallback)

    def metrics_app(self) -> web.Application:
        app = self._app("metrics")
        app.router.add_get("/metrics", self.prometheus)
        return app

    async def prometheus(self, request: web.Request) -> web.Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        resp = web.Response(body=self.metrics.exposition())
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp
