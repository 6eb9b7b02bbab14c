"""A small real HTTP server on loopback with answers the load generator must tell apart."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Iterator

import pytest
from aiohttp import web
from tests.support.app_thread import serving_app


@dataclass
class Answers:
    """Where the server listens, and what it has seen."""

    url: str = ""
    seen: dict[str, int] = field(default_factory=dict)


def _app(answers: Answers) -> web.Application:
    async def predict(request: web.Request) -> web.StreamResponse:
        name = request.match_info["model"]
        await request.read()
        n = answers.seen[name] = answers.seen.get(name, 0) + 1
        if name == "ok":
            return web.Response(body=b"ok")
        if name == "flaky":  # every third request is refused with 503
            return web.Response(status=503, body=b"busy") if n % 3 == 0 else web.Response(body=b"ok")
        if name == "slow":
            await asyncio.sleep(0.3)
            return web.Response(body=b"late")
        if name == "reset":  # drop the connection without an answer
            assert request.transport is not None
            request.transport.abort()
            await asyncio.sleep(0.05)
            return web.Response(body=b"never sent")
        if name == "close":  # answer, then close the connection (Connection: close)
            return web.Response(body=b"bye", headers={"Connection": "close"})
        return web.json_response({"code": 404, "type": "ModelNotFoundException", "message": "no"}, status=404)

    app = web.Application()
    app.router.add_post("/predictions/{model}", predict)
    return app


@pytest.fixture(scope="module")
def answers() -> Iterator[Answers]:
    """The server runs in its own thread and event loop for the whole module."""
    result = Answers()
    with serving_app(_app(result)) as url:
        result.url = url
        yield result
