"""The header line: which server, its health, host CPU/memory, and whether polling is paused.

For a fleet: how many members are up and healthy, their kinds, and the fleet's workers and requests/s.
"""

from __future__ import annotations

import time
from typing import Optional

from rich.text import Text
from textual.widgets import Static

from mmsctl.tui.format import fmt_bytes, fmt_percent, fmt_rate, fmt_workers
from mmsctl.tui.snapshot import Snapshot

__all__ = ["ServerHeader"]


class ServerHeader(Static):
    """Renders the server part of a Snapshot in one or two lines."""

    def show(self, snapshot: Optional[Snapshot], *, title: str, paused: bool, clock: bool) -> None:
        text = Text()
        text.append("mmsctl top", style="bold")
        text.append(f"  {title}")
        if snapshot is None:
            text.append("  connecting…", style="yellow")
        elif snapshot.is_fleet:
            _fleet(text, snapshot)
        else:
            server = snapshot.server
            if not server.reachable:
                text.append("  ● unreachable", style="bold red")
            elif server.healthy:
                text.append(f"  ● {server.health}", style="bold green")
            else:
                text.append(f"  ● {server.health or 'unknown'}", style="bold yellow")
            if server.reachable:
                text.append(f"  [{server.kind}]", style="cyan")
                if not server.metrics:
                    text.append("  no metrics endpoint", style="dim")
            host = snapshot.host
            text.append("\n")
            text.append("host ", style="dim")
            text.append(f"CPU {fmt_percent(host.cpu_percent)}")
            text.append("  MEM ")
            if host.memory_used is not None and host.memory_total:
                text.append(f"{fmt_bytes(host.memory_used)}/{fmt_bytes(host.memory_total)} "
                            f"({fmt_percent(host.memory_percent)})")
            else:
                text.append("n/a")
            text.append(f"  ({host.source})", style="dim")
            text.append(f"   models {len(snapshot.models)}", style="")
        if paused:
            text.append("   PAUSED", style="bold reverse yellow")
        if clock:
            text.append("   " + time.strftime("%H:%M:%S"), style="dim")
        self.update(text)


def _fleet(text: Text, snapshot: Snapshot) -> None:
    members = snapshot.members
    up = [m for m in members if m.server.reachable]
    healthy = sum(1 for m in up if m.server.healthy)
    if not up:
        text.append("  ● unreachable", style="bold red")
    elif healthy == len(members):
        text.append("  ● Healthy", style="bold green")
    else:
        text.append(f"  ● {healthy}/{len(members)} healthy", style="bold yellow")
    kinds = sorted({m.server.kind for m in up})
    if kinds:
        text.append(f"  [{', '.join(kinds)}]", style="cyan")
        if not any(m.server.metrics for m in up):
            text.append("  no metrics endpoint", style="dim")
    text.append("\n")
    text.append("fleet ", style="dim")
    text.append(f"members {len(up)}/{len(members)} up", style="" if len(up) == len(members) else "bold red")
    ready = [r.workers_ready for r in snapshot.models if r.workers_ready is not None]
    total = [r.workers_total for r in snapshot.models if r.workers_total is not None]
    text.append(f"  workers {fmt_workers(sum(ready), sum(total)) if total else 'n/a'}")
    rates = [r.requests_per_s for r in snapshot.models if r.requests_per_s is not None]
    text.append(f"  req/s {fmt_rate(sum(rates)) if rates else fmt_rate(None, snapshot.server.metrics)}")
    text.append(f"   models {len(snapshot.models)}")
