"""What `mmsctl top` shows, as immutable data, and the arithmetic that derives it.

A :class:`Snapshot` is one poll of a server: its health, the host's CPU and
memory, and one :class:`ModelRow` per model (with its :class:`WorkerRow` s).
Rates come from the difference of two scrapes of a Prometheus counter, and
p50/p99 from the difference of two scrapes of a histogram's buckets, the way
``rate()`` and ``histogram_quantile()`` do in PromQL.

A fleet's snapshot is the same shape: each model row combines the model's rows
on every member (kept as its ``parts``), and ``members`` holds one
:class:`MemberStatus` per member (:mod:`mmsctl.tui.fleet` does the combining).

A value the server does not give is ``None`` ("unavailable"), never ``0``:
real MMS has no metrics endpoint, so its requests/s is unknown, not zero.
This module imports only the standard library, so ``--once`` and the tests
use it without Textual.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any, Deque, Literal, Mapping, Optional

__all__ = [
    "Buckets",
    "HostStats",
    "MemberStatus",
    "ModelRow",
    "SeriesPoint",
    "SeriesStore",
    "ServerKind",
    "ServerStatus",
    "Snapshot",
    "WorkerRow",
    "bucket_increase",
    "counter_increase",
    "histogram_quantile",
    "mean_from_counters",
    "quantile",
    "rate",
]

ServerKind = Literal["mmsctl", "torchserve", "mms", "sagemaker", "unknown"]

#: A histogram's cumulative bucket counts keyed by upper bound (``le``), ``math.inf`` included.
Buckets = Mapping[float, float]
#: What a histogram observed in one interval: (upper bound, cumulative count) pairs, bounds ascending.
Increase = tuple[tuple[float, float], ...]


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class WorkerRow:
    """One worker process of a model, as the management API describes it."""

    id: str
    pid: Optional[int] = None
    status: str = "UNKNOWN"
    start_time: Optional[str] = None
    memory: Optional[int] = None  # bytes
    gpu: Optional[bool] = None
    member: Optional[str] = None  # the fleet member it runs on

    @property
    def ready(self) -> bool:
        return self.status.upper() == "READY"


@dataclass(frozen=True)
class ModelRow:
    """One model (one version) on the server, with what is known of its load.

    ``metrics`` says whether the server publishes metrics for it at all; with
    ``metrics`` true a ``None`` latency means "no traffic in the last interval".

    On a fleet: ``parts`` are the model's rows on each member (``member`` names
    it), ``members_present``/``members_healthy`` on how many members it is listed /
    has a ready worker on a healthy member, and ``mixed`` names the fields whose
    value differs between members (shown as "mixed", the value itself is ``None``).
    ``latency`` is the interval's latency histogram (milliseconds), kept so a fleet
    can combine percentiles from every member's observations.
    """

    name: str
    version: Optional[str] = None
    workers_ready: Optional[int] = None
    workers_total: Optional[int] = None
    min_workers: Optional[int] = None
    max_workers: Optional[int] = None
    batch_size: Optional[int] = None
    max_batch_delay: Optional[int] = None
    queue_depth: Optional[float] = None
    requests_per_s: Optional[float] = None
    errors_per_s: Optional[float] = None
    p50_ms: Optional[float] = None
    p99_ms: Optional[float] = None
    mean_ms: Optional[float] = None
    status: Optional[str] = None
    url: Optional[str] = None
    metrics: bool = False
    workers: tuple[WorkerRow, ...] = ()
    member: Optional[str] = None
    members_present: Optional[int] = None
    members_healthy: Optional[int] = None
    mixed: tuple[str, ...] = ()
    parts: tuple["ModelRow", ...] = ()
    latency: Optional[Increase] = field(default=None, repr=False)

    @property
    def key(self) -> str:
        """Stable identity across polls (name and version)."""
        return f"{self.name}@{self.version}" if self.version else self.name


@dataclass(frozen=True)
class HostStats:
    """CPU and memory of the machine the server runs on, where known."""

    cpu_percent: Optional[float] = None
    memory_used: Optional[int] = None  # bytes
    memory_total: Optional[int] = None  # bytes
    source: str = "unavailable"  # "local" (psutil), "server" (its metrics) or "unavailable"

    @property
    def memory_percent(self) -> Optional[float]:
        if self.memory_used is None or not self.memory_total:
            return None
        return 100.0 * self.memory_used / self.memory_total


@dataclass(frozen=True)
class ServerStatus:
    """Who answered and how healthy it says it is."""

    url: str
    kind: ServerKind = "unknown"
    reachable: bool = False
    health: Optional[str] = None  # the /ping status text, e.g. "Healthy"
    metrics: bool = False  # whether a Prometheus endpoint answered
    error: Optional[str] = None  # why the last poll failed, for the status line

    @property
    def healthy(self) -> bool:
        return self.reachable and (self.health or "").lower() == "healthy"


@dataclass(frozen=True)
class MemberStatus:
    """One member of a fleet as its last poll saw it, for the members view.

    ``server.error`` is why its last poll failed (it is down now); ``last_error``
    stays after it recovers, with when (``last_error_at``, the poll's clock).
    ``waiting`` is true until its first poll has answered or failed.
    """

    name: str
    server: ServerStatus
    host: HostStats = field(default_factory=HostStats)
    models: Optional[int] = None
    workers_ready: Optional[int] = None
    workers_total: Optional[int] = None
    requests_per_s: Optional[float] = None
    poll_ms: Optional[float] = None
    waiting: bool = False
    last_error: Optional[str] = None
    last_error_at: Optional[float] = None

    @property
    def state(self) -> str:
        """``waiting``, ``down``, ``up`` or ``unhealthy`` (answers, but its /ping does not say Healthy)."""
        if self.waiting:
            return "waiting"
        if not self.server.reachable:
            return "down"
        return "up" if self.server.healthy else "unhealthy"


@dataclass(frozen=True)
class Snapshot:
    """One complete poll; the screens render only this."""

    taken_at: float
    server: ServerStatus
    host: HostStats = field(default_factory=HostStats)
    models: tuple[ModelRow, ...] = ()
    poll_ms: Optional[float] = None  # how long the poll took
    members: tuple[MemberStatus, ...] = ()  # a fleet's members; empty for one server

    @property
    def is_fleet(self) -> bool:
        return bool(self.members)

    def model(self, key: str) -> Optional[ModelRow]:
        for row in self.models:
            if row.key == key or row.name == key:
                return row
        return None

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--once -o json|yaml`` (unavailable stays ``null``)."""
        data = asdict(self)
        data["server"]["healthy"] = self.server.healthy
        data["host"]["memory_percent"] = self.host.memory_percent
        for row in data["models"]:
            _drop_latency(row)
        for member, status in zip(data["members"], self.members):
            member["state"] = status.state
        if not self.members:
            del data["members"]
        return data


def _drop_latency(row: dict[str, Any]) -> None:
    """The histogram is for combining, not for scripts (and its +Inf bound is not JSON)."""
    row.pop("latency", None)
    for part in row.get("parts", ()):
        _drop_latency(part)


# --------------------------------------------------------------------------- math


def counter_increase(previous: Optional[float], current: Optional[float]) -> Optional[float]:
    """How much a counter grew between two scrapes; a counter that went down was reset."""
    if previous is None or current is None:
        return None
    if current < previous:  # server restarted: the counter began again from zero
        return current
    return current - previous


def rate(previous: Optional[float], current: Optional[float], seconds: float) -> Optional[float]:
    """Per-second increase of a counter; ``None`` without two scrapes."""
    increase = counter_increase(previous, current)
    if increase is None or seconds <= 0:
        return None
    return increase / seconds


def mean_from_counters(
    sum_prev: Optional[float],
    sum_cur: Optional[float],
    count_prev: Optional[float],
    count_cur: Optional[float],
) -> Optional[float]:
    """Mean of what was observed between scrapes (a ``_sum``/``_count`` pair); ``None`` if nothing was."""
    total = counter_increase(sum_prev, sum_cur)
    count = counter_increase(count_prev, count_cur)
    if total is None or not count:
        return None
    return total / count


def bucket_increase(previous: Optional[Buckets], current: Optional[Buckets]) -> Optional[Increase]:
    """What a histogram observed between two scrapes, as cumulative counts by ascending bound.

    ``None`` without two scrapes or without a ``+Inf`` bucket. A bucket that went down
    means the server restarted: the current counts are the increase.
    """
    if not current or previous is None:
        return None
    bounds = sorted(current)
    if not math.isinf(bounds[-1]):
        return None
    reset = any(current[b] < previous.get(b, 0.0) for b in bounds)
    counts = [current[b] - (0.0 if reset else previous.get(b, 0.0)) for b in bounds]
    # Cumulative counts must not decrease; clamp scrape noise the way Prometheus does.
    for i in range(1, len(counts)):
        counts[i] = max(counts[i], counts[i - 1])
    return tuple(zip(bounds, counts))


def histogram_quantile(q: float, previous: Optional[Buckets], current: Optional[Buckets]) -> Optional[float]:
    """The q-quantile of what a histogram observed between two scrapes (PromQL's algorithm).

    Bucket counts are cumulative. Within the bucket holding the rank the value is
    interpolated linearly; a rank in the ``+Inf`` bucket gives the largest finite
    bound. ``None`` when nothing was observed or the buckets are unusable.
    """
    return quantile(q, bucket_increase(previous, current))


def quantile(q: float, increase: Optional[Increase]) -> Optional[float]:
    """The q-quantile of one interval's observations (:func:`bucket_increase`); ``None`` if there were none."""
    if not increase or not 0.0 <= q <= 1.0:
        return None
    bounds = [b for b, _ in increase]
    counts = [c for _, c in increase]
    total = counts[-1]
    if total <= 0:
        return None
    rank = q * total
    for i, (bound, cumulative) in enumerate(zip(bounds, counts)):
        if cumulative >= rank:
            if math.isinf(bound):
                return bounds[-2] if len(bounds) > 1 else None
            lower = bounds[i - 1] if i > 0 else 0.0
            below = counts[i - 1] if i > 0 else 0.0
            in_bucket = cumulative - below
            if in_bucket <= 0:
                return bound
            if i == 0 and bound <= 0:
                return bound
            return lower + (bound - lower) * (rank - below) / in_bucket
    return None  # pragma: no cover - the +Inf bucket always holds the rank


# --------------------------------------------------------------------------- history


@dataclass(frozen=True)
class SeriesPoint:
    """One model's load at one poll, for the detail charts."""

    t: float
    requests_per_s: Optional[float]
    p50_ms: Optional[float]
    p99_ms: Optional[float]
    queue_depth: Optional[float]


class SeriesStore:
    """The last few minutes of each model's load, fed one snapshot at a time."""

    def __init__(self, window_s: float = 300.0, interval_s: float = 1.0) -> None:
        self.maxlen = max(10, int(math.ceil(window_s / max(interval_s, 0.05))))
        self._series: dict[str, Deque[SeriesPoint]] = {}

    def record(self, snapshot: Snapshot) -> None:
        if not snapshot.server.reachable:
            return
        present = set()
        for row in snapshot.models:
            present.add(row.key)
            series = self._series.setdefault(row.key, deque(maxlen=self.maxlen))
            series.append(
                SeriesPoint(snapshot.taken_at, row.requests_per_s, row.p50_ms, row.p99_ms, row.queue_depth)
            )
        for gone in set(self._series) - present:
            del self._series[gone]

    def points(self, key: str) -> list[SeriesPoint]:
        return list(self._series.get(key, ()))

    def values(self, key: str, attribute: str) -> list[float]:
        """The known values of one field, oldest first (unavailable points left out)."""
        return [v for v in (getattr(p, attribute) for p in self._series.get(key, ())) if v is not None]

