"""One request sequence sent to real MMS 1.1.11 and to our server; the answers must match.

Deliberate differences (documented in docs/server.md) are left out of the
comparison: extra describe fields, worker ids/pids/memory, start times.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import httpx
import pytest

from tests.support.fixtures_mms import mms_server  # noqa: F401  (fixture)
from tests.support.mms import MmsInstance
from tests.support.mmsctl_server import running_mmsctl_server
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.interop, pytest.mark.xdist_group("mms")]

DESCRIBE_KEYS = ("modelName", "modelUrl", "runtime", "minWorkers", "maxWorkers", "batchSize",
                 "maxBatchDelay", "loadedAtStartup")


def _answer(resp: httpx.Response) -> tuple[int, Any]:
    try:
        body: Any = resp.json()
    except ValueError:
        return resp.status_code, resp.content
    if isinstance(body, dict) and {"code", "type", "message"} <= set(body):
        assert resp.headers.get("x-request-id"), "MMS error answers carry x-request-id"
    if isinstance(body, dict) and "workers" in body:
        body = {k: body.get(k) for k in DESCRIBE_KEYS} | {"workers": len(body["workers"])}
    return resp.status_code, body


def _wait_until_predicts(inference_url: str, model: str) -> None:
    """MMS says READY about a second before a worker serves: poll with a real prediction."""
    def predicts() -> bool:
        try:
            return httpx.post(f"{inference_url}/predictions/{model}", content=b"warm", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(predicts, timeout=60, what=f"{model} answering on {inference_url}", interval=0.3)


def _sequence(inference: str, management: str) -> list[tuple[str, tuple[int, Any]]]:
    out: list[tuple[str, tuple[int, Any]]] = []

    def step(label: str, call: Callable[[], httpx.Response]) -> None:
        out.append((label, _answer(call())))

    t = 120
    step("ping", lambda: httpx.get(f"{inference}/ping", timeout=t))
    step("register", lambda: httpx.post(f"{management}/models",
                                        params={"url": "noop.mar", "model_name": "noop", "initial_workers": "1"},
                                        timeout=t))
    _wait_until_predicts(inference, "noop")
    step("register again", lambda: httpx.post(f"{management}/models",
                                              params={"url": "noop.mar", "model_name": "noop"}, timeout=t))
    step("scale to 2", lambda: httpx.put(f"{management}/models/noop",
                                         params={"min_worker": "2", "synchronous": "true"}, timeout=t))
    step("describe", lambda: httpx.get(f"{management}/models/noop", timeout=t))
    step("scale async", lambda: httpx.put(f"{management}/models/noop", params={"min_worker": "1"}, timeout=t))
    step("max < min", lambda: httpx.put(f"{management}/models/noop",
                                        params={"min_worker": "3", "max_worker": "2"}, timeout=t))
    step("list limit 1", lambda: httpx.get(f"{management}/models", params={"limit": "1"}, timeout=t))
    step("list", lambda: httpx.get(f"{management}/models", timeout=t))
    step("predict", lambda: httpx.post(f"{inference}/predictions/noop", content=b"hello", timeout=t))
    step("legacy predict", lambda: httpx.post(f"{inference}/noop/predict", content=b"hi", timeout=t))
    step("unknown model", lambda: httpx.post(f"{inference}/predictions/nope", content=b"x", timeout=t))
    step("unknown path", lambda: httpx.get(f"{inference}/not/a/path", timeout=t))
    step("describe unknown", lambda: httpx.get(f"{management}/models/nope", timeout=t))
    step("register without url", lambda: httpx.post(f"{management}/models", params={"model_url": "x"}, timeout=t))
    step("register missing", lambda: httpx.post(f"{management}/models", params={"url": "missing.mar"}, timeout=t))
    step("unregister", lambda: httpx.delete(f"{management}/models/noop", timeout=t))
    step("unregister again", lambda: httpx.delete(f"{management}/models/noop", timeout=t))
    step("predict after unregister", lambda: httpx.post(f"{inference}/predictions/noop", content=b"x", timeout=t))
    return out


@pytest.mark.slow
def test_same_answers_as_mms(mms_server: MmsInstance, tmp_path: Path) -> None:  # noqa: F811
    """The sequence against this test process's one MMS (noop.mar in its store) and our server on the same store."""
    left = httpx.get(f"{mms_server.management_url}/models", timeout=60).json()["models"]
    assert left == [], f"an earlier test left models registered on the shared MMS: {left}"
    theirs = _sequence(mms_server.inference_url, mms_server.management_url)
    with running_mmsctl_server(tmp_path / "ours", model_store=mms_server.model_store) as ours:
        mine = _sequence(ours.inference_url, ours.management_url)
    differences = [(label, a, b) for (label, a), (_, b) in zip(theirs, mine) if a != b]
    assert not differences, "\n".join(f"{label}:\n  MMS:    {a}\n  mmsctl: {b}" for label, a, b in differences)
