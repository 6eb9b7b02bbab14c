"""The models table: sortable by any column, filtered by a regular expression.

On a fleet it has a MEMBERS column (healthy/present: on how many members the
model has a ready worker, of those that list it), and a setting that differs
between members reads "mixed".

Each poll updates only the cells that changed (a full redraw of 50 rows every
second would cost CPU for nothing) and the cursor stays on the same model when
rows move.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from rich.text import Text

from mmsctl.tui.format import MIXED, fmt_count, fmt_int, fmt_ms, fmt_rate, fmt_workers
from mmsctl.tui.snapshot import ModelRow
from mmsctl.tui.widgets.row_table import RowTable

__all__ = ["COLUMNS", "FLEET_COLUMNS", "ModelsTable"]


@dataclass(frozen=True)
class _Column:
    key: str
    label: str
    cell: Callable[[ModelRow], str]
    sort: Callable[[ModelRow], Any]
    numeric: bool = True
    field: Optional[str] = None  # the ModelRow field, where members can disagree on it

    def text(self, row: ModelRow) -> str:
        return MIXED if self.field is not None and self.field in row.mixed else self.cell(row)


COLUMNS: tuple[_Column, ...] = (
    _Column("name", "NAME", lambda r: r.name, lambda r: r.name.lower(), numeric=False),
    _Column("version", "VERSION", lambda r: r.version or "-", lambda r: r.version or "", numeric=False,
            field="version"),
    _Column("workers", "READY", lambda r: fmt_workers(r.workers_ready, r.workers_total),
            lambda r: (r.workers_ready, r.workers_total)),
    _Column("min", "MIN", lambda r: fmt_int(r.min_workers), lambda r: r.min_workers),
    _Column("max", "MAX", lambda r: fmt_int(r.max_workers), lambda r: r.max_workers),
    _Column("batch", "BATCH", lambda r: fmt_int(r.batch_size), lambda r: r.batch_size, field="batch_size"),
    _Column("queue", "QUEUE", lambda r: fmt_count(r.queue_depth, r.metrics), lambda r: r.queue_depth),
    _Column("rps", "REQ/S", lambda r: fmt_rate(r.requests_per_s, r.metrics), lambda r: r.requests_per_s),
    _Column("p50", "P50", lambda r: fmt_ms(r.p50_ms, r.metrics), lambda r: r.p50_ms),
    _Column("p99", "P99", lambda r: fmt_ms(r.p99_ms, r.metrics), lambda r: r.p99_ms),
    _Column("errors", "ERR/S", lambda r: fmt_rate(r.errors_per_s, r.metrics), lambda r: r.errors_per_s),
)

FLEET_COLUMNS: tuple[_Column, ...] = (
    *COLUMNS[:2],
    _Column("members", "MEMBERS", lambda r: fmt_workers(r.members_healthy, r.members_present),
            lambda r: (r.members_healthy, r.members_present)),
    *COLUMNS[2:],
)


def _sort_key(column: _Column, row: ModelRow) -> tuple[int, Any]:
    value = column.sort(row)
    if isinstance(value, tuple):
        value = tuple(-1 if v is None else v for v in value)
    return (1, 0) if value is None else (0, value)  # unknown last, whatever the direction


class ModelsTable(RowTable):
    """One row per model; ``sort_column``/``reverse``/``pattern`` pick and order them.

    Every header keeps one cell for the sort arrow, so the arrow shows on whichever
    column is the sort key (a column is as wide as its widest cell *or label*, and a
    label that grows later would be cut) and the columns do not shift when it moves.
    """

    def __init__(self, *, fleet: bool = False, **kwargs: Any) -> None:
        super().__init__(zebra_stripes=False, **kwargs)
        self.spec = FLEET_COLUMNS if fleet else COLUMNS
        self.sort_column = "name"
        self.reverse = False
        self.pattern: Optional[re.Pattern[str]] = None
        self._rows: Sequence[ModelRow] = ()
        self._shown: list[tuple[str, tuple[str, ...]]] = []
        for column in self.spec:
            self.add_column(self._label(column), key=column.key)

    # ------------------------------------------------------------------ state

    @property
    def current_key(self) -> Optional[str]:
        """The model key under the cursor."""
        if not self._shown or self.cursor_row < 0 or self.cursor_row >= len(self._shown):
            return None
        return self._shown[self.cursor_row][0]

    @property
    def shown_keys(self) -> list[str]:
        return [key for key, _ in self._shown]

    def set_rows(self, rows: Sequence[ModelRow]) -> None:
        self._rows = rows
        self._render_rows()

    def set_filter(self, pattern: Optional[re.Pattern[str]]) -> None:
        self.pattern = pattern
        self._render_rows()

    def sort_by(self, column: str, reverse: Optional[bool] = None) -> None:
        if reverse is None:
            reverse = (not self.reverse) if column == self.sort_column else column not in ("name", "version")
        self.sort_column, self.reverse = column, reverse
        for col in self.spec:
            self.columns[col.key].label = Text(self._label(col))  # type: ignore[index]
        self._render_rows(force=True)
        self.refresh()

    def shift_sort(self, step: int) -> None:
        """``<``/``>``: sort by the column left or right of the current one."""
        keys = [c.key for c in self.spec]
        index = (keys.index(self.sort_column) + step) % len(keys)
        self.sort_by(keys[index], reverse=keys[index] not in ("name", "version"))

    def _label(self, column: _Column) -> str:
        if column.key != self.sort_column:
            return column.label + " "  # the arrow's cell, kept free
        return column.label + ("▼" if self.reverse else "▲")

    # ------------------------------------------------------------------ drawing

    def _visible(self) -> list[ModelRow]:
        rows = [r for r in self._rows if self.pattern is None or self.pattern.search(r.name)]
        column = next(c for c in self.spec if c.key == self.sort_column)
        known = sorted((r for r in rows if _sort_key(column, r)[0] == 0),
                       key=lambda r: _sort_key(column, r), reverse=self.reverse)
        unknown = sorted((r for r in rows if _sort_key(column, r)[0] == 1), key=lambda r: r.name.lower())
        return known + unknown

    def _render_rows(self, force: bool = False) -> None:
        shown = [(r.key, tuple(c.text(r) for c in self.spec)) for r in self._visible()]
        if not force and [k for k, _ in shown] == [k for k, _ in self._shown]:
            for (key, cells), (_, old) in zip(shown, self._shown):
                for column, new, before in zip(self.spec, cells, old):
                    if new != before:
                        self.update_cell(key, column.key, self._cell(column, new), update_width=True)
            self._shown = shown
            return
        keep = self.current_key
        self.clear()
        for key, cells in shown:
            self.add_row(*(self._cell(c, v) for c, v in zip(self.spec, cells)), key=key)
        self._shown = shown
        keys = [k for k, _ in shown]
        if keep in keys:
            self.move_cursor(row=keys.index(keep), animate=False)

    @staticmethod
    def _cell(column: _Column, value: str) -> Text:
        style = "dim" if value == "n/a" else "yellow" if value == MIXED else ""
        return Text(value, style=style, justify="right" if column.numeric else "left")
