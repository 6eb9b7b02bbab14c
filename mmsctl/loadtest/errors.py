"""How a sweep can end early; both are raised only after the partial results were printed and saved.

    PartialFailure (mmsctl.errors)   exit 4
    └── LevelFailed                  a level in which no request succeeded: the sweep stops there
    MmsError                         exit 130
    └── BenchInterrupted             Ctrl-C: the levels so far are kept, the cut one marked partial
"""

from __future__ import annotations

from mmsctl import exit_codes
from mmsctl.errors import MmsError, PartialFailure

__all__ = ["BenchInterrupted", "LevelFailed"]


class LevelFailed(PartialFailure):
    """Every request of a level failed (server overloaded, crashed, or refusing)."""

    reference = "bench-level-failed"


class BenchInterrupted(MmsError):
    """The user stopped the sweep (Ctrl-C)."""

    exit_code = exit_codes.INTERRUPTED
    reference = "bench-interrupted"
