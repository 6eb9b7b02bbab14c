"""A latency histogram with bounded memory: HDR-style log-linear buckets in microseconds.

A sweep can run for hours at thousands of requests per second, so keeping every
sample is not an option. Values below 256 µs are exact; above, each power of two
is split into 128 buckets, so a percentile is off by less than 0.8 % (the max is
kept exactly). Recording is a few integer operations, and two histograms merge by
adding counts, which is all the load generator needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["PERCENTILES", "LatencyHistogram"]

_SUB = 128  # buckets per power of two above _LINEAR
_LINEAR = 2 * _SUB  # values below this are counted exactly
_MAX_US = (1 << 42) - 1  # about 51 days; anything longer is clamped (and shows as max)
#: The figures a level reports, as (key, quantile).
PERCENTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("p99.9", 0.999))


def _index(us: int) -> int:
    if us < _LINEAR:
        return us if us > 0 else 0
    shift = us.bit_length() - 8  # keep the top 8 bits: (us >> shift) is in [128, 255]
    return _LINEAR + (shift - 1) * _SUB + ((us >> shift) - _SUB)


def _upper(index: int) -> int:
    """The highest value that lands in bucket *index*."""
    if index < _LINEAR:
        return index
    shift = (index - _LINEAR) // _SUB + 1
    mantissa = (index - _LINEAR) % _SUB + _SUB
    return ((mantissa + 1) << shift) - 1


@dataclass
class LatencyHistogram:
    """Counts of latencies in microsecond buckets; ``counts`` is sparse (bucket index -> count)."""

    counts: dict[int, int] = field(default_factory=dict)
    total: int = 0
    max_us: int = 0

    def record(self, seconds: float) -> None:
        us = int(seconds * 1_000_000)
        if us > _MAX_US:
            us = _MAX_US
        index = _index(us)
        counts = self.counts
        counts[index] = counts.get(index, 0) + 1
        self.total += 1
        if us > self.max_us:
            self.max_us = us

    def merge(self, other: "LatencyHistogram") -> None:
        for index, count in other.counts.items():
            self.counts[index] = self.counts.get(index, 0) + count
        self.total += other.total
        self.max_us = max(self.max_us, other.max_us)

    def quantile_ms(self, q: float) -> float:
        """The latency at quantile *q* (0..1) in ms: the smallest bucket covering ``ceil(q * n)`` samples."""
        if self.total == 0:
            return 0.0
        rank = max(1, math.ceil(q * self.total))
        seen = 0
        for index in sorted(self.counts):
            seen += self.counts[index]
            if seen >= rank:
                return min(_upper(index), self.max_us) / 1000.0
        return self.max_us / 1000.0

    def summary_ms(self) -> dict[str, float]:
        """``{"p50", "p90", "p99", "p99.9", "max"}`` in ms (empty when nothing was recorded)."""
        if self.total == 0:
            return {}
        out = {key: round(self.quantile_ms(q), 3) for key, q in PERCENTILES}
        out["max"] = round(self.max_us / 1000.0, 3)
        return out
