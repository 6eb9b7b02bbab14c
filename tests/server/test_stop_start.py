"""Stopping and starting, as an operator lives it: draining under load, a stale state file whose pid now
belongs to someone else, a front end killed -9 (its workers must not stay behind), a state folder that
cannot be written."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
from pathlib import Path
from typing import Iterator

import httpx
import psutil
import pytest

from mmsctl.local_servers import Instance, InstanceState, process_start_time
from tests.support.cli import CliResult, run_mmsctl
from tests.support.mmsctl_server import make_handler_archive, make_noop_archive, running_mmsctl_server
from tests.support.waiting import wait_until, wait_until_async

STUCK_HANDLER = '''
import time

def handle(data, context):
    if data is None:
        for _ in range(600):  # initialize never returns (in any test's time)
            time.sleep(1)
        raise RuntimeError("stuck for 10 minutes: nobody stopped this worker")
    return data
'''


def _mmsctl(capsys: pytest.CaptureFixture[str], *args: str, state_dir: Path | None = None) -> CliResult:
    """``mmsctl ARGS…`` in-process (``serve stop|status`` signal and read the server; nothing here is about
    the CLI's own process), with *state_dir* as MMSCTL_STATE_DIR for this call only."""
    with pytest.MonkeyPatch.context() as mp:
        if state_dir is not None:
            mp.setenv("MMSCTL_STATE_DIR", str(state_dir))
        return run_mmsctl(capsys, *args)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_draining_server_answers_what_it_holds_and_turns_new_requests_away(tmp_path: Path) -> None:
    noop = make_noop_archive(tmp_path / "noop")
    with running_mmsctl_server(tmp_path, models={"noop": str(noop)}) as srv:
        inf, m = srv.inference_url, srv.management_url

        async def scenario() -> tuple[list[httpx.Response], list[httpx.Response]]:
            async with httpx.AsyncClient(timeout=60) as client:
                held = [asyncio.ensure_future(client.post(f"{inf}/predictions/noop", content=b"sleep:0.4"))
                        for _ in range(6)]
                async def four_queued() -> bool:
                    return (await client.get(f"{m}/models/noop")).json()["queueStatus"]["pendingRequests"] >= 4

                async def draining() -> bool:
                    return (await client.get(f"{inf}/ping")).status_code == 503

                await wait_until_async(four_queued, timeout=30, what="4 requests queued")
                os.kill(srv.pid, signal.SIGTERM)
                await wait_until_async(draining, timeout=30, what="ping answering 503 (draining)")
                turned_away = [
                    await client.get(f"{inf}/ping"),
                    await client.post(f"{inf}/predictions/noop", content=b"new"),
                    await client.post(f"{m}/models", params={"url": str(noop), "model_name": "late"}),
                ]
                described = await client.get(f"{m}/models/noop")
                assert described.status_code == 200  # reads still answered: the queue is visible
                assert not all(h.done() for h in held)  # all this happened while draining
                return [await h for h in held], turned_away

        held, (ping, prediction, register) = asyncio.run(scenario())
        assert [r.status_code for r in held] == [200] * 6 and {r.text for r in held} == {"sleep:0.4"}
        assert ping.json() == {"status": "Draining"}
        for resp in (prediction, register):
            assert resp.status_code == 503, resp.text
            assert resp.headers["Retry-After"] == "1"
            assert resp.json()["type"] == "ServiceUnavailableException"
            assert "shutting down" in resp.json()["message"]
        assert srv.process.wait(30) == 0


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen[bytes]]:
    """An unrelated process in a session of its own (a stop that signals it, or its group, kills it)."""
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("recorded", ["other start time", "no start time"])
def test_stop_never_signals_a_process_that_took_the_pid(bystander: subprocess.Popen[bytes], recorded: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    started = process_start_time(bystander.pid)
    assert started is not None
    Instance("stale").write_state(InstanceState(
        name="stale", pid=bystander.pid, status="ready", inference_url="http://127.0.0.1:1",
        process_start=started - 3600 if recorded == "other start time" else None))
    stopped = _mmsctl(capsys, "serve", "stop", "--name", "stale")
    assert stopped.code == 0, stopped.stderr
    assert stopped.stderr.strip() == "server stale had died (killed or crashed); marked died and cleaned up"
    assert bystander.poll() is None  # never signalled
    rows = json.loads(_mmsctl(capsys, "serve", "status", "-o", "json").stdout)
    assert [(r["name"], r["status"], r["pid"]) for r in rows] == [("stale", "died", None)]
    assert "is gone: it was killed or crashed" in rows[0]["error"]
    again = _mmsctl(capsys, "serve", "stop")
    assert again.code == 0 and again.stderr.strip() == "no mmsctl server is running; nothing to stop"
    assert bystander.poll() is None


def test_a_server_killed_9_leaves_no_workers_and_status_says_it_died(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    make_noop_archive(store / "noop")
    make_handler_archive(store / "stuck", STUCK_HANDLER, name="stuck")
    with running_mmsctl_server(tmp_path / "srv", model_store=store, models={"noop": "noop"}) as srv:
        m = srv.management_url
        resp = httpx.post(f"{m}/models", params={"url": "stuck", "initial_workers": "1", "synchronous": "false"},
                          timeout=30)
        assert resp.status_code == 202, resp.text
        loading = wait_until(lambda: httpx.get(f"{m}/models/stuck", timeout=10).json()["workers"][0]["pid"],
                             timeout=30, what="the stuck worker's pid", interval=0.05)
        busy = httpx.get(f"{m}/models/noop", timeout=10).json()["workers"][0]["pid"]

        async def kill_during_a_batch() -> None:
            async with httpx.AsyncClient(timeout=60) as client:
                inside = asyncio.ensure_future(client.post(f"{srv.inference_url}/predictions/noop", content=b"sleep:60"))
                needle = 'mmsctl_workers{model="noop",state="BUSY"} 1.0'

                async def busy_worker() -> bool:
                    return needle in (await client.get(f"{srv.metrics_url}/metrics")).text

                await wait_until_async(busy_worker, timeout=30, what="noop's worker BUSY")
                os.kill(srv.pid, signal.SIGKILL)
                with pytest.raises(httpx.HTTPError):
                    await inside

        asyncio.run(kill_during_a_batch())
        srv.process.wait(30)
        wait_until(lambda: _gone(loading) and _gone(busy), timeout=30, what="both workers gone", interval=0.05)

        name = srv.instance_dir.name
        stopped = _mmsctl(capsys, "serve", "stop", "--name", name, state_dir=srv.state_dir)
        assert stopped.code == 0, stopped.stderr
        assert "had died" in stopped.stderr
        rows = json.loads(_mmsctl(capsys, "serve", "status", "-o", "json", state_dir=srv.state_dir).stdout)
        assert [(r["name"], r["status"], r["pid"]) for r in rows] == [(name, "died", None)]


def test_an_unwritable_state_folder_fails_the_register_and_the_server_serves_on(tmp_path: Path) -> None:
    store = tmp_path / "store"
    make_noop_archive(store / "noop")
    make_noop_archive(store / "echo", name="echo")
    with running_mmsctl_server(tmp_path / "srv", model_store=store, models={"noop": "noop"}) as srv:
        m = srv.management_url
        blocker = srv.instance_dir / f".state.json.{srv.pid}.tmp"  # where state.json is written first (mmsctl/atomic.py)
        blocker.mkdir()  # (a permission bit would not stop root)
        resp = httpx.post(f"{m}/models", params={"url": "echo", "initial_workers": "1"}, timeout=60)
        assert resp.status_code == 500, resp.text
        message = resp.json()["message"]
        assert message.startswith('Model "echo" was not registered: cannot write ') and "state.json" in message
        assert [x["modelName"] for x in httpx.get(f"{m}/models", timeout=10).json()["models"]] == ["noop"]
        assert httpx.post(f"{srv.inference_url}/predictions/noop", content=b"on", timeout=30).text == "on"

        blocker.rmdir()
        assert httpx.post(f"{m}/models", params={"url": "echo"}, timeout=60).status_code == 200
        state = json.loads((srv.instance_dir / "state.json").read_text())
        assert state["models"] == ["echo", "noop"] and state["status"] == "ready"


def _read_until(sock: socket.socket, marker: bytes) -> bytes:
    """What *sock* sends until *marker* has come (or it closes)."""
    data = b""
    while marker not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def test_a_request_admitted_before_the_drain_whose_body_comes_after_it_is_answered(tmp_path: Path) -> None:
    """SIGTERM between a request's admission (its ``100 Continue``) and its body: the drain answers it, as it answers
    one queued (a body still uploading or being decoded off the loop is not refused 503 because the queues were
    empty when the signal came)."""
    noop = make_noop_archive(tmp_path / "noop")
    with running_mmsctl_server(tmp_path / "srv", models={"noop": str(noop)},
                               extra_config={"drain_timeout": 60}) as srv:
        host, port = srv.inference_url.split("//")[1].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=60) as sock:
            sock.sendall(b"POST /predictions/noop HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
                         b"Expect: 100-continue\r\n\r\n")
            assert _read_until(sock, b"\r\n\r\n").startswith(b"HTTP/1.1 100 Continue")  # admitted
            os.kill(srv.pid, signal.SIGTERM)
            wait_until(lambda: httpx.get(f"{srv.inference_url}/ping", timeout=10).status_code == 503, timeout=30,
                       what="ping answering 503 (draining)")
            sock.sendall(b"late")
            answer = _read_until(sock, b"late")
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and answer.endswith(b"\r\n\r\nlate"), answer
        assert srv.process.wait(30) == 0


def test_a_batch_being_gathered_when_the_drain_starts_is_sent_and_answered(tmp_path: Path) -> None:
    """A model batching 4 requests for up to 600 s holds one when SIGTERM comes: the drain sends that batch as it is
    and answers it, rather than leaving it to the delay and killing the worker (the client saw no answer)."""
    noop = make_noop_archive(tmp_path / "noop")
    with running_mmsctl_server(tmp_path / "srv", models={"noop": str(noop)},
                               extra_config={"drain_timeout": 5}) as srv:
        resp = httpx.post(f"{srv.management_url}/models", timeout=60, params={
            "url": str(noop), "model_name": "batched", "batch_size": "4", "max_batch_delay": "600000",
            "initial_workers": "1", "synchronous": "true"})
        assert resp.status_code == 200, resp.text
        host, port = srv.inference_url.split("//")[1].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=60) as sock:
            sock.sendall(b"POST /predictions/batched HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
                         b"Expect: 100-continue\r\n\r\n")
            assert _read_until(sock, b"\r\n\r\n").startswith(b"HTTP/1.1 100 Continue")  # admitted
            sock.sendall(b"lone")
            os.kill(srv.pid, signal.SIGTERM)
            answer = _read_until(sock, b"lone")
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and answer.endswith(b"\r\n\r\nlone"), answer
        assert srv.process.wait(30) == 0


def test_a_request_sent_ahead_to_a_worker_the_drain_kills_is_answered_with_the_drain_s_reason(tmp_path: Path) -> None:
    """A busy worker holds the next request ahead of the one it runs; the drain's deadline kills it: both are
    answered 503 saying the server is shutting down (the one ahead was told its model had been unregistered)."""
    noop = make_noop_archive(tmp_path / "noop")
    with running_mmsctl_server(tmp_path / "srv", models={"noop": str(noop)},
                               extra_config={"drain_timeout": 1}) as srv:
        url, m = f"{srv.inference_url}/predictions/noop", srv.management_url

        async def scenario() -> list[httpx.Response]:
            async with httpx.AsyncClient(timeout=120) as client:
                first = asyncio.ensure_future(client.post(url, content=b"sleep:0.5"))

                async def pending(count: int) -> bool:
                    return (await client.get(f"{m}/models/noop")).json()["queueStatus"]["pendingRequests"] >= count

                await wait_until_async(lambda: pending(0), timeout=30, what="the server answering")
                later = [asyncio.ensure_future(client.post(url, content=b"sleep:60")) for _ in range(2)]
                await wait_until_async(lambda: pending(2), timeout=30, what="two requests waiting")
                assert (await first).text == "sleep:0.5"  # the worker took one of them, and the other ahead of it
                os.kill(srv.pid, signal.SIGTERM)
                return [await r for r in later]

        for resp in asyncio.run(scenario()):
            assert resp.status_code == 503 and resp.json()["message"].startswith("The server is shutting down"), \
                resp.text
        assert srv.process.wait(30) == 0
