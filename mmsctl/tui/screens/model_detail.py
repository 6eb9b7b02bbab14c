"""One model: its settings, its workers, and charts of its recent load."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid
from textual.screen import Screen
from textual.widgets import Footer, Static

from mmsctl.tui.format import fmt_bytes, fmt_count, fmt_int, fmt_ms, fmt_rate, fmt_workers
from mmsctl.tui.widgets.load_chart import LoadChart
from mmsctl.tui.widgets.row_table import RowTable
from mmsctl.tui.widgets.server_header import ServerHeader
from mmsctl.tui.widgets.status_line import StatusLine

if TYPE_CHECKING:
    from mmsctl.tui.app import TopApp
    from mmsctl.tui.model import ModelRow

__all__ = ["ModelScreen"]

_WORKER_COLUMNS = ("ID", "PID", "STATUS", "STARTED", "MEMORY", "GPU")


class ModelScreen(Screen[None]):
    """Drill-down for one model; Esc goes back to the list."""

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("plus", "scale(1)", "+Worker", key_display="+"),
        Binding("minus", "scale(-1)", "-Worker", key_display="-"),
        Binding("d", "unregister", "Unregister"),
    ]

    app: "TopApp"

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key

    def compose(self) -> ComposeResult:
        yield ServerHeader(id="header")
        yield Static(id="model-info")
        workers = RowTable(id="workers")
        for label in _WORKER_COLUMNS:
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
        app = self.app
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
        text.append(f"  version {row.version or '-'}")
        if row.status:
            text.append(f"  {row.status}")
        text.append(f"\nworkers {fmt_workers(row.workers_ready, row.workers_total)} ready"
                    f"  min {fmt_int(row.min_workers)}  max {fmt_int(row.max_workers)}"
                    f"  batch {fmt_int(row.batch_size)}"
                    f"  max delay {fmt_int(row.max_batch_delay)}"
                    f"{'ms' if row.max_batch_delay is not None else ''}")
        text.append(f"\nreq/s {fmt_rate(row.requests_per_s, row.metrics)}"
                    f"  err/s {fmt_rate(row.errors_per_s, row.metrics)}"
                    f"  p50 {fmt_ms(row.p50_ms, row.metrics)}  p99 {fmt_ms(row.p99_ms, row.metrics)}"
                    f"  mean {fmt_ms(row.mean_ms, row.metrics)}"
                    f"  queue {fmt_count(row.queue_depth, row.metrics)}")
        if row.url:
            text.append(f"\nurl {row.url}", style="dim")
        info.update(text)
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
        table = self.query_one("#workers", RowTable)
        cells = [
            (w.id, fmt_int(w.pid), w.status, w.start_time or "n/a", fmt_bytes(w.memory),
             "n/a" if w.gpu is None else ("yes" if w.gpu else "no"))
            for w in row.workers
        ]
        current = [tuple(str(c) for c in table.get_row_at(i)) for i in range(table.row_count)]
        if current == cells:
            return
        table.clear()
        for values in cells:
            table.add_row(*values, key=values[0])

    def show_status(self) -> None:
        self.query_one(StatusLine).update(self.app.status_renderable())

    def action_back(self) -> None:
        self.app.close_model()

    def action_scale(self, delta: int) -> None:
        self.app.request_scale(self.key, delta)

    def action_unregister(self) -> None:
        self.app.request_unregister(self.key)
