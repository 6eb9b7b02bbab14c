"""What the screens of `mmsctl top` need from the app, as a Protocol.

The screens are pushed by the app and call back into it (show the latest snapshot,
open a model, ask for an action); typing them against this Protocol instead of the
app class keeps ``app.py`` -> ``screens/`` the only direction of import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from rich.text import Text

    from mmsctl.tui.snapshot import SeriesStore, Snapshot
    from mmsctl.tui.source import DataSource

__all__ = ["Monitor"]


class Monitor(Protocol):
    """The monitor app as its screens see it (:class:`mmsctl.tui.app.TopApp`)."""

    source: "DataSource"
    snapshot: Optional["Snapshot"]
    series: "SeriesStore"
    fleet: bool
    paused: bool
    clock: bool
    window_s: float

    def status_renderable(self) -> "Text": ...

    def set_message(self, text: Optional[str], level: str = "info") -> None: ...

    def open_model(self, key: str) -> None: ...

    def close_model(self) -> None: ...

    def open_members(self) -> None: ...

    def close_members(self) -> None: ...

    def request_scale(self, key: str, delta: int) -> None: ...

    def request_unregister(self, key: str) -> None: ...

    def request_register(self) -> None: ...
