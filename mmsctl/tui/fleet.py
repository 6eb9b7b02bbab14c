"""A fleet's snapshot from its members' snapshots: each model combined across members, one status per member.

How each number of a model combines (docs/top.md says the same):

* workers ready/total, min/max workers, queue, requests/s, errors/s: the sum over
  the members that have the model (a fleet's capacity and load are the sums);
* p50/p99: from the members' latency histograms added bucket by bucket - the
  quantile of every request the fleet served in the interval, as PromQL's
  ``histogram_quantile(q, sum by (le) (rate(...)))``. Where members' buckets do
  not line up (or a member has no histogram), the largest member's value: an
  upper bound, never an average of percentiles (which means nothing);
* mean latency: the members' means weighted by their requests/s;
* version, batch size, max batch delay, status, URL: the common value, or
  "mixed" (``ModelRow.mixed``) where members differ;
* members: on how many (reachable) members the model is listed, and on how many
  of those it has a ready worker on a healthy server.

Only members that answered their last poll count; a member that is down shows in
the members view, not as zeros in the models.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable, Optional, Sequence, TypeVar

from mmsctl.tui.snapshot import HostStats, Increase, MemberStatus, ModelRow, ServerStatus, Snapshot, quantile

__all__ = ["combine_models", "fleet_snapshot", "member_status"]

T = TypeVar("T")
N = TypeVar("N", int, float)


def _sum(values: Iterable[Optional[N]]) -> Optional[N]:
    """The sum of the known values; ``None`` (unknown) when no member knows it."""
    total: Optional[N] = None
    for value in values:
        if value is not None:
            total = value if total is None else total + value
    return total


def _common(values: Iterable[Optional[T]]) -> tuple[Optional[T], bool]:
    """The one value every member that knows it has, and whether they differ."""
    seen: list[T] = []
    for value in values:
        if value is not None and value not in seen:
            seen.append(value)
    return (seen[0] if len(seen) == 1 else None), len(seen) > 1


def _merged_latency(parts: Sequence[ModelRow]) -> tuple[Optional[Increase], bool]:
    """The members' interval histograms added bucket by bucket; False when they cannot be added."""
    observed = [p.latency for p in parts if p.latency]
    if not observed:
        return None, not any(p.p50_ms is not None for p in parts)
    bounds = [b for b, _ in observed[0]]
    if any([b for b, _ in h] != bounds for h in observed[1:]):
        return None, False
    if any(p.latency is None and p.p50_ms is not None for p in parts):
        return None, False  # a member measured latency some other way
    return tuple((bound, sum(h[i][1] for h in observed)) for i, bound in enumerate(bounds)), True


def _weighted_mean(parts: Sequence[ModelRow]) -> Optional[float]:
    pairs = [(p.mean_ms, p.requests_per_s) for p in parts if p.mean_ms is not None]
    if not pairs:
        return None
    if all(rps is not None and rps > 0 for _, rps in pairs):
        total = sum(rps for _, rps in pairs if rps is not None)
        return sum(mean * rps for mean, rps in pairs if rps is not None) / total
    return max(mean for mean, _ in pairs)


def combine_models(parts: Sequence[ModelRow], healthy_members: Iterable[str]) -> ModelRow:
    """One model's rows on several members (each with ``member`` set) as one row."""
    healthy = set(healthy_members)
    mixed: list[str] = []

    def common(field_name: str) -> Optional[T]:
        value, differs = _common(getattr(p, field_name) for p in parts)
        if differs:
            mixed.append(field_name)
        return value

    version, batch_size, max_batch_delay = common("version"), common("batch_size"), common("max_batch_delay")
    status, url = common("status"), common("url")
    latency, merged = _merged_latency(parts)
    if merged:
        p50, p99 = quantile(0.5, latency), quantile(0.99, latency)
    else:
        p50 = max((p.p50_ms for p in parts if p.p50_ms is not None), default=None)
        p99 = max((p.p99_ms for p in parts if p.p99_ms is not None), default=None)
    return ModelRow(
        name=parts[0].name,
        version=version,
        workers_ready=_sum(p.workers_ready for p in parts),
        workers_total=_sum(p.workers_total for p in parts),
        min_workers=_sum(p.min_workers for p in parts),
        max_workers=_sum(p.max_workers for p in parts),
        batch_size=batch_size,
        max_batch_delay=max_batch_delay,
        queue_depth=_sum(p.queue_depth for p in parts),
        requests_per_s=_sum(p.requests_per_s for p in parts),
        errors_per_s=_sum(p.errors_per_s for p in parts),
        p50_ms=p50,
        p99_ms=p99,
        mean_ms=_weighted_mean(parts),
        status=status,
        url=url,
        metrics=any(p.metrics for p in parts),
        workers=tuple(w for p in parts for w in p.workers),
        members_present=len(parts),
        members_healthy=sum(1 for p in parts if p.member in healthy and (p.workers_ready or 0) > 0),
        mixed=tuple(mixed),
        parts=tuple(parts),
    )


def _member_rows(name: str, snapshot: Snapshot) -> list[ModelRow]:
    return [replace(row, member=name, workers=tuple(replace(w, member=name) for w in row.workers))
            for row in snapshot.models]


def member_status(name: str, url: str, snapshot: Optional[Snapshot], *, last_error: Optional[str] = None,
                  last_error_at: Optional[float] = None) -> MemberStatus:
    """A member's line in the members view, from its last snapshot (None: no answer yet)."""
    if snapshot is None:
        return MemberStatus(name, ServerStatus(url), waiting=True, last_error=last_error, last_error_at=last_error_at)
    if not snapshot.server.reachable:
        return MemberStatus(name, snapshot.server, poll_ms=snapshot.poll_ms,
                            last_error=last_error, last_error_at=last_error_at)
    rows = snapshot.models
    return MemberStatus(
        name, snapshot.server, snapshot.host,
        models=len(rows),
        workers_ready=_sum(r.workers_ready for r in rows) if rows else 0,
        workers_total=_sum(r.workers_total for r in rows) if rows else 0,
        requests_per_s=_sum(r.requests_per_s for r in rows) if rows else (0.0 if snapshot.server.metrics else None),
        poll_ms=snapshot.poll_ms, last_error=last_error, last_error_at=last_error_at,
    )


def fleet_snapshot(name: str, taken_at: float, members: Sequence[tuple[MemberStatus, Optional[Snapshot]]],
                   poll_ms: Optional[float] = None) -> Snapshot:
    """The fleet as one snapshot: models combined across the members that answered, and every member's status.

    ``server`` speaks for the fleet: reachable while any member is, "Healthy" only when every
    member is up and healthy (else "N/M healthy"), its error naming the members that are down
    (and why, for one; the members view says why for each).
    """
    up = [(status, snap) for status, snap in members if snap is not None and snap.server.reachable]
    healthy = [status.name for status, _ in up if status.server.healthy]
    by_name: dict[str, list[ModelRow]] = {}
    for status, snap in up:
        assert snap is not None
        for row in _member_rows(status.name, snap):
            by_name.setdefault(row.name, []).append(row)
    models = tuple(combine_models(parts, healthy) for parts in by_name.values())
    down = [s for s, _ in members if s.state == "down"]
    error = None
    if len(down) == 1:
        error = f"1 of {len(members)} members down: {down[0].name} ({down[0].server.error or 'unreachable'})"
    elif down:  # the reasons are in the members view
        error = f"{len(down)} of {len(members)} members down: {', '.join(s.name for s in down)}"
    kinds = {s.server.kind for s, _ in up}
    health = "Healthy" if len(healthy) == len(members) else f"{len(healthy)}/{len(members)} healthy"
    server = ServerStatus(
        url=name,  # the fleet's name: its members' URLs are in ``members``
        kind=kinds.pop() if len(kinds) == 1 else "unknown",
        reachable=bool(up),
        health=health if up else None,
        metrics=any(s.server.metrics for s, _ in up),
        error=error if up else (error or "no member has answered yet"),
    )
    return Snapshot(taken_at, server, HostStats(), models, poll_ms=poll_ms, members=tuple(s for s, _ in members))
