"""A small Open Inference Protocol (KServe v2) server written from the protocol's published OpenAPI document,
not from mmsctl's code: kserve/open-inference-protocol, ``specification/protocol/open_inference_rest.yaml``
(routes ``/v2/health/live``, ``/v2/health/ready``, ``/v2/`` (server metadata: name, version, extensions),
``/v2/models/{name}[/versions/{v}]`` (metadata: name, versions, platform, inputs/outputs with name, datatype,
shape), ``…/ready`` and ``POST …/infer`` (``inference_request`` in, ``inference_response`` or
``{"error"}`` out); ``specification/protocol/inference_rest.md`` makes the version optional).
Infer also takes Triton's binary tensor data extension (``Inference-Header-Content-Length``; a BYTES
element is a 4-byte little-endian length and its bytes), parsed here by hand so the client's own codec
is not what checks it. Answers are JSON (no binary outputs).

Models: ``echo`` (BYTES ``raw`` in, BYTES ``echo`` out: the element it got), ``sleepy`` (the same, but
not ready: ``…/ready`` answers 503). Everything it saw is counted in :class:`V2StandIn`.
"""

from __future__ import annotations

import json
import struct
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from aiohttp import web
from tests.support.app_thread import serving_app

__all__ = ["V2StandIn", "running_v2_standin"]

_MODELS: dict[str, dict[str, Any]] = {
    name: {"name": name, "versions": ["1"], "platform": "standin",
           "inputs": [{"name": "raw", "datatype": "BYTES", "shape": [-1]}],
           "outputs": [{"name": "echo", "datatype": "BYTES", "shape": [-1]}]}
    for name in ("echo", "sleepy")
}


@dataclass
class V2StandIn:
    """Where it listens, and what it has seen (path → count; infer bodies that used the binary extension)."""

    url: str = ""
    seen: dict[str, int] = field(default_factory=dict)
    binary_infers: int = 0
    last_elements: list[bytes] = field(default_factory=list)


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def _elements(spec: dict[str, Any], blob: bytes) -> list[bytes]:
    """A BYTES tensor's elements from its binary blob (length-prefixed) or its JSON ``data``."""
    if blob:
        out, pos = [], 0
        while pos < len(blob):
            (size,) = struct.unpack_from("<I", blob, pos)
            out.append(blob[pos + 4:pos + 4 + size])
            pos += 4 + size
        return out
    return [str(v).encode() for v in spec.get("data") or []]


def _parse(body: bytes, header_length: Optional[str], state: V2StandIn) -> list[bytes]:
    """The first input's elements; ValueError for a body the protocol does not allow."""
    length = int(header_length) if header_length is not None else len(body)
    if header_length is not None:
        state.binary_infers += 1
    head = json.loads(body[:length])
    if not isinstance(head, dict) or not isinstance(head.get("inputs"), list) or not head["inputs"]:
        raise ValueError("inference_request needs inputs")
    spec = head["inputs"][0]
    for key in ("name", "shape", "datatype"):
        if key not in spec:
            raise ValueError(f"request_input needs {key}")
    if spec["datatype"] != "BYTES":
        raise ValueError(f"input {spec['name']}: expected BYTES, got {spec['datatype']}")
    size = (spec.get("parameters") or {}).get("binary_data_size")
    blob = body[length:length + int(size)] if size is not None else b""
    if size is None and "data" not in spec:
        raise ValueError("request_input needs data")
    return _elements(spec, blob)


def _app(state: V2StandIn) -> web.Application:
    @web.middleware
    async def count(request: web.Request, handler: Any) -> web.StreamResponse:
        key = f"{request.method} {request.path}"
        state.seen[key] = state.seen.get(key, 0) + 1
        return await handler(request)

    async def live(_r: web.Request) -> web.Response:
        return web.Response(status=200)

    async def server(_r: web.Request) -> web.Response:
        return web.json_response({"name": "standin", "version": "0.1", "extensions": ["binary_tensor_data"]})

    def model_of(request: web.Request) -> dict[str, Any]:
        meta = _MODELS.get(request.match_info["name"])
        version = request.match_info.get("version")
        if meta is None or (version is not None and version not in meta["versions"]):
            raise web.HTTPNotFound(text=json.dumps({"error": "unknown model"}), content_type="application/json")
        return meta

    async def metadata(request: web.Request) -> web.Response:
        return web.json_response(model_of(request))

    async def ready(request: web.Request) -> web.Response:
        return web.Response(status=503 if model_of(request)["name"] == "sleepy" else 200)

    async def infer(request: web.Request) -> web.Response:
        meta = model_of(request)
        body = await request.read()
        try:
            elements = _parse(body, request.headers.get("Inference-Header-Content-Length"), state)
        except (ValueError, KeyError, TypeError, struct.error) as exc:
            return _error(400, str(exc))
        state.last_elements = elements
        out = [e.decode("utf-8", "replace") for e in elements]
        return web.json_response({"model_name": meta["name"], "model_version": "1", "outputs": [
            {"name": "echo", "datatype": "BYTES", "shape": [len(out)], "data": out}]})

    app = web.Application(middlewares=[count])
    app.router.add_get("/v2/health/live", live)
    app.router.add_get("/v2/health/ready", live)
    app.router.add_get("/v2", server)
    app.router.add_get("/v2/", server)
    for prefix in ("/v2/models/{name}", "/v2/models/{name}/versions/{version}"):
        app.router.add_get(prefix, metadata)
        app.router.add_get(prefix + "/ready", ready)
        app.router.add_post(prefix + "/infer", infer)
    return app


@contextmanager
def running_v2_standin() -> Iterator[V2StandIn]:
    """The stand-in on 127.0.0.1 (a free port), in its own thread and event loop."""
    state = V2StandIn()
    with serving_app(_app(state), "v2 stand-in") as url:
        state.url = url
        yield state
