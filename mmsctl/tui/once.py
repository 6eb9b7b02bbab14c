"""`mmsctl top --once`: one snapshot for scripts, without Textual.

Rates and percentiles need two scrapes, so it polls twice, ``interval`` apart
(like ``vmstat 1 2``); a server that cannot be reached is an error (exit 5),
not an empty snapshot. On a fleet, every member down is that error; some down
is :func:`members_down` (exit 4, after the snapshot is printed), as the other
fleet commands do.
"""

from __future__ import annotations

import asyncio
from typing import Optional

from mmsctl.client.fanout import MembersFailed, failure_message
from mmsctl.errors import ConnectionFailed
from mmsctl.tui.snapshot import Snapshot
from mmsctl.tui.source import DataSource

__all__ = ["ServerUnreachable", "members_down", "rows_for_members", "rows_for_table", "snapshot_once"]


class ServerUnreachable(ConnectionFailed):
    """``--once`` could not poll the server (down, unresolvable, or refusing our token)."""

    reference = "server-unreachable"


async def _twice(source: DataSource, interval: float) -> Snapshot:
    try:
        first = await source.fetch()
        if not first.server.reachable:
            return first
        await asyncio.sleep(interval)
        return await source.fetch()
    finally:
        await source.aclose()


def snapshot_once(source: DataSource, interval: float = 1.0) -> Snapshot:
    """Poll *source* twice and return the second snapshot; raise if the server is unreachable."""
    snapshot = asyncio.run(_twice(source, interval))
    if not snapshot.server.reachable:
        if snapshot.is_fleet:
            raise ServerUnreachable(_down_message(snapshot))
        raise ServerUnreachable(snapshot.server.error or f"cannot connect to {snapshot.server.url}")
    return snapshot


def _down_message(snapshot: Snapshot) -> str:
    down = [(m.name, m.server.error or m.state) for m in snapshot.members if m.state in ("down", "waiting")]
    return failure_message("top", down, len(snapshot.members))


def members_down(snapshot: Snapshot) -> Optional[MembersFailed]:
    """The error for a fleet some of whose members did not answer (None when all did)."""
    failed = [m.name for m in snapshot.members if m.state in ("down", "waiting")]
    if not failed:
        return None
    return MembersFailed(_down_message(snapshot), failed=failed)


def rows_for_table(snapshot: Snapshot) -> list[dict[str, Optional[str]]]:
    """The models as the table shows them (same formatting as the live view)."""
    from mmsctl.tui.format import fmt_count, fmt_int, fmt_ms, fmt_rate, fmt_workers

    rows: list[dict[str, Optional[str]]] = []
    for r in snapshot.models:
        rows.append({
            "name": r.name,
            "version": "mixed" if "version" in r.mixed else r.version or "-",
            "members": fmt_workers(r.members_healthy, r.members_present) if r.parts else None,
            "ready": fmt_workers(r.workers_ready, r.workers_total),
            "min": fmt_int(r.min_workers),
            "max": fmt_int(r.max_workers),
            "batch": "mixed" if "batch_size" in r.mixed else fmt_int(r.batch_size),
            "queue": fmt_count(r.queue_depth, r.metrics),
            "rps": fmt_rate(r.requests_per_s, r.metrics),
            "p50": fmt_ms(r.p50_ms, r.metrics),
            "p99": fmt_ms(r.p99_ms, r.metrics),
            "mean": fmt_ms(r.mean_ms, r.metrics),
            "errors": fmt_rate(r.errors_per_s, r.metrics),
            "url": r.url or "-",
        })
    return rows


def rows_for_members(snapshot: Snapshot) -> list[dict[str, str]]:
    """A fleet's members as the members view shows them."""
    from mmsctl.tui.members import MEMBER_KEYS, member_cells

    return [dict(zip(MEMBER_KEYS, member_cells(m, snapshot.taken_at))) for m in snapshot.members]
