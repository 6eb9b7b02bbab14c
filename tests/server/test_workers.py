"""Worker processes under stress: crashes, timeouts, scaling and unregistering under load, backpressure."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any, Callable

import httpx
import pytest

from tests.support.mmsctl_server import ServerInfo, make_noop_archive, running_mmsctl_server
from tests.support.waiting import wait_until, wait_until_async


def _worker_pids(server: ServerInfo, model: str) -> list[int]:
    workers = httpx.get(f"{server.management_url}/models/{model}").json()["workers"]
    return [w["pid"] for w in workers if w["status"] == "READY" and w["pid"]]


def _wait_for_ready_workers(server: ServerInfo, model: str, count: int, timeout: float = 60) -> list[int]:
    try:
        return wait_until(lambda: pids if len(pids := _worker_pids(server, model)) >= count else None,
                          timeout=timeout, what=f"{model}: {count} READY workers", interval=0.1)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}; log:\n{server.log_text()[-2000:]}") from None


async def _until_busy(client: httpx.AsyncClient, server: ServerInfo, model: str = "noop") -> None:
    needle = f'mmsctl_workers{{model="{model}",state="BUSY"}} 1.0'

    async def busy() -> bool:
        return needle in (await client.get(f"{server.metrics_url}/metrics")).text

    try:
        await wait_until_async(busy, timeout=30, what=f"{model}: the worker busy", interval=0.05)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}; log:\n{server.log_text()[-2000:]}") from None


async def _until(client: httpx.AsyncClient, server: ServerInfo, what: str,
                 check: Callable[[dict[str, Any]], bool], model: str = "noop", timeout: float = 60) -> dict[str, Any]:
    """Poll the model's description until *check* holds (bounded); fail with what was awaited."""
    last: list[Any] = [None]

    async def described() -> dict[str, Any] | None:
        resp = await client.get(f"{server.management_url}/models/{model}")
        last[0] = resp.json() if resp.status_code == 200 else resp.text
        return last[0] if resp.status_code == 200 and check(last[0]) else None  # type: ignore[no-any-return]

    try:
        return await wait_until_async(described, timeout=timeout, what=f"{model}: {what}")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}; last description: {last[0]!r:.1000}; log:\n{server.log_text()[-2000:]}") from None


def _pending(description: dict[str, Any]) -> int:
    return int(description["queueStatus"]["pendingRequests"])


def _ready(description: dict[str, Any]) -> int:
    return sum(1 for w in description["workers"] if w["status"] == "READY")


async def _fire(url: str, bodies: list[bytes], timeout: float = 60) -> list[httpx.Response]:
    limits = httpx.Limits(max_connections=200)
    async with httpx.AsyncClient(timeout=timeout, limits=limits) as client:
        return await asyncio.gather(*(client.post(url, content=b) for b in bodies))


def test_killed_worker_fails_in_flight_with_503_and_is_replaced(tmp_path: Path) -> None:
    noop = make_noop_archive(tmp_path / "noop")
    with running_mmsctl_server(tmp_path, models={"noop": str(noop)}) as srv:
        (pid,) = _wait_for_ready_workers(srv, "noop", 1)

        async def scenario() -> tuple[httpx.Response, httpx.Response]:
            async with httpx.AsyncClient(timeout=30) as client:
                slow = asyncio.ensure_future(client.post(f"{srv.inference_url}/predictions/noop", content=b"sleep:5"))
                await _until_busy(client, srv)  # the request is inside the worker now
                os.kill(pid, signal.SIGKILL)
                first = await slow
                # the replacement serves the next request
                second = await client.post(f"{srv.inference_url}/predictions/noop", content=b"after", timeout=60)
                return first, second

        first, second = asyncio.run(scenario())
        assert first.status_code == 503
        assert first.json()["message"] == "Worker died."
        assert second.status_code == 200 and second.text == "after"
        (new_pid,) = _wait_for_ready_workers(srv, "noop", 1)
        assert new_pid != pid


def test_a_request_sent_ahead_to_a_worker_that_dies_is_served_by_its_replacement(tmp_path: Path) -> None:
    """A busy worker of a slow model is sent its next request before it answers (no idle round trip
    through the front end); that request still counts as pending, and if the worker dies it goes back
    to the queue for the replacement instead of failing with the batch that killed the worker."""
    noop = make_noop_archive(tmp_path / "noop")
    with running_mmsctl_server(tmp_path, models={"noop": str(noop)}) as srv:
        (pid,) = _wait_for_ready_workers(srv, "noop", 1)
        url = f"{srv.inference_url}/predictions/noop"

        async def scenario() -> tuple[httpx.Response, httpx.Response, httpx.Response, str]:
            async with httpx.AsyncClient(timeout=60) as client:
                first = asyncio.ensure_future(client.post(url, content=b"sleep:1"))
                await _until_busy(client, srv)
                doomed = asyncio.ensure_future(client.post(url, content=b"sleep:30"))
                await _until(client, srv, "sleep:30 queued", lambda d: _pending(d) == 1)
                held = asyncio.ensure_future(client.post(url, content=b"pid"))
                await _until(client, srv, "two queued", lambda d: _pending(d) == 2)
                done = await first  # the worker now runs sleep:30 and holds "pid" ahead of it
                await _until(client, srv, "one left pending", lambda d: _pending(d) == 1)
                metrics = (await client.get(f"{srv.metrics_url}/metrics")).text
                os.kill(pid, signal.SIGKILL)
                return done, await doomed, await held, metrics

        done, doomed, held, metrics = asyncio.run(scenario())
        assert done.status_code == 200
        assert doomed.status_code == 503 and doomed.json()["message"] == "Worker died."
        assert held.status_code == 200 and int(held.text) != pid  # answered by the replacement
        assert 'mmsctl_queue_depth{model="noop"} 1.0' in metrics  # pending, as the description says


@pytest.mark.slow
def test_unregister_past_its_timeout_answers_the_request_held_ahead(tmp_path: Path) -> None:
    """A worker killed because the unregister timeout ran out gives back the batch sent ahead to it:
    that client is answered 503 too, never left waiting on a model that is gone."""
    noop = make_noop_archive(tmp_path / "noop")
    with running_mmsctl_server(tmp_path, models={"noop": str(noop)},
                               extra_config={"unregister_model_timeout": 1}) as srv:
        _wait_for_ready_workers(srv, "noop", 1)
        url = f"{srv.inference_url}/predictions/noop"

        async def scenario() -> tuple[httpx.Response, httpx.Response, httpx.Response]:
            async with httpx.AsyncClient(timeout=60) as client:
                first = asyncio.ensure_future(client.post(url, content=b"sleep:1"))
                await _until_busy(client, srv)
                long = asyncio.ensure_future(client.post(url, content=b"sleep:30"))
                await _until(client, srv, "sleep:30 queued", lambda d: _pending(d) == 1)
                held = asyncio.ensure_future(client.post(url, content=b"held"))
                await _until(client, srv, "two queued", lambda d: _pending(d) == 2)
                await first
                await _until(client, srv, "one left pending", lambda d: _pending(d) == 1)
                gone = await client.delete(f"{srv.management_url}/models/noop")
                assert gone.status_code == 200, gone.text
                return await long, await held, gone

        long, held, _ = asyncio.run(scenario())
        assert long.status_code == 503 and held.status_code == 503
        assert held.json()["message"] == "Model noop was unregistered"


def test_response_timeout_kills_and_restarts_worker(tmp_path: Path) -> None:
    make_noop_archive(tmp_path / "noop")
    with running_mmsctl_server(tmp_path, model_store=tmp_path) as srv:
        resp = httpx.post(f"{srv.management_url}/models",
                          params={"url": "noop", "response_timeout": "1s", "initial_workers": "1"}, timeout=60)
        assert resp.status_code == 200, resp.text
        assert httpx.get(f"{srv.management_url}/models/noop").json()["responseTimeout"] == 1
        (pid,) = _wait_for_ready_workers(srv, "noop", 1)
        resp = httpx.post(f"{srv.inference_url}/predictions/noop", content=b"sleep:30", timeout=30)
        assert resp.status_code == 504
        assert resp.json()["type"] == "RequestTimeoutException"
        ok = httpx.post(f"{srv.inference_url}/predictions/noop", content=b"fine", timeout=60)
        assert ok.status_code == 200 and ok.text == "fine"
        assert _wait_for_ready_workers(srv, "noop", 1)[0] != pid


@pytest.mark.slow
def test_scale_up_and_down_under_load_loses_nothing(tmp_path: Path) -> None:
    noop = make_noop_archive(tmp_path / "noop")
    with running_mmsctl_server(tmp_path, models={"noop": str(noop)}) as srv:
        url = f"{srv.inference_url}/predictions/noop"

        async def scenario() -> list[httpx.Response]:
            load = asyncio.ensure_future(_fire(url, [b"sleep:0.05"] * 150))  # ~7.5 s on one worker
            async with httpx.AsyncClient(timeout=60) as client:
                await _until(client, srv, "had requests queued", lambda d: _pending(d) > 0)
                up = await client.put(f"{srv.management_url}/models/noop", params={"min_worker": "3"})
                assert up.status_code == 202
                described = await _until(client, srv, "had 3 READY workers", lambda d: _ready(d) == 3)
                # The scaling happened under load: requests still wait (else this test proves nothing).
                assert not load.done() and _pending(described) > 0
                down = await client.put(f"{srv.management_url}/models/noop", params={"min_worker": "1"})
                assert down.status_code == 202
                await _until(client, srv, "went back to 1 worker", lambda d: len(d["workers"]) == 1)
            return await load

        responses = asyncio.run(scenario())
        assert [r.status_code for r in responses] == [200] * len(responses)
        _wait_for_ready_workers(srv, "noop", 1)


def test_unregister_under_load_answers_every_request(tmp_path: Path) -> None:
    noop = make_noop_archive(tmp_path / "noop")
    with running_mmsctl_server(tmp_path, models={"noop": str(noop)}, workers=2) as srv:
        url = f"{srv.inference_url}/predictions/noop"

        async def scenario() -> tuple[list[httpx.Response], httpx.Response]:
            load = asyncio.ensure_future(_fire(url, [b"sleep:0.02"] * 100))  # ~1 s on two workers
            async with httpx.AsyncClient(timeout=60) as client:
                await _until(client, srv, "had requests queued", lambda d: _pending(d) > 0)
                assert not load.done()  # the delete comes under load (else this test proves nothing)
                gone = await client.delete(f"{srv.management_url}/models/noop")
            return await load, gone

        responses, gone = asyncio.run(scenario())
        assert gone.status_code == 200
        codes = {r.status_code for r in responses}
        # queued requests are served before the workers stop; later ones find no model
        assert codes <= {200, 404}, codes
        assert 200 in codes


@pytest.mark.slow
def test_full_queue_answers_503_with_retry_after(tmp_path: Path) -> None:
    noop = make_noop_archive(tmp_path / "noop")
    with running_mmsctl_server(tmp_path, models={"noop": str(noop)}, extra_config={"job_queue_size": 2}) as srv:
        url = f"{srv.inference_url}/predictions/noop"
        responses = asyncio.run(_fire(url, [b"sleep:1"] * 8))
        codes = sorted(r.status_code for r in responses)
        assert codes.count(200) >= 2 and 503 in codes, codes  # 2 queued (+1 in flight) fit
        rejected = next(r for r in responses if r.status_code == 503)
        assert rejected.headers["Retry-After"] == "1"
        assert rejected.json()["type"] == "ServiceUnavailableException"


def test_batching_groups_concurrent_requests(tmp_path: Path) -> None:
    make_noop_archive(tmp_path / "noop")
    with running_mmsctl_server(tmp_path, model_store=tmp_path) as srv:
        resp = httpx.post(f"{srv.management_url}/models",
                          params={"url": "noop", "batch_size": "4", "max_batch_delay": "200"}, timeout=60)
        assert resp.status_code == 200
        responses = asyncio.run(_fire(f"{srv.inference_url}/predictions/noop", [b"b%d" % i for i in range(8)]))
        assert sorted(r.text for r in responses) == sorted("b%d" % i for i in range(8))
        text = httpx.get(f"{srv.metrics_url}/metrics").text
        count = next(float(line.split()[-1]) for line in text.splitlines()
                     if line.startswith('mmsctl_batch_size_count{model="noop"}'))
        assert count < 8  # fewer batches than requests: they were grouped


@pytest.mark.parametrize("token_text, inference_key, management_key", [
    ("s3cret\n", "s3cret", "s3cret"),
    ('{"inference": {"key": "i-s3cret"}, "management": {"key": "m-s3cret"}}', "i-s3cret", "m-s3cret"),
], ids=["plain", "key_file.json"])
def test_token_auth(tmp_path: Path, token_text: str, inference_key: str, management_key: str) -> None:
    noop = make_noop_archive(tmp_path / "noop")
    with running_mmsctl_server(tmp_path, models={"noop": str(noop)}, token=token_text) as srv:
        assert httpx.get(f"{srv.inference_url}/ping").status_code == 200  # health checks stay open
        resp = httpx.post(f"{srv.inference_url}/predictions/noop", content=b"x")
        assert resp.status_code == 401 and resp.json()["type"] == "InvalidKeyException"
        resp = httpx.get(f"{srv.management_url}/models", headers={"Authorization": "Bearer wrong"})
        assert resp.status_code == 401
        ok = httpx.post(f"{srv.inference_url}/predictions/noop", content=b"x",
                        headers={"Authorization": f"Bearer {inference_key}"})
        assert ok.status_code == 200
        ok = httpx.get(f"{srv.management_url}/models", headers={"Authorization": f"Bearer {management_key}"})
        assert ok.status_code == 200
        if inference_key != management_key:  # each API takes only its own key
            resp = httpx.get(f"{srv.management_url}/models", headers={"Authorization": f"Bearer {inference_key}"})
            assert resp.status_code == 401
