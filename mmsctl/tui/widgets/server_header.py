"""The header line: which server, its health, host CPU/memory, and whether polling is paused."""

from __future__ import annotations

import time
from typing import Optional

from rich.text import Text
from textual.widgets import Static

from mmsctl.tui.format import fmt_bytes, fmt_percent
from mmsctl.tui.model import Snapshot

__all__ = ["ServerHeader"]


class ServerHeader(Static):
    """Renders the server part of a Snapshot in one or two lines."""

    def show(self, snapshot: Optional[Snapshot], *, title: str, paused: bool, clock: bool) -> None:
        text = Text()
        text.append("mmsctl top", style="bold")
        text.append(f"  {title}")
        if snapshot is None:
            text.append("  connecting…", style="yellow")
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
