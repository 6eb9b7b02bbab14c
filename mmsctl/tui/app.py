"""The `mmsctl top` application: polling, the screens, and the confirmed actions.

Polling runs in a background worker on a timer; a poll still in flight when the
timer fires again is left to finish (a slow server is shown late, never as a
frozen screen), and a failed poll keeps the last data on screen with the error
in the status line until the server answers again.

On a fleet (a :class:`~mmsctl.tui.source.FleetDataSource`) the models are combined
across members, ``m`` opens the members view, and each action applies to every
member that has the model: ``+``/``-`` move each member's own worker count by one.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Mapping, Optional

from rich.text import Text
from textual import work
from textual.app import App, ScreenStackError, SystemCommand
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.screen import Screen

from mmsctl.tui.snapshot import ModelRow, SeriesStore, ServerStatus, Snapshot
from mmsctl.tui.screens.dialogs import ConfirmScreen, HelpScreen, RegisterRequest, RegisterScreen
from mmsctl.tui.screens.members import MembersScreen
from mmsctl.tui.screens.model_detail import ModelScreen
from mmsctl.tui.screens.models import ModelsScreen
from mmsctl.tui.source import DataSource, FleetDataSource

if TYPE_CHECKING:  # pragma: no cover
    from mmsctl.tui.monitor import Monitor

__all__ = ["TopApp"]


class TopApp(App[None]):
    """A k9s-style monitor for one model server or a fleet of them."""

    CSS_PATH = "mmsctl.tcss"
    TITLE = "mmsctl top"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("p", "pause", "Pause"),
    ]

    def __init__(
        self,
        source: DataSource,
        *,
        interval: float = 1.0,
        readonly: bool = False,
        clock: bool = True,
        window_s: float = 300.0,
    ) -> None:
        super().__init__()
        self.source = source
        self.fleet = isinstance(source, FleetDataSource)
        self.interval = interval
        self.readonly = readonly
        self.clock = clock
        self.window_s = window_s
        self.paused = False
        self.snapshot: Optional[Snapshot] = None
        self.series = SeriesStore(window_s=window_s, interval_s=interval)
        self.polls = 0
        self._polling = False
        self._message: Optional[tuple[str, str]] = None
        self._error: Optional[str] = None

    # ------------------------------------------------------------------ lifecycle

    def on_mount(self) -> None:
        self.push_screen(ModelsScreen())
        self.set_interval(self.interval, self._tick)
        self._tick()

    async def on_unmount(self) -> None:
        await self.source.aclose()

    def _tick(self) -> None:
        if not self.paused and not self._polling:
            self._polling = True
            self.poll()

    @work(exclusive=True, group="poll")
    async def poll(self) -> None:
        """Fetch one snapshot and show it; never raises (errors go to the status line)."""
        try:
            snapshot = await self.source.fetch()
        except Exception as exc:  # noqa: BLE001 - a data-source bug must not kill the monitor
            url = self.snapshot.server.url if self.snapshot else ""
            snapshot = Snapshot(time.time(), ServerStatus(url, error=f"{type(exc).__name__}: {exc}"))
        finally:
            self._polling = False
        self.apply(snapshot)

    def apply(self, snapshot: Snapshot) -> None:
        """Take a new snapshot: a failed poll keeps the last models and shows why."""
        self.polls += 1
        if snapshot.members and all(m.waiting for m in snapshot.members):
            return  # a fleet whose members have not answered yet: still connecting
        if snapshot.server.reachable:
            self._error = snapshot.server.error
            self.snapshot = snapshot
            self.series.record(snapshot)
        else:
            self._error = (snapshot.server.error or "server unreachable") + " - retrying"
            old = self.snapshot
            self.snapshot = (replace(old, server=snapshot.server, members=snapshot.members)
                             if old is not None else snapshot)
        self._redraw("show_snapshot")

    def _redraw(self, part: str) -> None:
        """Call the screen's ``show_snapshot``/``show_status`` while it has its widgets.

        A poll can finish before a new screen has mounted its widgets (its ``on_mount``
        then shows the latest snapshot itself) or after quitting began to remove them.
        """
        try:
            screen = self.screen
            if screen.is_mounted and hasattr(screen, part):
                getattr(screen, part)()
        except (NoMatches, ScreenStackError):
            pass

    # ------------------------------------------------------------------ status line

    def set_message(self, text: Optional[str], level: str = "info") -> None:
        self._message = (text, level) if text else None
        self._redraw("show_status")

    def status_renderable(self) -> Text:
        if self._message is not None:
            text, level = self._message
            style = {"error": "bold red", "ok": "green", "warn": "yellow"}.get(level, "")
            return Text(text, style=style)
        if self._error:
            return Text(self._error, style="bold red")
        if self.snapshot is None:
            return Text("connecting…", style="dim")
        parts = [f"every {self.interval:g}s"]
        if self.clock and self.snapshot.poll_ms is not None:
            parts.append(f"last poll {self.snapshot.poll_ms:.0f} ms")
        if self.readonly:
            parts.append("read-only")
        return Text(" · ".join(parts), style="dim")

    # ------------------------------------------------------------------ navigation

    def open_model(self, key: str) -> None:
        self.source.set_focus(key)
        self.push_screen(ModelScreen(key))

    def close_model(self) -> None:
        self.source.set_focus(None)
        if isinstance(self.screen, ModelScreen):
            self.pop_screen()

    def open_members(self) -> None:
        if self.fleet and not isinstance(self.screen, MembersScreen):
            self.push_screen(MembersScreen())

    def close_members(self) -> None:
        if isinstance(self.screen, MembersScreen):
            self.pop_screen()

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_pause(self) -> None:
        self.paused = not self.paused
        self.set_message("paused - press p to resume" if self.paused else None, "warn")
        self._redraw("show_snapshot")

    # ------------------------------------------------------------------ actions

    def _row(self, key: str) -> Optional[ModelRow]:
        return self.snapshot.model(key) if self.snapshot is not None else None

    def _version_of(self, row: ModelRow) -> Optional[str]:
        """Name a version only where the server holds several of this model (TorchServe)."""
        if self.snapshot is None or not row.version:
            return None
        same = [r for r in self.snapshot.models if r.name == row.name]
        return row.version if len(same) > 1 else None

    def _writable(self) -> bool:
        if self.readonly:
            self.set_message("read-only: started with --readonly", "warn")
            return False
        return True

    def request_scale(self, key: str, delta: int) -> None:
        """``+``/``-``: one worker more or less after a confirmation (on a fleet: on each member with the model)."""
        if not self._writable():
            return
        row = self._row(key)
        if row is None:
            return
        if row.parts:
            self._request_fleet_scale(row, delta)
            return
        step = _scale_step(row, delta)
        if step is None:
            self.set_message(f"{row.name} already has {_current_workers(row)} workers", "warn")
            return
        current, target, max_workers = step
        version = self._version_of(row)
        self._confirm(
            f"Scale {row.name} from {current} to {target} worker(s)?",
            lambda: self.source.scale(row.name, target, max_workers, version=version),
        )

    def _request_fleet_scale(self, row: ModelRow, delta: int) -> None:
        """Each member from its own count; a member already at the bound (0) is left out."""
        source = self.source
        if not isinstance(source, FleetDataSource):
            return
        steps: dict[str, tuple[int, int, int]] = {}
        for part in row.parts:
            step = _scale_step(part, delta)
            if part.member and step is not None:
                steps[part.member] = step
        if not steps:
            self.set_message(f"{row.name} already has {_current_workers(row.parts[0])} workers on every member",
                             "warn")
            return
        targets: Mapping[str, tuple[int, int]] = {m: (target, high) for m, (_, target, high) in steps.items()}
        before = _span(current for current, _, _ in steps.values())
        after = _span(target for _, target, _ in steps.values())
        members = f"{len(steps)} member{'s' if len(steps) != 1 else ''}"
        self._confirm(
            f"Scale {row.name} on {members} from {before} to {after} worker(s) each?",
            lambda: source.scale_members(row.name, targets),
        )

    def request_unregister(self, key: str) -> None:
        if not self._writable():
            return
        row = self._row(key)
        if row is None:
            return
        version = self._version_of(row)

        def done() -> None:
            if isinstance(self.screen, ModelScreen):
                self.close_model()

        where = f" on {len(row.parts)} member{'s' if len(row.parts) != 1 else ''}" if row.parts else ""
        self._confirm(
            f"Unregister {row.name}" + (f" version {version}" if version else "") + where + "? Its workers stop.",
            lambda: self.source.unregister(row.name, version=version),
            after=done,
        )

    def request_register(self) -> None:
        if not self._writable():
            return

        def got(request: Optional[RegisterRequest]) -> None:
            if request is not None:
                self.run_management(
                    lambda: self.source.register(
                        request.url, model_name=request.model_name, initial_workers=request.initial_workers
                    )
                )

        self.push_screen(RegisterScreen(on_every_member=self.fleet), got)

    def _confirm(
        self,
        question: str,
        action: Callable[[], Awaitable[str]],
        after: Optional[Callable[[], None]] = None,
    ) -> None:
        def answered(yes: Optional[bool]) -> None:
            if yes:
                if after is not None:
                    after()
                self.run_management(action)
            else:
                self.set_message("cancelled", "info")

        self.push_screen(ConfirmScreen(question), answered)

    @work(group="actions")
    async def run_management(self, action: Callable[[], Awaitable[str]]) -> None:
        """Run a management call off the UI; the result or error goes to the status line."""
        self.set_message("working…", "info")
        try:
            result = await action()
        except Exception as exc:  # noqa: BLE001 - shown, not raised: the monitor keeps running
            message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            self.set_message(f"failed: {message}", "error")
            return
        self.set_message(result, "ok")
        self._tick()

    # ------------------------------------------------------------------ command palette

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Help", "Show the keys of mmsctl top", self.action_help)
        yield SystemCommand("Pause / resume", "Stop or restart polling the server", self.action_pause)
        if self.fleet and not isinstance(screen, MembersScreen):
            yield SystemCommand("Members", "The fleet's members: health, models, workers, errors", self.open_members)
        if isinstance(screen, ModelsScreen):
            yield SystemCommand("Filter models", "Show only models matching a regular expression",
                                screen.action_filter)
            for label, step in (("Sort by previous column", -1), ("Sort by next column", 1)):
                yield SystemCommand(label, "Change the sort column", lambda s=step: screen.action_sort(s))
            if not self.readonly:
                yield SystemCommand("Register model", "POST /models with an archive URL", self.request_register)
                yield SystemCommand("Scale up", "One more worker for the selected model",
                                    lambda: screen.action_scale(1))
                yield SystemCommand("Scale down", "One worker less for the selected model",
                                    lambda: screen.action_scale(-1))
                yield SystemCommand("Unregister model", "DELETE the selected model", screen.action_unregister)
        if isinstance(screen, ModelScreen):
            yield SystemCommand("Back to models", "Leave this model", screen.action_back)
            if not self.readonly:
                yield SystemCommand("Scale up", "One more worker", lambda: screen.action_scale(1))
                yield SystemCommand("Scale down", "One worker less", lambda: screen.action_scale(-1))


def _current_workers(row: ModelRow) -> int:
    return row.min_workers if row.min_workers is not None else (row.workers_total or 0)


def _scale_step(row: ModelRow, delta: int) -> Optional[tuple[int, int, int]]:
    """(current, target, max workers) for one worker more or less; None when it would not change.

    A max that is wider than the new count is kept; otherwise it follows the count.
    """
    current = _current_workers(row)
    target = max(0, current + delta)
    if target == current:
        return None
    if row.max_workers is None or row.max_workers <= current:
        return current, target, target
    return current, target, max(row.max_workers, target)


def _span(values: Iterable[int]) -> str:
    """"2", or "1-3" where members differ."""
    ordered = sorted(values)
    return str(ordered[0]) if ordered[0] == ordered[-1] else f"{ordered[0]}-{ordered[-1]}"


if TYPE_CHECKING:  # pragma: no cover

    def _is_a_monitor(app: TopApp) -> Monitor:
        return app  # mypy checks that the app is what its screens expect
