"""`mmsctl top` against a real mmsctl server process on loopback: real polling, real scaling."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.tui.support import screen_text, wait_for

pytestmark = pytest.mark.anyio

server_support = pytest.importorskip("tests.support.mmsctl_server")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One server with a no-op model (one worker) for the whole module."""
    tmp = tmp_path_factory.mktemp("top-server")
    noop = server_support.make_noop_archive(tmp / "noop")
    with server_support.running_mmsctl_server(tmp, models={"noop": str(noop)}, workers=1) as info:
        yield info


def _source(server: Any) -> Any:
    from mmsctl.client.contexts import Context
    from mmsctl.tui.source import HttpSource

    return HttpSource(Context("test", server.inference_url, server.management_url, server.metrics_url))


async def _predict(server: Any, n: int) -> None:
    import httpx

    async with httpx.AsyncClient(timeout=10) as client:
        for _ in range(n):
            response = await client.post(f"{server.inference_url}/predictions/noop", content=b"hello")
            assert response.status_code == 200


async def test_source_reads_traffic_from_a_real_server(server: Any) -> None:
    source = _source(server)
    try:
        first = await source.fetch()
        assert first.server.reachable and first.server.kind == "mmsctl" and first.server.healthy
        assert first.model("noop").requests_per_s is None  # one scrape: no rate yet
        await _predict(server, 15)
        second = await source.fetch()
    finally:
        await source.aclose()
    row = second.model("noop")
    assert row is not None
    assert row.requests_per_s is not None and row.requests_per_s > 0
    assert row.errors_per_s == 0.0
    assert row.p50_ms is not None and row.p99_ms is not None and row.p50_ms <= row.p99_ms
    assert (row.workers_ready, row.workers_total, row.min_workers, row.batch_size) == (1, 1, 1, 1)
    assert row.workers[0].pid and row.workers[0].memory
    assert second.host.source == "server" and second.host.memory_total


async def test_dead_server_is_a_snapshot_not_an_exception() -> None:
    from mmsctl.client.contexts import Context
    from mmsctl.tui.source import HttpSource

    port = server_support.free_port()
    source = HttpSource(Context("dead", f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port}",
                                  f"http://127.0.0.1:{port}"), timeout=0.5)
    try:
        snapshot = await source.fetch()
    finally:
        await source.aclose()
    assert not snapshot.server.reachable
    assert "connection refused" in (snapshot.server.error or "")


async def test_a_model_name_that_needs_encoding_round_trips(server: Any, tmp_path: Path) -> None:
    """Register, describe and unregister "echo v2?#%é" on the real server: through top's source (the
    async face) and the sync client, the name travels as one encoded path segment."""
    import asyncio

    from mmsctl.client.contexts import Context
    from mmsctl.client.management import ManagementClient

    name = "echo v2?#%é"
    folder = server_support.make_noop_archive(tmp_path / "odd")
    source = _source(server)
    context = Context("test", server.inference_url, server.management_url)
    try:
        assert name in await source.register(str(folder), model_name=name, initial_workers=0)
        row = (await source.fetch()).model(name)
        assert row is not None and (row.name, row.url, row.workers_total) == (name, str(folder), 0)

        def describe() -> Any:
            with ManagementClient(context) as client:
                return client.describe(name)

        detail = await asyncio.to_thread(describe)
        assert (detail.name, detail.url, detail.min_workers) == (name, str(folder), 0)
        assert name in await source.unregister(name)
        assert (await source.fetch()).model(name) is None
    finally:
        await source.aclose()


async def test_plus_in_the_tui_scales_a_real_model(server: Any) -> None:
    import httpx

    from mmsctl.tui.app import TopApp
    from mmsctl.tui.widgets.models_table import ModelsTable
    from mmsctl.tui.screens.dialogs import ConfirmScreen

    app = TopApp(_source(server), interval=0.3, clock=False)
    async with app.run_test(size=(110, 24)) as pilot:
        await wait_for(pilot, lambda: app.snapshot is not None and app.snapshot.model("noop") is not None, 20)
        table = app.screen.query_one(ModelsTable)
        assert table.current_key == "noop@1.0"
        await wait_for(pilot, lambda: " 1/1 " in screen_text(app), 20)
        await pilot.press("plus")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        # The new worker shows up in the table by itself (next polls), as a person would see it.
        await wait_for(pilot, lambda: " 2/2 " in screen_text(app), 60)
        row = next(line for line in screen_text(app).splitlines() if line.lstrip().startswith("noop"))
        assert row.split()[2:5] == ["2/2", "2", "2"]
        # Then the worker table of the model, after Enter.
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen_text(app).count("READY") >= 2, 20)
        await pilot.press("escape")
    described = httpx.get(f"{server.management_url}/models/noop", timeout=10).json()
    assert described["minWorkers"] == 2 and len(described["workers"]) == 2
    httpx.put(f"{server.management_url}/models/noop", params={"min_worker": 1, "max_worker": 1,
                                                              "synchronous": "true"}, timeout=30)


def test_once_json_against_a_real_server(server: Any, tmp_path: Path) -> None:
    env = dict(os.environ)
    env.update(MMSCTL_INFERENCE_URL=server.inference_url, MMSCTL_MANAGEMENT_URL=server.management_url,
               MMSCTL_METRICS_URL=server.metrics_url)
    proc = subprocess.run([sys.executable, "-m", "mmsctl", "top", "--once", "-o", "json", "--interval", "0.2"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["server"]["kind"] == "mmsctl" and data["server"]["healthy"] is True
    (noop,) = [m for m in data["models"] if m["name"] == "noop"]
    assert noop["workers_total"] >= 1 and noop["requests_per_s"] is not None
    assert noop["workers"][0]["status"] in ("READY", "BUSY")


def test_once_against_no_server_is_one_clear_line() -> None:
    port = server_support.free_port()
    env = dict(os.environ)
    env.update(MMSCTL_INFERENCE_URL=f"http://127.0.0.1:{port}", MMSCTL_MANAGEMENT_URL=f"http://127.0.0.1:{port}")
    proc = subprocess.run([sys.executable, "-m", "mmsctl", "top", "--once", "-o", "json"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 5
    assert proc.stdout == ""
    # The same words as `mmsctl models list` against a server that is down.
    assert proc.stderr.splitlines()[0] == f"error: cannot connect to 127.0.0.1:{port}: connection refused"
    assert "Traceback" not in proc.stderr


def test_once_against_an_unknown_host_says_so(capsys, monkeypatch) -> None:
    """A typo in the host name is "cannot resolve", not "connection refused"."""
    from tests.support.cli import run_mmsctl

    monkeypatch.setenv("MMSCTL_INFERENCE_URL", "http://no-such-host.invalid:18080")
    monkeypatch.setenv("MMSCTL_MANAGEMENT_URL", "http://no-such-host.invalid:18081")
    r = run_mmsctl(capsys, "top", "--once", "-o", "json")
    assert (r.code, r.stdout) == (5, "")
    assert r.stderr.startswith("error: cannot resolve no-such-host.invalid:1808"), r.stderr
    assert "connection refused" not in r.stderr


def test_top_without_a_terminal_says_how_to_script_it() -> None:
    proc = subprocess.run([sys.executable, "-m", "mmsctl", "top"], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    assert "needs a terminal" in proc.stderr and "--once -o json" in proc.stderr


def test_bad_interval_is_a_usage_error() -> None:
    proc = subprocess.run([sys.executable, "-m", "mmsctl", "top", "--once", "--interval", "0"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--interval" in proc.stderr
