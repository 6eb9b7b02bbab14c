"""The monitor on a fleet, driven headless with Textual's pilot on an injected (scripted) fleet source."""

from __future__ import annotations

import dataclasses

import pytest

from mmsctl.tui.app import TopApp
from mmsctl.tui.screens.dialogs import ConfirmScreen, RegisterScreen
from mmsctl.tui.screens.members import MembersScreen
from mmsctl.tui.screens.model_detail import ModelScreen
from mmsctl.tui.widgets.models_table import ModelsTable
from tests.tui.support import (
    MEMBER_A,
    MEMBER_B,
    MEMBER_C,
    ScriptedFleetSource,
    ScriptedSource,
    assert_snapshot,
    fleet,
    mmsctl_snapshot,
    screen_text,
    wait_for,
    wait_settled,
)

pytestmark = pytest.mark.anyio

SIZE = (110, 24)


def _app(source: ScriptedSource, **kwargs: object) -> TopApp:
    return TopApp(source, interval=30.0, clock=False, **kwargs)  # type: ignore[arg-type]


async def _started(pilot, app: TopApp, polls: int = 1) -> None:  # type: ignore[no-untyped-def]
    await wait_for(pilot, lambda: app.polls >= polls)
    await wait_settled(pilot, app)


def _line(app: TopApp, start: str) -> list[str]:
    return next(line for line in screen_text(app).splitlines() if line.lstrip().startswith(start)).split()


async def test_snapshot_fleet_models_with_a_member_down() -> None:
    app = _app(ScriptedFleetSource([fleet()]))
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        text = screen_text(app)
        assert_snapshot("fleet_models", text)
        assert _line(app, "NAME")[:3] == ["NAME▲", "VERSION", "MEMBERS"]
        # squeezenet: on 2 members, ready on both; 4 workers; 10 + 30 requests/s.
        assert _line(app, "squeezenet")[1:4] == ["1.0", "2/2", "4/4"] and "40.0" in _line(app, "squeezenet")
        assert "members 2/3 up" in text and "● 2/3 healthy" in text
        assert f"1 of 3 members down: {MEMBER_C}" in text  # the status line names it
        assert "m Members" in text


async def test_m_opens_the_members_view_and_goes_back() -> None:
    app = _app(ScriptedFleetSource([fleet(batch=8)]))
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        assert _line(app, "squeezenet")[6] == "mixed"  # BATCH: A batches 4, B 8
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, MembersScreen))
        await wait_settled(pilot, app)
        assert_snapshot("fleet_members", screen_text(app))
        assert _line(app, MEMBER_A)[1:6] == ["up", "mmsctl", "2", "3/3", "10.0"]
        assert _line(app, MEMBER_C)[1:3] == ["down", "-"]
        assert "cannot connect" in " ".join(_line(app, MEMBER_C))
        await pilot.press("m")
        await wait_for(pilot, lambda: not isinstance(app.screen, MembersScreen))
        await pilot.press("m", "escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, MembersScreen))


async def test_one_server_has_no_members_view() -> None:
    app = _app(ScriptedSource([mmsctl_snapshot()]))
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        assert not app.fleet and "Members" not in screen_text(app)
        await pilot.press("m")
        await pilot.pause()
        assert not isinstance(app.screen, MembersScreen)
        assert "MEMBERS" not in screen_text(app)


async def test_plus_scales_each_member_by_one_from_its_own_count() -> None:
    source = ScriptedFleetSource([fleet()])
    app = _app(source)
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        assert app.screen.query_one(ModelsTable).current_key == "noop@2.0"  # A has 1 worker, B 2
        await pilot.press("plus")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "Scale noop on 2 members from 1-2 to 2-3 worker(s) each?" in screen_text(app)
        await pilot.press("y")
        await wait_for(pilot, lambda: bool(source.calls))
        assert source.calls == [("scale_members", ("noop", {MEMBER_A: (2, 2), MEMBER_B: (3, 3)}), {"version": None})]
        await wait_for(pilot, lambda: "scale noop: done on 2 members" in screen_text(app))


async def test_minus_leaves_out_members_already_at_zero() -> None:
    base = fleet()
    noop = base.model("noop")
    assert noop is not None
    parts = (dataclasses.replace(noop.parts[0], min_workers=0, workers_total=0, workers_ready=0), noop.parts[1])
    snapshot = dataclasses.replace(base, models=tuple(dataclasses.replace(r, parts=parts) if r.name == "noop" else r
                                                      for r in base.models))
    source = ScriptedFleetSource([snapshot])
    app = _app(source)
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        await pilot.press("minus")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "Scale noop on 1 member from 2 to 1 worker(s) each?" in screen_text(app)
        await pilot.press("y")
        await wait_for(pilot, lambda: bool(source.calls))
        assert source.calls[0][1] == ("noop", {MEMBER_B: (1, 1)})


async def test_unregister_and_register_say_every_member() -> None:
    source = ScriptedFleetSource([fleet()])
    app = _app(source)
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "Unregister noop on 2 members? Its workers stop." in screen_text(app)
        await pilot.press("y")
        await wait_for(pilot, lambda: len(source.calls) == 1)
        assert source.calls[0][:2] == ("unregister", ("noop",))
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, RegisterScreen))
        assert "Register a model on every member" in screen_text(app)


async def test_a_partial_failure_of_an_action_names_the_member() -> None:
    from mmsctl.client.fanout import MembersFailed

    class Failing(ScriptedFleetSource):
        async def scale_members(self, *args: object, **kwargs: object) -> str:
            raise MembersFailed(f"scale noop failed on 1 of 2 members: {MEMBER_B} (connection refused)",
                                failed=[MEMBER_B])

    app = _app(Failing([fleet()]))
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        await pilot.press("plus", "y")
        await wait_for(pilot, lambda: f"failed on 1 of 2 members: {MEMBER_B}" in screen_text(app))


async def test_every_member_down_keeps_the_models_and_shows_each_member_down() -> None:
    from mmsctl.tui.fleet import fleet_snapshot, member_status
    from mmsctl.tui.snapshot import ServerStatus, Snapshot

    def down(name: str) -> Snapshot:
        return Snapshot(200.0, ServerStatus(f"http://{name}", error="connection refused"))

    dead = fleet_snapshot("3 members", 200.0, [(member_status(n, f"http://{n}", down(n)), down(n))
                                               for n in (MEMBER_A, MEMBER_B, MEMBER_C)])
    app = _app(ScriptedFleetSource([fleet(), dead]))
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        app.poll()
        await wait_for(pilot, lambda: app.polls >= 2)
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, MembersScreen))
        await wait_settled(pilot, app)
        text = screen_text(app)
        assert "● unreachable" in text and "retrying" in text
        assert [_line(app, n)[1] for n in (MEMBER_A, MEMBER_B, MEMBER_C)] == ["down"] * 3
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, MembersScreen))
        assert "squeezenet" in screen_text(app)  # the last models stay


async def test_snapshot_fleet_model_detail() -> None:
    app = _app(ScriptedFleetSource([fleet()]))
    async with app.run_test(size=(110, 32)) as pilot:
        await _started(pilot, app)
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ModelScreen))
        await pilot.pause()
        text = screen_text(app)
        assert_snapshot("fleet_model_detail", text)
        assert "on 2 of 3 members, ready on 2" in text
        assert _line(app, MEMBER_A)[:3] == [MEMBER_A, "2/2", "2"]  # the per-member table
        assert sum(1 for line in text.splitlines() if line.lstrip().startswith(MEMBER_B)) == 3  # + 2 workers


async def test_a_fleet_still_waiting_for_its_members_is_connecting_not_an_error() -> None:
    from mmsctl.tui.fleet import fleet_snapshot, member_status

    waiting = fleet_snapshot("2 members", 1.0, [(member_status(n, f"http://{n}", None), None)
                                                for n in (MEMBER_A, MEMBER_B)])
    app = _app(ScriptedFleetSource([waiting, fleet()]))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.polls >= 1)
        await pilot.pause()
        text = screen_text(app)
        assert "connecting…" in text and "retrying" not in text and app.snapshot is None
        app.poll()
        await wait_for(pilot, lambda: app.polls >= 2)
        await pilot.pause()
        assert "squeezenet" in screen_text(app)
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, MembersScreen))
        await pilot.press("end")  # Home/End move the members' cursor too
        await wait_for(pilot, lambda: app.screen.query_one("#members").cursor_row == 2)
        await pilot.press("home")
        await wait_for(pilot, lambda: app.screen.query_one("#members").cursor_row == 0)
