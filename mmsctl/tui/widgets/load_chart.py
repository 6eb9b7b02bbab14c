"""A labelled sparkline of one model's recent load (requests/s, latency, queue)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Label, Sparkline

__all__ = ["LoadChart"]


class LoadChart(Vertical):
    """Title + last value + min/max on one line, the sparkline below; "unavailable" when unknown."""

    DEFAULT_CSS = """
    LoadChart { height: 4; padding: 0 1; }
    LoadChart > Label { width: 1fr; height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    LoadChart > Sparkline { height: 3; }
    """

    def __init__(self, title: str, fmt: Callable[[float], str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.title = title
        self.fmt = fmt

    def compose(self) -> ComposeResult:
        yield Label(self.title, classes="chart-title")
        yield Sparkline([], summary_function=max)

    def show(self, values: Sequence[float], *, available: bool, window: str) -> None:
        label = self.query_one(Label)
        spark = self.query_one(Sparkline)
        if not available:
            label.update(f"{self.title}: n/a (the server publishes no metrics)")
            spark.data = []
            return
        if not values:
            label.update(f"{self.title}: no data yet")
            spark.data = []
            return
        label.update(f"{self.title} {self.fmt(values[-1])}  "
                     f"(min {self.fmt(min(values))}, max {self.fmt(max(values))}, {window})")
        spark.data = list(values)
