"""Models that cannot serve: a handler that fails to load, one stuck in ``initialize``, one that prints
without end. Predictions get a 503 in bounded time, never a hang; DELETE never waits for a stuck
handler; restarts back off as MMS's do; the log stays bounded."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any, Iterator

import httpx
import psutil
import pytest

from mmsctl.server.workers.supervision import BACK_OFF
from tests.support.mmsctl_server import ServerInfo, make_handler_archive, make_noop_archive, running_mmsctl_server
from tests.support.waiting import wait_until, wait_until_async

STUCK_HANDLER = '''
import time
from pathlib import Path

def handle(data, context):
    if data is None:
        for _ in range(600):  # initialize never returns (in any test's time)
            time.sleep(1)
        raise RuntimeError("stuck for 10 minutes: nobody stopped this worker")
    return data
'''

LOG_MAX = 64 * 1024


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    store = tmp_path_factory.mktemp("store")
    make_noop_archive(store / "noop")
    make_noop_archive(store / "broken", name="broken", failing=True)
    make_handler_archive(store / "stuck", STUCK_HANDLER, name="stuck")
    with running_mmsctl_server(tmp_path_factory.mktemp("srv"), model_store=store, models={"noop": "noop"},
                               extra_config={"log_max_size": LOG_MAX, "log_backups": 2}) as info:
        yield info


def _describe(srv: ServerInfo, model: str) -> dict[str, Any]:
    resp = httpx.get(f"{srv.management_url}/models/{model}", timeout=10)
    assert resp.status_code == 200, resp.text
    return resp.json()  # type: ignore[no-any-return]


def _register_idle(srv: ServerInfo, name: str) -> None:
    resp = httpx.post(f"{srv.management_url}/models", params={"url": name, "initial_workers": "0"}, timeout=30)
    assert resp.status_code == 200, resp.text


def test_a_model_whose_workers_cannot_start_answers_503_and_backs_off(srv: ServerInfo) -> None:
    m, inf = srv.management_url, srv.inference_url
    _register_idle(srv, "broken")
    try:
        assert httpx.put(f"{m}/models/broken", params={"min_worker": "1"}, timeout=10).status_code == 202
        # queued behind the first load, or refused after it failed: a 503 either way, never a hang
        for _ in range(3):
            resp = httpx.post(f"{inf}/predictions/broken", content=b"x", timeout=30)
            assert resp.status_code == 503, resp.text
            assert resp.json()["type"] == "ServiceUnavailableException"
            assert "its workers fail to start" in resp.json()["message"]
            assert "missing weights" in resp.json()["message"]
        assert _describe(srv, "broken")["queueStatus"]["pendingRequests"] == 0
        # restarts follow MMS's back-off: 1 s, 1 s, 2 s, ...
        pattern = re.compile(r"broken: 1 worker\(s\) to restart in (\d+) s \(exit (\d+) in a row\)")
        waits = wait_until(lambda: [m.groups() for m in pattern.finditer(srv.log_text())][:3]
                           if len(pattern.findall(srv.log_text())) >= 3 else None, timeout=30, what="three restarts",
                           interval=0.05)
        assert [(int(d), int(n)) for d, n in waits] == [(BACK_OFF[1], 1), (BACK_OFF[2], 2), (BACK_OFF[3], 3)]
        assert httpx.get(f"{inf}/ping", timeout=10).status_code == 200  # the server is fine
    finally:
        assert httpx.delete(f"{m}/models/broken", timeout=30).status_code == 200


def test_a_client_that_leaves_leaves_the_queue_and_delete_does_not_wait_for_initialize(srv: ServerInfo) -> None:
    m, inf = srv.management_url, srv.inference_url
    _register_idle(srv, "stuck")
    assert httpx.put(f"{m}/models/stuck", params={"min_worker": "1"}, timeout=10).status_code == 202
    pid = wait_until(lambda: next((w["pid"] for w in _describe(srv, "stuck")["workers"] if w["pid"]), None),
                     timeout=30, what="a loading worker", interval=0.05)

    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{inf}/predictions/stuck", content=b"gone", timeout=1.0)
    wait_until(lambda: _describe(srv, "stuck")["queueStatus"]["pendingRequests"] == 0, timeout=30,
               what="the abandoned request out of the queue", interval=0.05)

    async def waiting_request_and_delete() -> tuple[httpx.Response, httpx.Response]:
        async with httpx.AsyncClient(timeout=30) as client:
            waiting = asyncio.ensure_future(client.post(f"{inf}/predictions/stuck", content=b"waits"))
            async def queued() -> bool:
                return (await client.get(f"{m}/models/stuck")).json()["queueStatus"]["pendingRequests"] > 0

            await wait_until_async(queued, timeout=30, what="the request waiting in stuck's queue")
            deleted = await client.delete(f"{m}/models/stuck")  # the worker never finishes initialize
            return await waiting, deleted

    waiting, deleted = asyncio.run(waiting_request_and_delete())
    assert deleted.status_code == 200, deleted.text
    assert waiting.status_code == 503 and waiting.json()["message"] == "Model stuck was unregistered"
    wait_until(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE,
               timeout=30, what="the stuck worker gone", interval=0.05)


def test_a_delete_while_a_synchronous_register_waits_fails_the_register_and_frees_the_name(srv: ServerInfo) -> None:
    """A DELETE lands while a synchronous register waits for a worker stuck in initialize: the DELETE is
    answered, the register fails as a register whose workers did not start (not a 404 from a second removal),
    and the name is free for the next register."""
    m = srv.management_url

    async def register_then_delete() -> tuple[httpx.Response, httpx.Response]:
        async with httpx.AsyncClient(timeout=60) as client:
            registering = asyncio.ensure_future(client.post(f"{m}/models", params={
                "url": "stuck", "model_name": "held", "initial_workers": "1", "synchronous": "true"}))

            async def loading() -> bool:
                resp = await client.get(f"{m}/models/held")
                return resp.status_code == 200 and any(w["pid"] for w in resp.json()["workers"])

            await wait_until_async(loading, timeout=30, what="held's worker loading")
            deleted = await client.delete(f"{m}/models/held")
            return await registering, deleted

    registered, deleted = asyncio.run(register_then_delete())
    assert deleted.status_code == 200, deleted.text
    assert registered.status_code == 500, registered.text
    assert registered.json()["message"] == "Failed to start workers"
    assert registered.json()["cause"] == 'model "held": model was unregistered'
    again = httpx.post(f"{m}/models", params={"url": "noop", "model_name": "held", "initial_workers": "0"}, timeout=30)
    assert again.status_code == 200, again.text
    assert _describe(srv, "held")["modelUrl"] == "noop"
    assert httpx.delete(f"{m}/models/held", timeout=30).status_code == 200


def test_a_failed_register_takes_out_its_own_model_never_a_newer_one_of_its_name(tmp_path: Path) -> None:
    """A DELETE, then a new register of the same name, both while a synchronous register waits for its workers:
    when that register gives up, it takes out its own model only; the newer one stays registered. (In process:
    the manager's own steps, in the order the race gives them.)"""
    from mmsctl.engine.spec import ServiceSpec
    from mmsctl.server.config import ServerConfig
    from mmsctl.server.errors import InternalServerError
    from mmsctl.server.workers.manager import ModelManager
    from mmsctl.server.workers.model import Model

    spec = ServiceSpec(make_noop_archive(tmp_path / "m", name="m"), "m", "noop_service:handle")
    manager = ModelManager(ServerConfig(), None)
    older, newer = Model(name="m", url="older", spec=spec), Model(name="m", url="newer", spec=spec)

    async def race() -> InternalServerError:
        manager.registry.add(older)  # a synchronous register of older, waiting for its workers (none start)
        await manager.unregister("m", 0)  # a DELETE
        manager.registry.add(newer)  # a register of the same name
        with pytest.raises(InternalServerError) as failed:
            await manager.await_workers(older, 1, timeout=30)  # older's register gives up
        return failed.value

    failed = asyncio.run(race())
    assert failed.cause == 'model "m": model was unregistered'
    assert manager.models == {"m": newer}


def test_a_handler_that_prints_without_end_keeps_the_log_bounded(srv: ServerInfo) -> None:
    log = srv.log_file
    for _ in range(4):  # 4 x 1.6 MB of prints, through a 64 KiB log with 2 old files
        resp = httpx.post(f"{srv.inference_url}/predictions/noop", content=b"spam:16000", timeout=60)
        assert resp.status_code == 200
    assert httpx.post(f"{srv.inference_url}/predictions/noop", content=b"still", timeout=30).text == "still"

    def settled() -> list[Path] | None:
        """The log files once the last line printed has reached them (rotation runs on a thread)."""
        files = sorted(log.parent.glob("server.log*"))
        try:
            text = "".join(f.read_text(errors="replace") for f in files)
        except FileNotFoundError:  # renamed between the listing and the read
            return None
        return files if "00015999 " in text and len(files) == 3 and "W-9000 READY" not in text else None

    files = wait_until(settled, timeout=30, what="the newest lines in the rotated log", interval=0.05)
    assert [f.name for f in files] == ["server.log", "server.log.1", "server.log.2"]
    assert all(f.stat().st_size <= LOG_MAX + 64 * 1024 for f in files), [f.stat().st_size for f in files]
