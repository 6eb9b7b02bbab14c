"""Every number a request sets has a ceiling, checked on the integer that is then used; scaling never
stalls the event loop. Real server, real workers."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import httpx
import pytest

from tests.support.mmsctl_server import ServerInfo, make_handler_archive, make_noop_archive, running_mmsctl_server
from tests.support.waiting import wait_until

LIMIT = 4

#: A handler whose workers stay in ``initialize`` until the file GATE exists.
GATED_HANDLER = '''
import os, time

GATE = {gate!r}

def handle(data, context):
    if data is None:
        deadline = time.monotonic() + 600  # longer than any test keeps it shut
        while not os.path.exists(GATE):
            if time.monotonic() > deadline:
                raise RuntimeError("the gate never opened")
            time.sleep(0.02)
        return None
    return [row.get("body") or b"" for row in data]
'''


@pytest.fixture(scope="module")
def gate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gate") / "open"


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory, gate: Path) -> Iterator[ServerInfo]:
    store = tmp_path_factory.mktemp("store")
    make_noop_archive(store / "noop")
    make_handler_archive(store / "gated", GATED_HANDLER.format(gate=str(gate)), name="gated")
    with running_mmsctl_server(tmp_path_factory.mktemp("srv"), model_store=store, models={"noop": "noop"},
                               extra_config={"worker_limit": LIMIT, "job_queue_size": 50}) as info:
        yield info


def _error(resp: httpx.Response, status: int = 400) -> str:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"code", "type", "message"} and body["code"] == status
    return str(body["message"])


@pytest.mark.parametrize("value", ["99999999999999999999", "1000"])
def test_a_worker_count_over_the_limit_is_a_400_and_the_server_keeps_serving(srv: ServerInfo, value: str) -> None:
    """The request that made the front end loop until the kernel killed it (23 GB)."""
    m = srv.management_url
    message = _error(httpx.put(f"{m}/models/noop", params={"min_worker": value}, timeout=10))
    if len(value) > 18:
        assert message == f"Parameter min_worker must be an integer, got '{value}'."
    else:
        assert message == f"Parameter min_worker must be <= {LIMIT} (worker_limit), got {value}."
    assert httpx.get(f"{srv.inference_url}/ping", timeout=10).json() == {"status": "Healthy"}
    assert len(httpx.get(f"{m}/models/noop", timeout=10).json()["workers"]) == 1


def test_the_limit_counts_the_workers_of_every_model(srv: ServerInfo) -> None:
    m = srv.management_url
    assert httpx.post(f"{m}/models", params={"url": "noop", "model_name": "second", "initial_workers": "0"},
                      timeout=10).status_code == 200
    try:
        message = _error(httpx.put(f"{m}/models/second", params={"min_worker": "1", "max_worker": str(LIMIT)},
                                   timeout=10))
        assert message == (f"Cannot run {LIMIT} workers for model second: the server runs at most {LIMIT} "
                           "workers in all (worker_limit) and other models hold 1.")
        assert httpx.get(f"{m}/models/second", timeout=10).json()["maxWorkers"] == 0  # nothing changed
        message = _error(httpx.post(f"{m}/models", params={"url": "noop", "model_name": "third",
                                                           "initial_workers": str(LIMIT)}, timeout=10))
        assert "Cannot run 4 workers for model third" in message
        assert httpx.get(f"{m}/models/third", timeout=10).status_code == 404
    finally:
        httpx.delete(f"{m}/models/second", timeout=30)


@pytest.mark.parametrize("params, fragment", [
    ({"min_worker": "1_000"}, "must be an integer, got '1_000'"),
    ({"min_worker": "\u0663"}, "must be an integer"),  # ARABIC-INDIC DIGIT THREE: int() would take it
    ({"max_worker": "9"}, f"must be <= {LIMIT} (worker_limit)"),
    ({"timeout": "86400000", "synchronous": "true"}, "Parameter timeout must be <= 3600"),
])
def test_scale_numbers_are_checked_once(srv: ServerInfo, params: dict[str, str], fragment: str) -> None:
    assert fragment in _error(httpx.put(f"{srv.management_url}/models/noop", params=params, timeout=10))


@pytest.mark.parametrize("params, fragment", [
    ({"initial_workers": "5"}, f"Parameter initial_workers must be <= {LIMIT} (worker_limit), got 5."),
    ({"batch_size": "51"}, "Parameter batch_size must be <= 50 (job_queue_size), got 51."),
    ({"max_batch_delay": "99999999999"}, "Parameter max_batch_delay must be <= 600000"),
    ({"response_timeout": "99999999999999999s"}, "at most 86400 seconds"),
    ({"response_timeout": "1441"}, "Parameter response_timeout must be <= 1440"),
])
def test_register_numbers_have_ceilings(srv: ServerInfo, params: dict[str, str], fragment: str) -> None:
    resp = httpx.post(f"{srv.management_url}/models", params={"url": "noop", "model_name": "n2", **params},
                      timeout=10)
    assert fragment in _error(resp)
    assert httpx.get(f"{srv.management_url}/models/n2", timeout=10).status_code == 404


def test_ping_answers_while_a_scale_is_still_starting_workers(srv: ServerInfo, gate: Path) -> None:
    """Spawning workers never holds the event loop: requests are answered while they load."""
    m = srv.management_url
    resp = httpx.post(f"{m}/models", params={"url": "gated", "initial_workers": "0"}, timeout=10)
    assert resp.status_code == 200, resp.text
    try:
        assert httpx.put(f"{m}/models/gated", params={"min_worker": "3"}, timeout=10).status_code == 202
        def all_loading() -> bool:
            workers = httpx.get(f"{m}/models/gated", timeout=10).json()["workers"]
            return len(workers) == 3 and all(w["pid"] for w in workers)

        wait_until(all_loading, timeout=30, what="every gated worker process up and loading", interval=0.02)
        assert httpx.get(f"{srv.inference_url}/ping", timeout=10).status_code == 200
        assert httpx.post(f"{srv.inference_url}/predictions/noop", content=b"meanwhile", timeout=10).text == "meanwhile"
        workers = httpx.get(f"{m}/models/gated", timeout=10).json()["workers"]
        assert [w["status"] for w in workers] == ["STARTING"] * 3  # the answers came while they loaded
        gate.touch()
        resp = httpx.put(f"{m}/models/gated", params={"min_worker": "3", "synchronous": "true"}, timeout=60)
        assert resp.status_code == 200, resp.text
    finally:
        gate.touch()
        httpx.delete(f"{m}/models/gated", timeout=60)
