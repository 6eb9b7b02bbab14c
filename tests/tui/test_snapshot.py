"""The arithmetic behind `mmsctl top`: rates, percentiles, and "unavailable is not zero"."""

from __future__ import annotations

import math

import pytest

from mmsctl.tui.snapshot import (
    ModelRow,
    SeriesStore,
    ServerStatus,
    Snapshot,
    counter_increase,
    histogram_quantile,
    mean_from_counters,
    rate,
)

INF = math.inf


def test_rate_is_increase_per_second() -> None:
    assert rate(100.0, 130.0, 3.0) == pytest.approx(10.0)


def test_rate_needs_two_scrapes() -> None:
    assert rate(None, 130.0, 3.0) is None
    assert rate(100.0, None, 3.0) is None
    assert rate(100.0, 130.0, 0.0) is None


def test_counter_reset_counts_from_zero() -> None:
    # The server restarted between scrapes: 500 -> 20 means 20 new requests, not -480.
    assert counter_increase(500.0, 20.0) == 20.0
    assert rate(500.0, 20.0, 2.0) == pytest.approx(10.0)


def test_quantile_interpolates_inside_the_bucket() -> None:
    prev = {0.1: 0.0, 0.2: 0.0, 0.4: 0.0, INF: 0.0}
    # 10 observations <= 0.1, 10 more in (0.1, 0.2]
    cur = {0.1: 10.0, 0.2: 20.0, 0.4: 20.0, INF: 20.0}
    assert histogram_quantile(0.5, prev, cur) == pytest.approx(0.1)
    assert histogram_quantile(0.75, prev, cur) == pytest.approx(0.15)
    assert histogram_quantile(0.25, prev, cur) == pytest.approx(0.05)


def test_quantile_uses_only_what_happened_between_scrapes() -> None:
    # Long history of slow requests; in the last interval only fast ones.
    prev = {0.01: 0.0, 1.0: 1000.0, INF: 1000.0}
    cur = {0.01: 100.0, 1.0: 1100.0, INF: 1100.0}
    assert histogram_quantile(0.99, prev, cur) <= 0.01


def test_quantile_in_the_inf_bucket_is_the_largest_finite_bound() -> None:
    prev = {0.5: 0.0, 1.0: 0.0, INF: 0.0}
    cur = {0.5: 0.0, 1.0: 0.0, INF: 7.0}
    assert histogram_quantile(0.99, prev, cur) == 1.0


def test_quantile_without_traffic_is_unavailable_not_zero() -> None:
    same = {0.1: 5.0, INF: 5.0}
    assert histogram_quantile(0.5, same, dict(same)) is None
    assert histogram_quantile(0.5, None, same) is None


def test_quantile_after_a_reset_uses_the_new_counts() -> None:
    prev = {0.1: 50.0, 1.0: 100.0, INF: 100.0}
    cur = {0.1: 0.0, 1.0: 4.0, INF: 4.0}
    assert 0.1 < histogram_quantile(0.5, prev, cur) <= 1.0


def test_mean_from_sum_and_count() -> None:
    assert mean_from_counters(10.0, 16.0, 100.0, 103.0) == pytest.approx(2.0)
    assert mean_from_counters(10.0, 10.0, 100.0, 100.0) is None


def test_snapshot_json_keeps_unavailable_as_null() -> None:
    snap = Snapshot(1.0, ServerStatus("http://x", "mms", True, "Healthy"), models=(ModelRow("a", workers_ready=1),))
    data = snap.to_dict()
    assert data["models"][0]["requests_per_s"] is None
    assert data["models"][0]["workers_ready"] == 1
    assert data["server"]["healthy"] is True


def test_series_store_keeps_a_window_and_forgets_removed_models() -> None:
    store = SeriesStore(window_s=10, interval_s=1)
    server = ServerStatus("http://x", reachable=True)
    for t in range(30):
        store.record(Snapshot(float(t), server, models=(ModelRow("a", requests_per_s=float(t)),)))
    assert store.values("a", "requests_per_s") == [float(t) for t in range(20, 30)]
    assert store.values("a", "p50_ms") == []  # unknown points are left out, not drawn as 0
    store.record(Snapshot(31.0, server, models=(ModelRow("b"),)))
    assert store.points("a") == []
