"""`mmsctl top`'s HttpSource over httpx's MockTransport: the client's async face, its tokens and encoding."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from mmsctl.client.contexts import Context
from mmsctl.tui.source import HttpSource
from tests.client.faces import INFERENCE, MANAGEMENT, METRICS, Server, error_body, key_file

pytestmark = pytest.mark.anyio

_METRICS_TEXT = """\
# TYPE mmsctl_requests_total counter
mmsctl_requests_total{model="a?b",code="200",api="inference"} 4
# TYPE mmsctl_workers gauge
mmsctl_workers{model="a?b",state="READY"} 1
"""


def _describe(name: str) -> dict[str, Any]:
    return {"modelName": name, "modelVersion": "1.0", "minWorkers": 1, "maxWorkers": 1, "batchSize": 1,
            "workers": [{"id": "9000", "status": "READY", "pid": 42}]}


class FakeServer(Server):
    """One mmsctl-shaped server on three mock hosts; the model list is served in pages of one."""

    def __init__(self, names: list[str], tokens: list[str]) -> None:
        super().__init__(default=self.answer)
        self.names, self.tokens = names, tokens

    def answer(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.url.host == "inference.test" and path == "/ping":
            return httpx.Response(200, json={"status": "Healthy"})
        if request.url.host == "metrics.test" and path == "/metrics":
            return httpx.Response(200, text=_METRICS_TEXT)
        if path == "/models":
            token = request.url.params.get("next_page_token")
            index = self.tokens.index(token) + 1 if token else 0
            data: dict[str, Any] = {"models": [{"modelName": self.names[index], "modelUrl": "x.mar"}]}
            if index + 1 < len(self.names):
                data["nextPageToken"] = self.tokens[index]
            return httpx.Response(200, json=data)
        if path.startswith("/models/"):
            name = path[len("/models/"):]
            if name in self.names:
                return httpx.Response(200, json=_describe(name))
            return error_body(404, "ModelNotFoundException", f"Model not found: {name}")
        return httpx.Response(404)


def _source(server: Server, token_file: Any = None, **kwargs: Any) -> HttpSource:
    context = Context("mock", INFERENCE, MANAGEMENT, METRICS, token_file)
    return HttpSource(context, transport=server.transport, describe_every=0, **kwargs)


async def test_pages_and_names_that_need_encoding(tmp_path) -> None:
    names = ["a?b", "c d#e", "f%g/é"]
    tokens = ["p&1=x y", "p/2+%"]
    server = FakeServer(names, tokens)
    source = _source(server)
    try:
        first = await source.fetch()
        second = await source.fetch()
    finally:
        await source.aclose()
    assert first.server.reachable and first.server.kind == "mmsctl", first.server
    assert [r.name for r in second.models] == names
    assert all(r.workers_ready == 1 and r.min_workers == 1 for r in second.models)
    assert second.model("a?b").requests_per_s == 0.0  # two scrapes, same counter
    sent_tokens = [r.url.params.get("next_page_token") for r in server.requests if r.url.path == "/models"]
    assert sent_tokens[:3] == [None, *tokens]
    described = {r.url.raw_path.decode() for r in server.requests if r.url.path.startswith("/models/")}
    assert described == {"/models/a%3Fb", "/models/c%20d%23e", "/models/f%25g%2F%C3%A9"}


async def test_each_api_gets_its_own_key_and_metrics_the_management_key(tmp_path) -> None:
    server = FakeServer(["m"], [])
    source = _source(server, key_file(tmp_path / "key_file.json"))
    try:
        snapshot = await source.fetch()
    finally:
        await source.aclose()
    assert snapshot.server.reachable
    seen = {(r.url.host, r.url.path): r.headers.get("authorization") for r in server.requests}
    assert seen == {
        ("inference.test", "/ping"): "Bearer I-key",
        ("management.test", "/models"): "Bearer M-key",
        ("management.test", "/models/m"): "Bearer M-key",
        ("metrics.test", "/metrics"): "Bearer M-key",
    }


async def test_a_refused_token_is_an_unreachable_snapshot_with_the_clients_words() -> None:
    server = Server(default=lambda request: error_body(400, "InvalidKeyException", "Token Authorization failed"))
    source = _source(server)
    try:
        snapshot = await source.fetch()
    finally:
        await source.aclose()
    assert not snapshot.server.reachable
    assert snapshot.server.error is not None
    assert snapshot.server.error.startswith("authentication failed on ")
    assert "--token-file" not in snapshot.server.error


async def test_an_unhealthy_server_is_still_polled() -> None:
    base = FakeServer(["m"], [])

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/ping":
            return httpx.Response(503, json={"status": "Unhealthy"})
        return base.answer(request)

    source = _source(Server(default=answer))
    try:
        snapshot = await source.fetch()
    finally:
        await source.aclose()
    assert snapshot.server.reachable and snapshot.server.health == "Unhealthy" and not snapshot.server.healthy
    assert [r.name for r in snapshot.models] == ["m"]


async def test_a_metrics_port_that_fails_is_tried_again_after_30_s() -> None:
    now = [1000.0]
    base = FakeServer(["m"], [])

    def answer(request: httpx.Request) -> Any:
        if request.url.host == "metrics.test":
            return httpx.ConnectError("[Errno 111] Connection refused")
        return base.answer(request)

    server = Server(default=answer)
    source = _source(server, clock=lambda: now[0])
    try:
        first = await source.fetch()
        now[0] += 10
        await source.fetch()
        now[0] += 25
        await source.fetch()
    finally:
        await source.aclose()
    assert first.server.reachable and not first.server.metrics
    assert first.model("m").requests_per_s is None  # unknown, never 0
    assert sum(1 for r in server.requests if r.url.host == "metrics.test") == 2  # at 1000 s and 1035 s


async def test_a_model_gone_between_list_and_describe_is_not_an_error() -> None:
    server = FakeServer(["m", "gone"], ["1"])
    original = server.answer

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/models/gone":
            return error_body(404, "ModelNotFoundException", "Model not found: gone")
        return original(request)

    source = _source(Server(default=answer))
    try:
        snapshot = await source.fetch()
    finally:
        await source.aclose()
    assert snapshot.server.error is None
    assert [(r.name, r.workers_total) for r in snapshot.models] == [("m", 1), ("gone", None)]


async def test_actions_go_through_the_management_api(tmp_path) -> None:
    server = Server(default=lambda request: httpx.Response(
        202 if request.method == "PUT" else 200, json={"status": "done"}))
    source = _source(server, key_file(tmp_path / "key_file.json"))
    try:
        assert await source.scale("a b", 2, version="1.0") == "a b: scaling to 2 worker(s) - done"
        assert await source.register("x.mar", model_name="x?", initial_workers=0) == "register x?: done"
        assert await source.unregister("a b") == "unregister a b: done"
    finally:
        await source.aclose()
    sent = [(r.method, r.url.raw_path.decode(), r.headers.get("authorization")) for r in server.requests]
    assert sent == [
        ("PUT", "/models/a%20b/1.0?min_worker=2&max_worker=2&synchronous=false", "Bearer M-key"),
        ("POST", "/models?url=x.mar&model_name=x%3F&initial_workers=0&synchronous=false", "Bearer M-key"),
        ("DELETE", "/models/a%20b", "Bearer M-key"),
    ]


async def test_worker_changes_are_described_at_once_and_health_can_be_asked_less_often() -> None:
    """As on a fleet's members: a slow round-robin and /ping every 5 s, yet a model whose worker count
    in the metrics changes is described on that very poll."""
    now = [1000.0]
    workers = [1]
    base = FakeServer(["m"], [])

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.host == "metrics.test":
            return httpx.Response(200, text=_METRICS_TEXT.replace("a?b", "m").replace(
                'state="READY"} 1', f'state="READY"}} {workers[0]}'))
        return base.answer(request)

    server = Server(default=answer)
    source = HttpSource(Context("mock", INFERENCE, MANAGEMENT, METRICS), transport=server.transport,
                        describe_every=5, describe_spread=4, health_every=5, clock=lambda: now[0])

    def counted(path: str) -> int:
        return sum(1 for r in server.requests if r.url.path == path)

    try:
        await source.fetch()  # new: described; pinged
        now[0] += 1
        second = await source.fetch()
        assert (counted("/models/m"), counted("/ping")) == (1, 1)  # not due; health from 1 s ago
        assert second.server.health == "Healthy"
        workers[0] = 2
        now[0] += 1
        third = await source.fetch()
        assert counted("/models/m") == 2 and third.model("m").workers_total == 2
        now[0] += 4
        await source.fetch()
        assert counted("/ping") == 2
        now[0] += 5  # 9 s since the last describe: the round-robin (5 s x 4) is not there yet
        await source.fetch()
        assert counted("/models/m") == 2
        now[0] += 2
        await source.fetch()
        assert counted("/models/m") == 3
    finally:
        await source.aclose()
