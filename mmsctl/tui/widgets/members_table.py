"""The members table of a fleet: one row per member, whether it answers, and what it serves."""

from __future__ import annotations

from typing import Any, Optional

from rich.text import Text

from mmsctl.tui.format import IDLE
from mmsctl.tui.members import MEMBER_COLUMNS, member_cells
from mmsctl.tui.snapshot import Snapshot
from mmsctl.tui.widgets.row_table import RowTable

__all__ = ["MembersTable"]

_NUMERIC = {"MODELS", "WORKERS", "REQ/S", "CPU", "POLL"}
_STATE_STYLE = {"up": "green", "unhealthy": "yellow", "down": "bold red", "waiting": "dim"}


class MembersTable(RowTable):
    """Every member, in the fleet's order; a poll updates only the cells that changed."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(zebra_stripes=False, **kwargs)
        self._shown: list[tuple[str, tuple[str, ...]]] = []
        for label in MEMBER_COLUMNS:
            self.add_column(label, key=label)

    @property
    def current_key(self) -> Optional[str]:
        if not self._shown or not 0 <= self.cursor_row < len(self._shown):
            return None
        return self._shown[self.cursor_row][0]

    def show(self, snapshot: Snapshot) -> None:
        shown = [(m.name, member_cells(m, snapshot.taken_at)) for m in snapshot.members]
        if [k for k, _ in shown] == [k for k, _ in self._shown]:
            for (key, cells), (_, old) in zip(shown, self._shown):
                for label, new, before in zip(MEMBER_COLUMNS, cells, old):
                    if new != before:
                        self.update_cell(key, label, self._cell(label, new), update_width=True)
        else:
            keep = self.current_key
            self.clear()
            for key, cells in shown:
                self.add_row(*(self._cell(label, v) for label, v in zip(MEMBER_COLUMNS, cells)), key=key)
            keys = [k for k, _ in shown]
            if keep in keys:
                self.move_cursor(row=keys.index(keep), animate=False)
        self._shown = shown

    @staticmethod
    def _cell(label: str, value: str) -> Text:
        style = _STATE_STYLE.get(value, "") if label == "STATE" else ("red" if label == "LAST ERROR" and
                                                                       value != IDLE else "")
        return Text(value, style=style, justify="right" if label in _NUMERIC else "left")
