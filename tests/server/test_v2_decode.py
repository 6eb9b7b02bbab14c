"""Large v2 JSON bodies cost the event loop nothing: an input the model cannot take, or data that does not fill
its shape, is refused before any element is converted (``check_input``, the codec's ``InputCheck``), and a body
with :data:`~mmsctl.server.http.calls.OFF_LOOP_BYTES` of JSON or more is decoded on an executor thread on every
path (``infer_outcome``, ``invocation_call``), while the loop goes on answering."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Iterator

import httpx
import pytest

from mmsctl.server.http.calls import OFF_LOOP_BYTES
from tests.server.test_v2_lean import _manager
from tests.support.leaks import LEAK
from tests.support.mmsctl_server import ServerInfo, make_noop_archive, running_mmsctl_server

#: A BYTES element long enough that its request's JSON is decoded off the loop.
BIG = "k" * (OFF_LOOP_BYTES + 1000)


def _body(name: str, datatype: str, shape: list[int], data: list[Any]) -> bytes:
    return json.dumps({"inputs": [{"name": name, "datatype": datatype, "shape": shape, "data": data}]},
                      separators=(",", ":")).encode()


def _request(body: bytes) -> Any:
    headers = {"host": "x", "content-type": "application/json"}
    raw = [(k.encode(), v.encode()) for k, v in headers.items()]
    return SimpleNamespace(request_id="req-1", query=(), headers=headers, raw_headers=raw, body=body)


def test_an_input_the_model_cannot_take_is_refused_before_its_data_is_converted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mmsctl.engine import tensors
    from mmsctl.server.errors import ApiException
    from mmsctl.server.v2 import calls

    converted: list[int] = []
    real = tensors._json_data
    monkeypatch.setattr(tensors, "_json_data", lambda values, *a: converted.append(len(values)) or real(values, *a))
    manager, _ = _manager(tmp_path)
    refused = [("echo", _body("x", "INT64", [200_000], [1] * 200_000), "unknown input 'x'"),
               ("pair", _body("body", "INT64", [200_000], [1] * 200_000), "unknown input 'body'"),
               ("echo", _body("body", "INT64", [200_000], [1] * 199_999), "199999 elements of data for shape")]
    for name, body, message in refused:
        with pytest.raises(ApiException) as caught:
            calls.infer_call(manager.get(name), None, _request(body), 1 << 30)
        assert caught.value.status == 400 and message in caught.value.message, caught.value.message
    assert converted == []
    calls.infer_call(manager.get("echo"), None, _request(_body("body", "BYTES", [1], ["ok"])), 1 << 30)
    assert converted == [1]  # what the model takes is converted


def _blocking_decode(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], threading.Event, threading.Event]:
    """The codec made to record the thread it runs on and to wait, once started, until the test lets it go."""
    from mmsctl.server.v2 import infer

    threads: list[int] = []
    started, go = threading.Event(), threading.Event()
    real = infer.decode_request

    def decode(*args: Any) -> Any:
        threads.append(threading.get_ident())
        started.set()
        go.wait(30)
        return real(*args)

    monkeypatch.setattr(infer, "decode_request", decode)
    return threads, started, go


async def _off_loop(make: Callable[[], Any], started: threading.Event, go: threading.Event) -> Any:
    """The outcome *make* gives, awaited while the loop goes on: it must be pending, its decode started and
    not finished, while this coroutine runs."""
    outcome = make()
    assert asyncio.isfuture(outcome), outcome
    for _ in range(3000):
        if started.is_set():
            break
        await asyncio.sleep(0.01)
    assert started.is_set() and not outcome.done()  # the loop runs while the decode is held
    go.set()
    return await outcome


@pytest.mark.parametrize("route", ["v2", "invocations"])
def test_a_large_json_body_is_decoded_off_the_loop_and_a_small_one_on_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, route: str) -> None:
    from mmsctl.server.http.invocations import invocation_call
    from mmsctl.server.v2.calls import V2Call, infer_outcome

    manager, _ = _manager(tmp_path)
    model = manager.get("echo")
    threads, started, go = _blocking_decode(monkeypatch)

    def make(body: bytes) -> Any:
        request = _request(body)
        return infer_outcome(model, None, request, 1 << 30) if route == "v2" else \
            invocation_call(model, request, 1 << 30)

    async def main() -> int:
        call = await _off_loop(lambda: make(_body("body", "BYTES", [1], [BIG])), started, go)
        assert isinstance(call, V2Call) and call.groups[0][0].parameters[0].value == BIG.encode()
        assert isinstance(make(_body("body", "BYTES", [1], ["small"])), V2Call)  # made there and then
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert len(threads) == 2 and threads[0] != loop_thread and threads[1] == loop_thread


@pytest.fixture(scope="module")
def big_srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    store = tmp_path_factory.mktemp("store")
    make_noop_archive(store / "echo", name="echo")
    with running_mmsctl_server(tmp_path_factory.mktemp("srv"), model_store=store, models={"echo": "echo"},
                               extra_config={"max_request_size": 4 * OFF_LOOP_BYTES}) as info:
        yield info


@pytest.mark.parametrize("path", ["/v2/models/echo/infer", "/v2/models/echo/infer?path=full", "/invocations"])
def test_large_json_bodies_are_answered_on_every_path(big_srv: ServerInfo, path: str) -> None:
    """The lean path, aiohttp's (a query) and /invocations each answer a large body decoded off the loop: the
    model's answer, or the protocol's 400 for an input it does not take."""
    sent = {"Content-Type": "application/json"}
    with httpx.Client(timeout=60) as client:
        served = client.post(big_srv.inference_url + path, content=_body("body", "BYTES", [1], [BIG]), headers=sent)
        refused = client.post(big_srv.inference_url + path, headers=sent,
                              content=_body("x", "INT64", [300_000], [1] * 300_000))
        assert client.get(big_srv.inference_url + "/ping").status_code == 200
    assert served.status_code == 200 and served.json()["outputs"][0]["data"] == [BIG], served.text[:300]
    assert refused.status_code == 400 and set(refused.json()) == {"error"}, refused.text[:300]
    assert "unknown input 'x'" in refused.json()["error"] and not LEAK.search(refused.json()["error"])
