"""One line for what just happened: the last error, an action's result, or the poll time."""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual.widgets import Static

__all__ = ["StatusLine"]


class StatusLine(Static):
    """Errors in red, results in green, otherwise quiet."""

    def show(self, message: str, level: str = "info") -> None:
        style = {"error": "bold red", "ok": "green", "warn": "yellow"}.get(level, "dim")
        self.update(Text(message, style=style))

    def show_poll(self, poll_ms: Optional[float], interval: float) -> None:
        text = f"every {interval:g}s"
        if poll_ms is not None:
            text += f" · last poll {poll_ms:.0f} ms"
        self.show(text)
