"""The main screen: server header, the models table, a filter box and the status line."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional, cast

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input

from mmsctl.tui.widgets.models_table import ModelsTable
from mmsctl.tui.widgets.server_header import ServerHeader
from mmsctl.tui.widgets.status_line import StatusLine

if TYPE_CHECKING:
    from mmsctl.tui.monitor import Monitor

__all__ = ["ModelsScreen"]


class ModelsScreen(Screen[None]):
    """Every model on the server, one row each."""

    BINDINGS = [
        Binding("enter", "open", "Open", show=True),
        Binding("slash", "filter", "Filter"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("less_than_sign", "sort(-1)", "Sort◀", key_display="<"),
        Binding("greater_than_sign", "sort(1)", "Sort▶", key_display=">"),
        Binding("plus", "scale(1)", "+Worker", key_display="+"),
        Binding("minus", "scale(-1)", "-Worker", key_display="-"),
        Binding("r", "register", "Register"),
        Binding("d", "unregister", "Unregister"),
        Binding("m", "members", "Members"),
    ]

    @property
    def monitor(self) -> "Monitor":
        """The app, as the Protocol the screens use (no import of the app module)."""
        return cast("Monitor", self.app)

    def compose(self) -> ComposeResult:
        yield ServerHeader(id="header")
        yield Input(placeholder="filter models (regular expression, Esc clears)", id="filter")
        yield ModelsTable(id="models", fleet=self.monitor.fleet)
        yield StatusLine(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#filter", Input).display = False
        self.query_one(ModelsTable).focus()
        self.show_snapshot()

    def on_screen_resume(self) -> None:
        self.show_snapshot()

    @property
    def table(self) -> ModelsTable:
        return self.query_one(ModelsTable)

    def show_snapshot(self) -> None:
        app = self.monitor
        snapshot = app.snapshot
        self.query_one(ServerHeader).show(snapshot, title=app.source.title, paused=app.paused, clock=app.clock)
        if snapshot is not None:
            self.table.set_rows(snapshot.models)
        self.query_one(StatusLine).update(app.status_renderable())

    def show_status(self) -> None:
        self.query_one(StatusLine).update(self.monitor.status_renderable())

    # ------------------------------------------------------------------ table events

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        self.table.sort_by(str(event.column_key.value))

    # ------------------------------------------------------------------ actions

    def check_action(self, action: str, parameters: tuple[object, ...]) -> Optional[bool]:
        """The members view exists only on a fleet (no ``m`` in the footer otherwise)."""
        return self.monitor.fleet if action == "members" else True

    def action_members(self) -> None:
        self.monitor.open_members()

    def action_open(self) -> None:
        key = self.table.current_key
        if key is not None:
            self.monitor.open_model(key)

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = ""
        box.display = False
        self.table.set_filter(None)
        self.table.focus()
        self.monitor.set_message(None)

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id != "filter":
            return
        pattern: Optional[re.Pattern[str]] = None
        if event.value:
            try:
                pattern = re.compile(event.value, re.IGNORECASE)
            except re.error as exc:
                self.monitor.set_message(f"bad filter: {exc}", "error")
                return
        self.monitor.set_message(None)
        self.table.set_filter(pattern)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            if not event.value:
                self.action_clear_filter()
            else:
                self.table.focus()

    def action_sort(self, step: int) -> None:
        self.table.shift_sort(step)

    def action_scale(self, delta: int) -> None:
        key = self.table.current_key
        if key is not None:
            self.monitor.request_scale(key, delta)

    def action_register(self) -> None:
        self.monitor.request_register()

    def action_unregister(self) -> None:
        key = self.table.current_key
        if key is not None:
            self.monitor.request_unregister(key)
