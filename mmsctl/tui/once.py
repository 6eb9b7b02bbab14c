"""`mmsctl top --once`: one snapshot for scripts, without Textual.

Rates and percentiles need two scrapes, so it polls twice, ``interval`` apart
(like ``vmstat 1 2``); a server that cannot be reached is an error (exit 5),
not an empty snapshot.
"""

from __future__ import annotations

import asyncio
from typing import Optional

from mmsctl.errors import ConnectionFailed
from mmsctl.tui.model import Snapshot
from mmsctl.tui.source import DataSource

__all__ = ["ServerUnreachable", "rows_for_table", "snapshot_once"]


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
        raise ServerUnreachable(snapshot.server.error or f"cannot connect to {snapshot.server.url}")
    return snapshot


def rows_for_table(snapshot: Snapshot) -> list[dict[str, Optional[str]]]:
    """The models as the table shows them (same formatting as the live view)."""
    from mmsctl.tui.format import fmt_count, fmt_int, fmt_ms, fmt_rate, fmt_workers

    rows: list[dict[str, Optional[str]]] = []
    for r in snapshot.models:
        rows.append({
            "name": r.name,
            "version": r.version or "-",
            "ready": fmt_workers(r.workers_ready, r.workers_total),
            "min": fmt_int(r.min_workers),
            "max": fmt_int(r.max_workers),
            "batch": fmt_int(r.batch_size),
            "queue": fmt_count(r.queue_depth, r.metrics),
            "rps": fmt_rate(r.requests_per_s, r.metrics),
            "p50": fmt_ms(r.p50_ms, r.metrics),
            "p99": fmt_ms(r.p99_ms, r.metrics),
            "mean": fmt_ms(r.mean_ms, r.metrics),
            "errors": fmt_rate(r.errors_per_s, r.metrics),
            "url": r.url or "-",
        })
    return rows
