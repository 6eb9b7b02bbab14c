"""The latency histogram: percentiles within its stated precision of exact ones, exact max, merging."""

from __future__ import annotations

import math
import random

import pytest

from mmsctl.loadtest.histogram import PERCENTILES, LatencyHistogram


def _exact(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_percentiles_are_within_one_percent_of_the_exact_ones(seed: int) -> None:
    rng = random.Random(seed)
    samples = [rng.lognormvariate(-4, 1.2) for _ in range(20_000)]  # ~1 ms .. seconds, long tail
    hist = LatencyHistogram()
    for s in samples:
        hist.record(s)
    for _key, q in PERCENTILES:
        exact_ms = _exact(samples, q) * 1000
        assert hist.quantile_ms(q) == pytest.approx(exact_ms, rel=0.01, abs=0.002)
    assert hist.summary_ms()["max"] == pytest.approx(max(samples) * 1000, abs=0.001)
    assert hist.total == len(samples)


def test_summary_is_ordered_and_small_values_are_exact() -> None:
    hist = LatencyHistogram()
    for us in (5, 5, 7, 200, 255):
        hist.record(us / 1e6)
    summary = hist.summary_ms()
    assert summary["p50"] == 0.007
    values = [summary[k] for k in ("p50", "p90", "p99", "p99.9", "max")]
    assert values == sorted(values)
    assert summary["max"] == 0.255


def test_merge_equals_recording_everything_in_one() -> None:
    rng = random.Random(7)
    a, b, both = LatencyHistogram(), LatencyHistogram(), LatencyHistogram()
    for i in range(5000):
        v = rng.expovariate(100)
        (a if i % 2 else b).record(v)
        both.record(v)
    a.merge(b)
    assert a == both


def test_memory_is_bounded_by_buckets_not_samples() -> None:
    hist = LatencyHistogram()
    for i in range(200_000):
        hist.record((i % 10_000) / 1000)  # 0 .. 10 s in 1 ms steps
    assert hist.total == 200_000
    assert len(hist.counts) < 2000
    hist.record(10**9)  # decades: clamped, never an error
    assert hist.max_us > 0


def test_empty_histogram_reports_nothing() -> None:
    assert LatencyHistogram().summary_ms() == {}
    assert LatencyHistogram().quantile_ms(0.99) == 0.0


def test_the_live_rate_is_over_the_measured_time_as_the_final_one() -> None:
    """The progress line's ok/s left out the warm-up from the answers but not from the seconds (39 vs 69.2)."""
    from mmsctl.loadtest.sweep import Tick

    tick = Tick("t", "1", 0, 1, elapsed_s=12.0, sent=700, ok=692, warmup_s=2.0)
    assert tick.ok_per_s == 69.2
    assert Tick("t", "1", 0, 1, elapsed_s=1.0, sent=5, ok=0, warmup_s=2.0).ok_per_s == 0.0
