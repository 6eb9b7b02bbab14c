"""A small TorchServe-shaped server (aiohttp, real HTTP on loopback) for fast client tests.

It behaves like TorchServe 0.12 where the client must cope: token auth answering
400 ``InvalidKeyException``, describe returning a list, 405 on register/unregister
unless the model API is on, ``nextPageToken`` on every full page, 202 on scale
with workers that become READY over the next describes, and a few knobs to make
it fail (``fail_next`` 503s, ``slow_ping`` seconds).
"""

from __future__ import annotations

import asyncio
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from aiohttp import web

from tests.support._proc import free_port, free_ports


@dataclass
class StandIn:
    management_key: Optional[str] = "mkey"
    inference_key: Optional[str] = "ikey"
    model_api: bool = False
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    fail_next: int = 0
    slow_ping: float = 0.0
    calls: list[tuple[str, str]] = field(default_factory=list)
    inference_url: str = ""
    management_url: str = ""

    def add_model(self, name: str, workers: int = 1, version: str = "1.0") -> None:
        self.models[name] = {"version": version, "target": workers, "ready": workers}

    # --- helpers ---

    def _error(self, code: int, kind: str, message: str) -> web.Response:
        return web.json_response({"code": code, "type": kind, "message": message}, status=code)

    def _auth(self, request: web.Request, key: Optional[str]) -> Optional[web.Response]:
        if key and request.headers.get("Authorization") != f"Bearer {key}":
            return self._error(400, "InvalidKeyException", "Token Authorization failed. Token either incorrect, expired, or not provided correctly")
        return None

    def _describe(self, name: str) -> dict[str, Any]:
        m = self.models[name]
        if m["ready"] < m["target"]:
            m["ready"] += 1  # one more worker comes up per describe
        elif m["ready"] > m["target"]:
            m["ready"] = m["target"]
        workers = [
            {"id": f"900{i}", "startTime": "2026-01-01T00:00:00.000Z", "status": "READY", "memoryUsage": 1000, "pid": 100 + i, "gpu": False}
            for i in range(m["ready"])
        ]
        return {
            "modelName": name, "modelVersion": m["version"], "modelUrl": f"{name}.mar", "runtime": "python",
            "minWorkers": m["target"], "maxWorkers": m["target"], "batchSize": 1, "maxBatchDelay": 100, "workers": workers,
        }

    # --- inference API ---

    async def ping(self, request: web.Request) -> web.Response:
        self.calls.append(("GET", "/ping"))
        if self.slow_ping:
            await asyncio.sleep(self.slow_ping)
        return self._auth(request, self.inference_key) or web.json_response({"status": "Healthy"})

    async def api(self, request: web.Request) -> web.Response:
        return self._auth(request, self.inference_key) or web.json_response(
            {"openapi": "3.0.1", "info": {"title": "TorchServe APIs", "version": "0.12.0"}, "paths": {}}
        )

    async def predict(self, request: web.Request) -> web.Response:
        denied = self._auth(request, self.inference_key)
        if denied:
            return denied
        name = request.match_info["name"]
        if name not in self.models:
            return self._error(404, "ModelNotFoundException", f"Model not found: {name}")
        body = await request.read()
        return web.Response(body=body, content_type="application/octet-stream")

    # --- management API ---

    async def list_models(self, request: web.Request) -> web.Response:
        self.calls.append(("GET", str(request.rel_url)))
        denied = self._auth(request, self.management_key)
        if denied:
            return denied
        if self.fail_next > 0:
            self.fail_next -= 1
            return self._error(503, "ServiceUnavailableException", "busy")
        limit = int(request.query.get("limit", 100))
        start = int(request.query.get("next_page_token", 0))
        names = sorted(self.models)
        page = names[start : start + limit]
        data: dict[str, Any] = {"models": [{"modelName": n, "modelUrl": f"{n}.mar"} for n in page]}
        if len(page) == limit:  # like MMS/TorchServe: a token whenever the page is full
            data["nextPageToken"] = str(start + limit)
        return web.json_response(data)

    async def describe(self, request: web.Request) -> web.Response:
        denied = self._auth(request, self.management_key)
        if denied:
            return denied
        name = request.match_info["name"]
        version = request.match_info.get("version")
        if name not in self.models:
            return self._error(404, "ModelNotFoundException", f"Model not found: {name}")
        if version and version not in ("all", self.models[name]["version"]):
            return self._error(404, "ModelVersionNotFoundException", f"Model version: {version} does not exist for model: {name}")
        return web.json_response([self._describe(name)])

    async def scale(self, request: web.Request) -> web.Response:
        self.calls.append(("PUT", str(request.rel_url)))
        denied = self._auth(request, self.management_key)
        if denied:
            return denied
        name = request.match_info["name"]
        if name not in self.models:
            return self._error(404, "ModelNotFoundException", f"Model not found: {name}")
        self.models[name]["target"] = int(request.query["min_worker"])
        return web.json_response({"status": "Processing worker updates..."}, status=202)

    async def register(self, request: web.Request) -> web.Response:
        self.calls.append(("POST", str(request.rel_url)))
        denied = self._auth(request, self.management_key)
        if denied:
            return denied
        if not self.model_api:
            return self._error(405, "MethodNotAllowedException", "Requested method is not allowed, please refer to API document.")
        name = request.query.get("model_name") or request.query["url"].rsplit("/", 1)[-1].split(".")[0]
        if name in self.models:
            return self._error(409, "ConflictStatusException", f"Model {name} is already registered.")
        self.add_model(name, int(request.query.get("initial_workers", 0)))
        return web.json_response({"status": f'Model "{name}" Version: 1.0 registered with 0 initial workers'})

    async def unregister(self, request: web.Request) -> web.Response:
        self.calls.append(("DELETE", str(request.rel_url)))
        denied = self._auth(request, self.management_key)
        if denied:
            return denied
        if not self.model_api:
            return self._error(405, "MethodNotAllowedException", "Requested method is not allowed, please refer to API document.")
        name = request.match_info["name"]
        if self.models.pop(name, None) is None:
            return self._error(404, "ModelNotFoundException", f"Model not found: {name}")
        return web.json_response({"status": f'Model "{name}" unregistered'})

    def apps(self) -> tuple[web.Application, web.Application]:
        inference = web.Application()
        inference.router.add_get("/ping", self.ping)
        inference.router.add_route("OPTIONS", "/", self.api)
        inference.router.add_post("/predictions/{name}", self.predict)
        inference.router.add_post("/predictions/{name}/{version}", self.predict)
        management = web.Application()
        management.router.add_get("/models", self.list_models)
        management.router.add_post("/models", self.register)
        management.router.add_get("/models/{name}", self.describe)
        management.router.add_get("/models/{name}/{version}", self.describe)
        management.router.add_put("/models/{name}", self.scale)
        management.router.add_put("/models/{name}/{version}", self.scale)
        management.router.add_delete("/models/{name}", self.unregister)
        return inference, management


@contextmanager
def running_standin(standin: Optional[StandIn] = None) -> Iterator[StandIn]:
    """Serve *standin* on two loopback ports in a background thread."""
    standin = standin or StandIn()
    loop = asyncio.new_event_loop()
    runners: list[web.AppRunner] = []
    ports = free_ports(2, pick=free_port)  # below the ephemeral range (see _proc.free_port)

    async def start() -> None:
        for app, port in zip(standin.apps(), ports):
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", port).start()
            runners.append(runner)

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    standin.inference_url = f"http://127.0.0.1:{ports[0]}"
    standin.management_url = f"http://127.0.0.1:{ports[1]}"
    try:
        yield standin
    finally:
        async def stop() -> None:
            for runner in runners:
                await runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
