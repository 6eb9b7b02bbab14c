"""How a fleet's snapshot combines its members' (mmsctl/tui/fleet.py): pure data, no I/O."""

from __future__ import annotations

import dataclasses
import json

from mmsctl.tui.fleet import combine_models, fleet_snapshot, member_status
from mmsctl.tui.snapshot import ModelRow, ServerStatus, Snapshot, quantile
from tests.tui.support import MEMBER_A, MEMBER_B, MEMBER_C, fleet, latency, member_snapshot, worker


def _part(member: str, **fields: object) -> ModelRow:
    return dataclasses.replace(ModelRow("m", "1.0", metrics=True), member=member, **fields)  # type: ignore[arg-type]


def test_counts_and_rates_are_summed_over_the_members_that_have_the_model() -> None:
    row = fleet().model("noop")
    assert row is not None
    # A (1 worker) and B (2 workers) answered; C is down and counts for nothing.
    assert (row.workers_ready, row.workers_total, row.min_workers, row.max_workers) == (3, 3, 3, 3)
    assert (row.members_present, row.members_healthy) == (2, 2)
    squeezenet = fleet().model("squeezenet")
    assert squeezenet is not None and squeezenet.requests_per_s == 40.0 and squeezenet.queue_depth == 2.0
    assert [p.member for p in squeezenet.parts] == [MEMBER_A, MEMBER_B]
    assert {w.member for w in squeezenet.workers} == {MEMBER_A, MEMBER_B} and len(squeezenet.workers) == 4


def test_percentiles_come_from_the_members_histograms_added_together() -> None:
    """A fast member (100 requests under 5 ms) and a slow one (100 between 25 and 50 ms): the fleet's
    p50 is the median of all 200 requests (the top of the fast bucket), its p99 in the slow bucket -
    not the mean of the members' p50s, and not either member's."""
    fast = _part("a", requests_per_s=100.0, latency=latency(100, 0, 0, 0, 0), mean_ms=2.0)
    slow = _part("b", requests_per_s=100.0, latency=latency(0, 0, 0, 100, 0), mean_ms=40.0)
    fast = dataclasses.replace(fast, p50_ms=quantile(0.5, fast.latency), p99_ms=quantile(0.99, fast.latency))
    slow = dataclasses.replace(slow, p50_ms=quantile(0.5, slow.latency), p99_ms=quantile(0.99, slow.latency))
    row = combine_models([fast, slow], ["a", "b"])
    assert row.p50_ms == 5.0  # rank 100 of 200: the last request of the first bucket
    assert row.p99_ms == 25.0 + 25.0 * (198 - 100) / 100  # rank 198, linear within (25, 50]
    assert row.mean_ms == 21.0  # weighted by requests/s
    assert (fast.p50_ms, slow.p50_ms) == (2.5, 37.5)


def test_percentiles_fall_back_to_the_worst_member_when_histograms_do_not_add_up() -> None:
    odd = ((1.0, 10.0), (float("inf"), 10.0))  # other bucket bounds
    a = _part("a", requests_per_s=10.0, latency=latency(10, 0, 0, 0, 0), p50_ms=2.5, p99_ms=4.9)
    b = _part("b", requests_per_s=10.0, latency=odd, p50_ms=0.5, p99_ms=0.99)
    row = combine_models([a, b], ["a", "b"])
    assert (row.p50_ms, row.p99_ms) == (2.5, 4.9)
    # A member whose latency came without a histogram (no buckets): the same upper bound.
    c = _part("c", requests_per_s=10.0, p50_ms=80.0, p99_ms=90.0)
    assert combine_models([a, c], ["a", "c"]).p99_ms == 90.0
    # Nobody had traffic: no latency, not zero.
    idle = combine_models([_part("a"), _part("b")], ["a", "b"])
    assert (idle.p50_ms, idle.p99_ms, idle.mean_ms, idle.requests_per_s) == (None, None, None, None)


def test_settings_members_disagree_on_are_mixed_and_unknown_stays_unknown() -> None:
    snapshot = fleet(batch=8)  # B batches 8, A 4
    row = snapshot.model("squeezenet")
    assert row is not None and row.batch_size is None and row.mixed == ("batch_size",)
    assert row.version == "1.0" and row.max_batch_delay == 50
    mms = combine_models([_part("a", metrics=False), _part("b", metrics=False)], ["a", "b"])
    assert mms.requests_per_s is None and mms.workers_total is None and not mms.metrics


def test_a_model_without_a_ready_worker_on_a_member_is_present_not_healthy() -> None:
    a = _part("a", workers_ready=1, workers_total=1, workers=(worker(0),))
    b = _part("b", workers_ready=0, workers_total=1, workers=(worker(1, "STARTING"),))
    row = combine_models([a, b, dataclasses.replace(a, member="c")], ["a", "b"])  # c: its server is unhealthy
    assert (row.members_present, row.members_healthy) == (3, 1)


def test_the_fleet_status_names_the_members_that_are_down() -> None:
    snapshot = fleet()
    assert snapshot.is_fleet and snapshot.server.reachable and snapshot.server.kind == "mmsctl"
    assert snapshot.server.health == "2/3 healthy" and not snapshot.server.healthy
    assert snapshot.server.error == (f"1 of 3 members down: {MEMBER_C} "
                                     f"(cannot connect to {MEMBER_C}: connection refused)")
    assert [m.state for m in snapshot.members] == ["up", "up", "down"]
    assert (snapshot.members[1].models, snapshot.members[1].workers_total, snapshot.members[1].requests_per_s) == (
        2, 4, 30.0)
    everyone = fleet(c_down=False)
    assert everyone.server.healthy and everyone.server.error is None


def test_no_member_answering_is_an_unreachable_fleet() -> None:
    down = Snapshot(5.0, ServerStatus("http://x:8081", error="cannot connect to x:8081: connection refused"))
    snapshot = fleet_snapshot("2 members", 5.0, [(member_status("x", "http://x:8081", down), down),
                                                 (member_status("y", "http://y:8081", None), None)])
    assert not snapshot.server.reachable and snapshot.models == ()
    assert [m.state for m in snapshot.members] == ["down", "waiting"]
    assert snapshot.server.error == "1 of 2 members down: x (cannot connect to x:8081: connection refused)"
    several = fleet_snapshot("2 members", 5.0, [(member_status(n, n, down), down) for n in "xy"])
    assert several.server.error == "2 of 2 members down: x, y"


def test_a_mixed_fleet_has_no_one_kind() -> None:
    mms = dataclasses.replace(member_snapshot(MEMBER_B), server=ServerStatus("http://b", "mms", True, "Healthy"))
    a = member_snapshot(MEMBER_A)
    snapshot = fleet_snapshot("2", 1.0, [(member_status(MEMBER_A, "a", a), a), (member_status(MEMBER_B, "b", mms), mms)])
    assert snapshot.server.kind == "unknown" and snapshot.server.metrics


def test_json_of_a_fleet_has_members_and_parts_and_is_strict_json() -> None:
    data = fleet().to_dict()
    text = json.dumps(data, allow_nan=False)  # the histograms' +Inf bound stays out
    assert "latency" not in text
    assert [m["state"] for m in data["members"]] == ["up", "up", "down"]
    squeezenet = next(m for m in data["models"] if m["name"] == "squeezenet")
    assert [p["member"] for p in squeezenet["parts"]] == [MEMBER_A, MEMBER_B]
    assert squeezenet["members_present"] == 2
    assert "members" not in member_snapshot(MEMBER_A).to_dict()  # one server: as before
