"""FleetSource over scripted member sources: polling without waiting on the slow, bounds, actions."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mmsctl.client.fanout import Member, MembersFailed, parse_member
from mmsctl.errors import ApiError
from mmsctl.tui.fleet_source import FleetSource
from mmsctl.tui.snapshot import Snapshot
from tests.tui.support import MEMBER_A, MEMBER_B, ScriptedSource, member_snapshot

pytestmark = pytest.mark.anyio


def _members(*sources: ScriptedSource) -> list[tuple[Member, Any]]:
    return [(parse_member(f"http://m{i}:8081"), s) for i, s in enumerate(sources)]


async def test_members_are_combined_and_a_broken_source_is_one_down_member() -> None:
    class Broken(ScriptedSource):
        async def fetch(self) -> Snapshot:
            raise RuntimeError("a bug in one member's source")

    fleet = FleetSource("lab", _members(ScriptedSource([member_snapshot(MEMBER_A)]),
                                        ScriptedSource([member_snapshot(MEMBER_B)]), Broken([])))
    try:
        snapshot = await fleet.fetch()
    finally:
        await fleet.aclose()
    assert fleet.title == "lab (fleet, 3 members)"
    assert [m.state for m in snapshot.members] == ["up", "up", "down"]
    assert snapshot.members[2].server.error == "RuntimeError: a bug in one member's source"
    assert snapshot.members[2].server.url == "http://m2:8081"
    row = snapshot.model("squeezenet")
    assert row is not None and row.members_present == 2 and row.requests_per_s == 20.0


async def test_a_slow_member_does_not_hold_the_others_back() -> None:
    """Patience 0.1 s: the fetch returns without the slow member (still waiting on its first answer),
    and the next fetches poll the fast member again while the slow one's first poll goes on."""
    fast = ScriptedSource([member_snapshot(MEMBER_A)])
    slow = ScriptedSource([member_snapshot(MEMBER_B)], delay=30.0)
    fleet = FleetSource("lab", _members(fast, slow), patience=0.1)
    try:
        first = await fleet.fetch()
        second = await fleet.fetch()
    finally:
        await fleet.aclose()
    assert [m.state for m in first.members] == ["up", "waiting"]
    assert [m.state for m in second.members] == ["up", "waiting"]
    assert fast.fetches == 2 and slow.started == 1  # one poll of the slow member, never a pile-up
    assert slow.closed and fast.closed


async def test_a_member_past_its_deadline_is_down_with_the_reason() -> None:
    fleet = FleetSource("lab", _members(ScriptedSource([member_snapshot(MEMBER_A)]),
                                        ScriptedSource([member_snapshot(MEMBER_B)], delay=30.0)), deadline=0.2)
    try:
        snapshot = await fleet.fetch()
    finally:
        await fleet.aclose()
    down = snapshot.members[1]
    assert down.state == "down" and down.server.error == "m1:8081 did not answer in 0.2 s"
    assert down.last_error == down.server.error and down.last_error_at is not None


async def test_polls_share_the_concurrency_bound() -> None:
    """Bound 2, six members: never more than two polls in flight at once."""
    active, most = [0], [0]

    class Counting(ScriptedSource):
        async def fetch(self) -> Snapshot:
            active[0] += 1
            most[0] = max(most[0], active[0])
            await asyncio.sleep(0.02)
            active[0] -= 1
            return await super().fetch()

    fleet = FleetSource("lab", _members(*(Counting([member_snapshot(MEMBER_A)]) for _ in range(6))), concurrency=2)
    try:
        snapshot = await fleet.fetch()
    finally:
        await fleet.aclose()
    assert most[0] == 2 and [m.state for m in snapshot.members] == ["up"] * 6


async def test_a_member_that_recovers_keeps_its_last_error_with_the_time() -> None:
    from tests.tui.support import unreachable

    flaky = ScriptedSource([unreachable(50.0), member_snapshot(MEMBER_B, 60.0)])
    fleet = FleetSource("lab", _members(ScriptedSource([member_snapshot(MEMBER_A)]), flaky))
    try:
        assert (await fleet.fetch()).members[1].state == "down"
        member = (await fleet.fetch()).members[1]
    finally:
        await fleet.aclose()
    assert member.state == "up" and member.last_error_at == 50.0
    assert member.last_error and "connection refused" in member.last_error


async def test_actions_go_to_the_members_that_have_the_model_and_failures_name_them() -> None:
    a = ScriptedSource([member_snapshot(MEMBER_A)])
    b = ScriptedSource([member_snapshot(MEMBER_B)])
    empty = ScriptedSource([Snapshot(1.0, member_snapshot(MEMBER_B).server)])  # up, no models

    class Refusing(ScriptedSource):
        async def unregister(self, *args: Any, **kwargs: Any) -> str:
            raise ApiError("Model noop is busy (HTTP 409)", status=409)

    c = Refusing([member_snapshot(MEMBER_B)])
    fleet = FleetSource("lab", _members(a, b, empty, c))
    try:
        await fleet.fetch()
        done = await fleet.scale_members("noop", {"m0:8081": (2, 2), "m1:8081": (3, 4)})
        assert a.calls == [("scale", ("noop", 2, 2), {"version": None})]
        assert b.calls == [("scale", ("noop", 3, 4), {"version": None})]
        assert done == "scale noop: done on 2 members"
        await fleet.register("noop.mar", model_name="x", initial_workers=0)
        assert all(s.calls[-1][0] == "register" for s in (a, b, empty, c))
        with pytest.raises(MembersFailed) as caught:
            await fleet.unregister("noop")
        assert caught.value.failed == ["m3:8081"]
        assert caught.value.message == "unregister noop failed on 1 of 3 members: m3:8081 (Model noop is busy (HTTP 409))"
        assert not any(call[0] == "unregister" for call in empty.calls)  # it had no noop
        await fleet.scale("squeezenet", 1)
        assert a.calls[-1] == ("scale", ("squeezenet", 1, 1), {"version": None}) and empty.calls[-1][0] == "register"
    finally:
        await fleet.aclose()


async def test_focus_goes_to_every_member() -> None:
    sources = [ScriptedSource([member_snapshot(MEMBER_A)]) for _ in range(2)]
    fleet = FleetSource("lab", _members(*sources))
    fleet.set_focus("noop@2.0")
    assert [s.focus for s in sources] == ["noop@2.0", "noop@2.0"]
    await fleet.aclose()
