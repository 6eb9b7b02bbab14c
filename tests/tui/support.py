"""Helpers for the TUI tests: a scripted data source, waiting, and text screenshots."""

from __future__ import annotations

import asyncio
import io
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

from mmsctl.tui.snapshot import HostStats, ModelRow, ServerStatus, Snapshot, WorkerRow

if TYPE_CHECKING:  # pragma: no cover
    from mmsctl.tui.snapshot import MemberStatus

SNAPSHOT_DIR = Path(__file__).with_name("snapshots")


class ScriptedSource:
    """A DataSource that plays back snapshots (the last one repeats) and records the actions."""

    title = "test (http://127.0.0.1:8081)"

    def __init__(self, snapshots: Sequence[Snapshot], *, delay: float = 0.0) -> None:
        self.snapshots = list(snapshots)
        self.delay = delay
        self.fetches = 0
        self.started = 0
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.focus: Optional[str] = None
        self.closed = False

    async def fetch(self) -> Snapshot:
        self.started += 1
        if self.delay:
            await asyncio.sleep(self.delay)
        index = min(self.fetches, len(self.snapshots) - 1)
        self.fetches += 1
        return self.snapshots[index]

    async def scale(self, *args: Any, **kwargs: Any) -> str:
        self.calls.append(("scale", args, kwargs))
        return f"{args[0]} scaled"

    async def register(self, *args: Any, **kwargs: Any) -> str:
        self.calls.append(("register", args, kwargs))
        return "registered"

    async def unregister(self, *args: Any, **kwargs: Any) -> str:
        self.calls.append(("unregister", args, kwargs))
        return "unregistered"

    def set_focus(self, key: Optional[str]) -> None:
        self.focus = key

    async def aclose(self) -> None:
        self.closed = True


class ScriptedFleetSource(ScriptedSource):
    """A fleet's source: the same playback, and per-member scaling recorded."""

    title = "lab (fleet, 3 members)"

    async def scale_members(self, model: str, targets: Mapping[str, tuple[int, int]],
                            *, version: Optional[str] = None) -> str:
        self.calls.append(("scale_members", (model, dict(targets)), {"version": version}))
        return f"scale {model}: done on {len(targets)} members"


def worker(i: int, status: str = "READY") -> WorkerRow:
    return WorkerRow(str(9000 + i), 4000 + i, status, f"2024-05-01T10:00:0{i}Z", (180 + i) << 20, False)


def mmsctl_snapshot(t: float = 100.0, *, rps: float = 12.5) -> Snapshot:
    """Three models on our server, with metrics."""
    models = (
        ModelRow("squeezenet", "1.0", 2, 2, 2, 2, 4, 50, 3.0, rps, 0.5, 8.2, 31.0, 9.0, url="squeezenet.mar",
                 metrics=True, workers=(worker(0), worker(1))),
        ModelRow("resnet-18", "1.0", 1, 1, 1, 3, 1, 100, 0.0, 0.0, 0.0, None, None, None, url="resnet-18.mar",
                 metrics=True, workers=(worker(2),)),
        ModelRow("noop", "2.0", 0, 1, 1, 1, 1, 100, 0.0, 250.0, 0.0, 0.42, 1.9, 0.5, url="noop.mar",
                 metrics=True, workers=(worker(3, "STARTING"),)),
    )
    return Snapshot(t, ServerStatus("http://127.0.0.1:8081", "mmsctl", True, "Healthy", True),
                    HostStats(37.0, 3 << 30, 8 << 30, "server"), models)


def mms_snapshot(t: float = 100.0) -> Snapshot:
    """Real MMS: describe only, no metrics endpoint."""
    models = (
        ModelRow("squeezenet_v1.1", "1.0", 1, 1, 1, 1, 1, 100, url="squeezenet_v1.1.mar",
                 workers=(WorkerRow("9000", None, "READY", "2024-05-01T10:00:00.000Z", 212992000, False),)),
    )
    return Snapshot(t, ServerStatus("http://127.0.0.1:8443", "mms", True, "Healthy", False),
                    HostStats(), models)


def latency(*counts: float) -> tuple[tuple[float, float], ...]:
    """An interval's latency histogram (ms bounds 5, 10, 25, 50, +Inf) from per-bucket counts."""
    import math

    bounds = (5.0, 10.0, 25.0, 50.0, math.inf)
    cumulative, total = [], 0.0
    for bound, count in zip(bounds, counts):
        total += count
        cumulative.append((bound, total))
    return tuple(cumulative)


MEMBER_A = "10.0.0.5:8081"
MEMBER_B = "10.0.0.6:8081"
MEMBER_C = "10.0.0.7:8081"


def member_snapshot(url: str, t: float = 100.0, *, noop_workers: int = 1, rps: float = 10.0,
                    batch: int = 4) -> Snapshot:
    """One mmsctl member with squeezenet (traffic) and noop (idle)."""
    from mmsctl.tui.snapshot import quantile

    hist = latency(rps * 4, rps * 4, rps, rps, 0)
    models = (
        ModelRow("squeezenet", "1.0", 2, 2, 2, 2, batch, 50, 1.0, rps, 0.0, quantile(0.5, hist), quantile(0.99, hist),
                 9.0, url="squeezenet.mar", metrics=True, workers=(worker(0), worker(1)), latency=hist),
        ModelRow("noop", "2.0", noop_workers, noop_workers, noop_workers, noop_workers, 1, 100, 0.0, 0.0, 0.0,
                 url="noop.mar", metrics=True, workers=tuple(worker(2 + i) for i in range(noop_workers))),
    )
    return Snapshot(t, ServerStatus(f"http://{url}", "mmsctl", True, "Healthy", True),
                    HostStats(20.0, 2 << 30, 8 << 30, "server"), models, poll_ms=12.0)


def fleet(t: float = 100.0, *, c_down: bool = True, **member: Any) -> Snapshot:
    """Three members: two mmsctl servers that answer (B a little different) and C down (a closed port)."""
    from mmsctl.tui.fleet import fleet_snapshot, member_status

    a = member_snapshot(MEMBER_A, t)
    b = member_snapshot(MEMBER_B, t, noop_workers=2, rps=30.0, **member)
    c: Snapshot = (Snapshot(t, ServerStatus(f"http://{MEMBER_C}", error=f"cannot connect to {MEMBER_C}: "
                                                                           "connection refused"))
                   if c_down else member_snapshot(MEMBER_C, t))
    members: list[tuple["MemberStatus", Optional[Snapshot]]] = []
    for name, snap in ((MEMBER_A, a), (MEMBER_B, b), (MEMBER_C, c)):
        error = snap.server.error
        members.append((member_status(name, f"http://{name}", snap, last_error=error,
                                      last_error_at=t - 30 if error else None), snap))
    return fleet_snapshot("3 members", t, members)


def unreachable(t: float = 200.0) -> Snapshot:
    return Snapshot(t, ServerStatus("http://127.0.0.1:8081", error="cannot reach http://127.0.0.1:8081: connection refused"))


async def wait_for(pilot: Any, condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await pilot.pause(0.02)


async def wait_settled(pilot: Any, app: Any, timeout: float = 30.0) -> None:
    """Wait until the footer shows the keys and two looks 50 ms apart see the same screen.

    The footer recomposes whenever the screen's bindings change (the first rows, the cursor):
    for a moment it is empty, and a busy machine makes that moment long.
    """
    deadline = time.monotonic() + timeout
    before = None
    while True:
        now = screen_text(app)
        if "palette" in now and now == before:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the screen did not settle in time; it shows:\n{now}")
        before = now
        await pilot.pause(0.05)


def screen_text(app: Any) -> str:
    """The screen as plain text (what a person sees, without colours)."""
    from rich.console import Console

    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), record=True,
                      force_terminal=True, color_system=None, legacy_windows=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    lines = [line.rstrip() for line in console.export_text().splitlines()]
    return "\n".join(lines).rstrip() + "\n"


def assert_snapshot(name: str, text: str) -> None:
    """Compare with tests/tui/snapshots/NAME.txt; UPDATE_TUI_SNAPSHOTS=1 rewrites it."""
    path = SNAPSHOT_DIR / f"{name}.txt"
    if os.environ.get("UPDATE_TUI_SNAPSHOTS") == "1" or not path.exists():
        SNAPSHOT_DIR.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    expected = path.read_text(encoding="utf-8")
    if text != expected:
        import difflib

        diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True),
                                            f"{name} (stored)", f"{name} (now)"))
        raise AssertionError(f"screen differs from {path} (UPDATE_TUI_SNAPSHOTS=1 to accept):\n{diff}")
