"""One line for what just happened: the last error, an action's result, or the poll time."""

from __future__ import annotations

from textual.widgets import Static

__all__ = ["StatusLine"]


class StatusLine(Static):
    """The app's status text (:meth:`TopApp.status_renderable`): errors in red, results in green."""
