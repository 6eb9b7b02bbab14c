"""One model: its settings, its workers, and charts of its recent load.

On a fleet: the combined numbers, a table of the model on each member, and every
member's workers (with the member they run on).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid
from textual.screen import Screen
from textual.widgets import Footer, Static

from mmsctl.tui.format import MIXED, fmt_bytes, fmt_count, fmt_int, fmt_ms, fmt_rate, fmt_workers
from mmsctl.tui.widgets.load_chart import LoadChart
from mmsctl.tui.widgets.row_table import RowTable
from mmsctl.tui.widgets.server_header import ServerHeader
from mmsctl.tui.widgets.status_line import StatusLine

if TYPE_CHECKING:
    from mmsctl.tui.monitor import Monitor
    from mmsctl.tui.snapshot import ModelRow

__all__ = ["ModelScreen"]

_WORKER_COLUMNS = ("ID", "PID", "STATUS", "STARTED", "MEMORY", "GPU")
_PART_COLUMNS = ("MEMBER", "READY", "MIN", "MAX", "BATCH", "QUEUE", "REQ/S", "P50", "P99", "ERR/S")


class ModelScreen(Screen[None]):
    """Drill-down for one model; Esc goes back to the list."""

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("plus", "scale(1)", "+Worker", key_display="+"),
        Binding("minus", "scale(-1)", "-Worker", key_display="-"),
        Binding("d", "unregister", "Unregister"),
    ]

    @property
    def monitor(self) -> "Monitor":
        """The app, as the Protocol the screens use (no import of the app module)."""
        return cast("Monitor", self.app)

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key

    def compose(self) -> ComposeResult:
        yield ServerHeader(id="header")
        yield Static(id="model-info")
        if self.monitor.fleet:
            parts = RowTable(id="parts")
            for label in _PART_COLUMNS:
                parts.add_column(label, key=label.lower())
            yield parts
        workers = RowTable(id="workers")
        for label in (("MEMBER",) if self.monitor.fleet else ()) + _WORKER_COLUMNS:
            workers.add_column(label, key=label.lower())
        yield workers
        with Grid(id="charts"):
            yield LoadChart("requests/s", lambda v: fmt_rate(v), id="chart-rps")
            yield LoadChart("queue depth", lambda v: fmt_count(v), id="chart-queue")
            yield LoadChart("p50 latency", lambda v: fmt_ms(v), id="chart-p50")
            yield LoadChart("p99 latency", lambda v: fmt_ms(v), id="chart-p99")
        yield StatusLine(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.show_snapshot()

    def on_screen_resume(self) -> None:
        self.show_snapshot()

    def show_snapshot(self) -> None:
        app = self.monitor
        snapshot = app.snapshot
        self.query_one(ServerHeader).show(snapshot, title=app.source.title, paused=app.paused, clock=app.clock)
        self.show_status()
        row = snapshot.model(self.key) if snapshot is not None else None
        info = self.query_one("#model-info", Static)
        if row is None:
            info.update(Text(f"{self.key}: not on the server (any more)", style="bold yellow"))
            return
        text = Text()
        text.append(row.name, style="bold")
        text.append(f"  version {_setting(row, 'version', row.version or '-')}")
        if row.status:
            text.append(f"  {row.status}")
        if row.parts:
            total = len(snapshot.members) if snapshot is not None else len(row.parts)
            text.append(f"  on {row.members_present} of {total} members, ready on {row.members_healthy}"
                        "  (workers, min and max summed over them)")
        delay = _setting(row, "max_batch_delay", fmt_int(row.max_batch_delay))
        text.append(f"\nworkers {fmt_workers(row.workers_ready, row.workers_total)} ready"
                    f"  min {fmt_int(row.min_workers)}  max {fmt_int(row.max_workers)}"
                    f"  batch {_setting(row, 'batch_size', fmt_int(row.batch_size))}"
                    f"  max delay {delay}"
                    f"{'ms' if row.max_batch_delay is not None else ''}")
        text.append(f"\nreq/s {fmt_rate(row.requests_per_s, row.metrics)}"
                    f"  err/s {fmt_rate(row.errors_per_s, row.metrics)}"
                    f"  p50 {fmt_ms(row.p50_ms, row.metrics)}  p99 {fmt_ms(row.p99_ms, row.metrics)}"
                    f"  mean {fmt_ms(row.mean_ms, row.metrics)}"
                    f"  queue {fmt_count(row.queue_depth, row.metrics)}")
        if row.url:
            text.append(f"\nurl {row.url}", style="dim")
        info.update(text)
        if row.parts:
            _fill(self.query_one("#parts", RowTable), [(p.member or "?", _part_cells(p)) for p in row.parts],
                  right_from=1)
        self._show_workers(row)
        series = app.series
        window = f"{app.window_s / 60:g} min"
        has_metrics = row.metrics
        for chart_id, attribute, available in (
            ("chart-rps", "requests_per_s", has_metrics and row.requests_per_s is not None),
            ("chart-queue", "queue_depth", row.queue_depth is not None),
            ("chart-p50", "p50_ms", has_metrics),
            ("chart-p99", "p99_ms", has_metrics),
        ):
            values = series.values(row.key, attribute)
            self.query_one(f"#{chart_id}", LoadChart).show(values, available=available or bool(values), window=window)

    def _show_workers(self, row: ModelRow) -> None:
        fleet = self.monitor.fleet
        rows: list[tuple[str, tuple[str, ...]]] = []
        for w in row.workers:
            cells = (w.id, fmt_int(w.pid), w.status, w.start_time or "n/a", fmt_bytes(w.memory),
                     "n/a" if w.gpu is None else ("yes" if w.gpu else "no"))
            rows.append((f"{w.member}/{w.id}", (w.member or "?", *cells)) if fleet else (w.id, cells))
        _fill(self.query_one("#workers", RowTable), rows)

    def show_status(self) -> None:
        self.query_one(StatusLine).update(self.monitor.status_renderable())

    def action_back(self) -> None:
        self.monitor.close_model()

    def action_scale(self, delta: int) -> None:
        self.monitor.request_scale(self.key, delta)

    def action_unregister(self) -> None:
        self.monitor.request_unregister(self.key)


def _setting(row: ModelRow, field: str, text: str) -> str:
    return MIXED if field in row.mixed else text


def _part_cells(part: ModelRow) -> tuple[str, ...]:
    return (
        part.member or "?",
        fmt_workers(part.workers_ready, part.workers_total),
        fmt_int(part.min_workers),
        fmt_int(part.max_workers),
        fmt_int(part.batch_size),
        fmt_count(part.queue_depth, part.metrics),
        fmt_rate(part.requests_per_s, part.metrics),
        fmt_ms(part.p50_ms, part.metrics),
        fmt_ms(part.p99_ms, part.metrics),
        fmt_rate(part.errors_per_s, part.metrics),
    )


def _fill(table: RowTable, rows: list[tuple[str, tuple[str, ...]]], *, right_from: Optional[int] = None) -> None:
    """Show *rows* (key, cells) unless the table shows them already (no redraw every poll); the cells from
    column *right_from* on are numbers, aligned right."""
    current = [tuple(str(c) for c in table.get_row_at(i)) for i in range(table.row_count)]
    if current == [cells for _, cells in rows]:
        return
    table.clear()
    for key, cells in rows:
        table.add_row(*(Text(c, justify="right") if right_from is not None and i >= right_from else c
                        for i, c in enumerate(cells)), key=key)
