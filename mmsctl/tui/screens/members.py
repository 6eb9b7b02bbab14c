"""A fleet's members: one row each - where it is, what it is, whether it answers, what it serves."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer

from mmsctl.tui.widgets.members_table import MembersTable
from mmsctl.tui.widgets.server_header import ServerHeader
from mmsctl.tui.widgets.status_line import StatusLine

if TYPE_CHECKING:
    from mmsctl.tui.monitor import Monitor

__all__ = ["MembersScreen"]


class MembersScreen(Screen[None]):
    """The members view; ``m`` or Esc goes back to the models."""

    BINDINGS = [
        Binding("m,escape", "back", "Models", key_display="m"),
    ]

    @property
    def monitor(self) -> "Monitor":
        """The app, as the Protocol the screens use (no import of the app module)."""
        return cast("Monitor", self.app)

    def compose(self) -> ComposeResult:
        yield ServerHeader(id="header")
        yield MembersTable(id="members")
        yield StatusLine(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(MembersTable).focus()
        self.show_snapshot()

    def on_screen_resume(self) -> None:
        self.show_snapshot()

    def show_snapshot(self) -> None:
        app = self.monitor
        snapshot = app.snapshot
        self.query_one(ServerHeader).show(snapshot, title=app.source.title, paused=app.paused, clock=app.clock)
        if snapshot is not None:
            self.query_one(MembersTable).show(snapshot)
        self.show_status()

    def show_status(self) -> None:
        self.query_one(StatusLine).update(self.monitor.status_renderable())

    def action_back(self) -> None:
        self.monitor.close_members()
