"""A DataTable with a row cursor whose keys move it the way a list's keys do.

Textual's DataTable gives Home/End to the horizontal scroll (the first/last
*column*) and puts the first/last row on Ctrl+Home/Ctrl+End; in a table of
rows, as in less, htop or k9s, Home and End go to the first and last row.
"""

from __future__ import annotations

from typing import Any

from textual.binding import Binding
from textual.widgets import DataTable

__all__ = ["RowTable"]


class RowTable(DataTable[Any]):
    """One row per item, a row cursor, Home/End to the first/last row."""

    BINDINGS = [
        Binding("home", "scroll_top", "First row", show=False),
        Binding("end", "scroll_bottom", "Last row", show=False),
    ]

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cursor_type", "row")
        super().__init__(**kwargs)
