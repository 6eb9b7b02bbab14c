"""`mmsctl top` on a fleet of real mmsctl servers on loopback, one member down (a closed port).

The mixed fleet with a real MMS 1.1.11 is in test_interop.py (it shares that module's MMS).
"""

from __future__ import annotations

import json
from typing import Any, Iterator

import pytest

from tests.tui.support import screen_text, wait_for

pytestmark = pytest.mark.anyio

server_support = pytest.importorskip("tests.support.mmsctl_server")


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Any]]:
    """Two servers, each with the no-op model (one worker)."""
    tmp = tmp_path_factory.mktemp("top-fleet")
    noop = server_support.make_noop_archive(tmp / "noop")
    with server_support.running_mmsctl_server(tmp / "a", models={"noop": str(noop)}, workers=1) as a, \
            server_support.running_mmsctl_server(tmp / "b", models={"noop": str(noop)}, workers=1) as b:
        yield [a, b]


@pytest.fixture
def dead() -> str:
    return f"http://127.0.0.1:{server_support.free_port()}"


def _spec(server: Any) -> str:
    return f"{server.inference_url}={server.management_url}={server.metrics_url}"


def _fleet(servers: list[Any], dead: str, **kwargs: Any) -> Any:
    from mmsctl.client.fanout import parse_members
    from mmsctl.tui.fleet_source import FleetSource

    members = parse_members([",".join([*(_spec(s) for s in servers), dead])])
    return FleetSource.over_http("lab", members, timeout=2.0, describe_every=0, **kwargs)


def _name(url: str) -> str:
    return url.split("://", 1)[1]


async def _predict(server: Any, n: int) -> None:
    import httpx

    async with httpx.AsyncClient(timeout=10) as client:
        for _ in range(n):
            response = await client.post(f"{server.inference_url}/predictions/noop", content=b"hello")
            assert response.status_code == 200


async def test_the_fleet_source_combines_real_servers_and_shows_the_down_one(servers: list[Any], dead: str) -> None:
    a, b = servers
    fleet = _fleet(servers, dead)
    try:
        first = await fleet.fetch()
        await _predict(a, 10)
        await _predict(b, 20)
        second = await fleet.fetch()
    finally:
        await fleet.aclose()
    assert [m.state for m in first.members] == ["up", "up", "down"]
    down = second.members[2]
    assert down.name == _name(dead) and "connection refused" in (down.server.error or "")
    assert second.server.reachable and second.server.kind == "mmsctl"
    assert second.server.error is not None and second.server.error.startswith(f"1 of 3 members down: {_name(dead)} (")
    row = second.model("noop")
    assert row is not None and (row.members_present, row.members_healthy) == (2, 2)
    assert [p.member for p in row.parts] == [_name(a.management_url), _name(b.management_url)]
    assert (row.workers_ready, row.workers_total, row.min_workers) == (2, 2, 2)
    rates = [p.requests_per_s for p in row.parts]
    assert all(r is not None and r > 0 for r in rates) and row.requests_per_s == sum(r or 0.0 for r in rates)
    # Both members use the same histogram buckets: the fleet's percentiles come from their sum.
    assert row.latency is None and row.p50_ms is not None and row.p99_ms is not None and row.p50_ms <= row.p99_ms
    assert {w.member for w in row.workers} == {p.member for p in row.parts}
    assert [m.workers_total for m in second.members[:2]] == [1, 1]


async def test_plus_in_the_fleet_view_scales_every_member(servers: list[Any], dead: str) -> None:
    import httpx

    from mmsctl.tui.app import TopApp
    from mmsctl.tui.screens.dialogs import ConfirmScreen
    from mmsctl.tui.screens.members import MembersScreen

    app = TopApp(_fleet(servers, dead, patience=0.5), interval=0.3, clock=False)
    try:
        async with app.run_test(size=(110, 24)) as pilot:
            await wait_for(pilot, lambda: app.snapshot is not None and app.snapshot.model("noop") is not None, 20)
            await wait_for(pilot, lambda: " 2/2 " in screen_text(app), 20)
            await pilot.press("plus")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            assert "Scale noop on 2 members from 1 to 2 worker(s) each?" in screen_text(app)
            await pilot.press("y")
            # Four workers over the two members show up by themselves, as a person would see it.
            await wait_for(pilot, lambda: " 4/4 " in screen_text(app), 60)
            await pilot.press("m")
            await wait_for(pilot, lambda: isinstance(app.screen, MembersScreen))
            await wait_for(pilot, lambda: "down" in screen_text(app) and screen_text(app).count(" 2/2 ") == 2, 20)
            await pilot.press("escape")
        for server in servers:
            described = httpx.get(f"{server.management_url}/models/noop", timeout=10).json()
            assert described["minWorkers"] == 2 and len(described["workers"]) == 2
    finally:
        for server in servers:
            httpx.put(f"{server.management_url}/models/noop", params={"min_worker": 1, "max_worker": 1,
                                                                      "synchronous": "true"}, timeout=30)


def test_once_on_a_fleet_context_prints_the_fleet_then_exits_4(servers: list[Any], dead: str, capsys) -> None:
    from tests.support.cli import run_mmsctl
    from tests.support.cli import one_error_line

    members = ",".join([*(_spec(s) for s in servers), dead])
    assert run_mmsctl(capsys, "context", "add", "lab", "--members", members).code == 0
    r = run_mmsctl(capsys, "top", "--once", "--context", "lab", "-o", "json", "--interval", "0.2")
    assert r.code == 4, r.stderr
    data = json.loads(r.stdout)
    assert [(m["name"], m["state"]) for m in data["members"]] == [
        (_name(servers[0].management_url), "up"), (_name(servers[1].management_url), "up"), (_name(dead), "down")]
    (noop,) = [m for m in data["models"] if m["name"] == "noop"]
    assert noop["members_present"] == 2 and len(noop["parts"]) == 2 and noop["workers_total"] == 2
    assert one_error_line(r).startswith(f"error: top failed on 1 of 3 members: {_name(dead)} (cannot connect")
    table = run_mmsctl(capsys, "top", "--once", "--context", "lab", "--interval", "0.2")
    assert table.code == 4
    lines = table.stdout.splitlines()
    assert lines[0].split()[:3] == ["NAME", "VERSION", "MEMBERS"]
    assert next(line for line in lines if line.startswith("noop")).split()[1:4] == ["1.0", "2/2", "2/2"]
    header = lines.index(next(line for line in lines if line.startswith("MEMBER ")))
    assert [line.split()[1] for line in lines[header + 1:header + 4]] == ["up", "up", "down"]
