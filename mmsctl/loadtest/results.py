"""What a ``mmsctl bench`` run measured, as plain data: saved with ``--save``, read back by
``bench show``, ``ec2 cost --from-bench`` and ``fleet cost --from-bench``.

The file is JSON (``{"format": "mmsctl-bench", "version": 1, ...}``) so other tools
can read it too. A run holds one sweep per target server (two with ``--compare``);
a sweep holds one :class:`Level` per concurrency (closed loop) or arrival rate
(open loop).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from mmsctl.atomic import write_atomic
from mmsctl.errors import InputNotFoundError, UsageError

__all__ = ["FORMAT", "VERSION", "BenchRun", "Level", "Sweep", "load_run", "save_run"]

FORMAT = "mmsctl-bench"
VERSION = 1
#: A saved run is a few KB; anything far larger is not one of ours.
_MAX_FILE_BYTES = 16 * 1024 * 1024


@dataclass
class Level:
    """One step of a sweep: what was sent, what came back, and how long it took."""

    concurrency: Optional[int] = None  # closed loop: clients, each with one request in flight
    rate: Optional[float] = None  # open loop: requests scheduled per second
    duration_s: float = 0.0  # measured window, warm-up excluded
    sent: int = 0
    ok: int = 0
    #: Failed requests by cause: ``"503"``, ``"timeout"``, ``"reset"``, ``"refused"``, ...
    errors: dict[str, int] = field(default_factory=dict)
    #: Client-side latency of successful requests in ms: p50, p90, p99, p99.9, max.
    latency_ms: dict[str, float] = field(default_factory=dict)
    #: Server-side figures where the server publishes metrics (queue and inference ms, ...).
    server: dict[str, float] = field(default_factory=dict)
    #: False for a level cut short by Ctrl-C: its figures cover the time it ran.
    complete: bool = True

    @property
    def value(self) -> float:
        """The level's x value: its concurrency (closed loop) or rate (open loop)."""
        return float(self.concurrency if self.concurrency is not None else self.rate or 0.0)

    @property
    def label(self) -> str:
        if self.concurrency is not None:
            return str(self.concurrency)
        return f"{self.rate:g}/s"

    @property
    def goodput(self) -> float:
        """Successful requests per second."""
        return self.ok / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def success_rate(self) -> float:
        return self.ok / self.sent if self.sent else 0.0


@dataclass
class Sweep:
    """Every level measured against one server."""

    target: str  # the context name or URL, as the user named it
    url: str  # inference URL that was measured
    model: str
    server_kind: str = "unknown"  # mmsctl / mms / torchserve / unknown
    mode: str = "closed"  # closed (concurrency) or open (rate)
    levels: list[Level] = field(default_factory=list)

    def peak_goodput(self) -> float:
        """The highest successful requests/s of any level (0 when nothing succeeded)."""
        return max((lvl.goodput for lvl in self.levels), default=0.0)


@dataclass
class BenchRun:
    """A whole run: one sweep, or two interleaved ones with ``--compare``."""

    sweeps: list[Sweep] = field(default_factory=list)
    started: str = ""  # ISO 8601, UTC
    mmsctl_version: str = ""
    #: How the run was set up: inputs, duration or request count, warm-up, noop, host facts.
    settings: dict[str, Any] = field(default_factory=dict)
    #: False when the run was cut short (Ctrl-C, a failed level): the levels so far are kept.
    complete: bool = True

    def peak_goodput(self, target: Optional[str] = None) -> float:
        """The best successful requests/s of the run (of the sweep *target* when given)."""
        sweeps = [s for s in self.sweeps if target is None or target in (s.target, s.url)]
        if target is not None and not sweeps:
            names = ", ".join(s.target for s in self.sweeps) or "none"
            raise UsageError(f"the bench run has no sweep for {target!r} (it has: {names})")
        return max((s.peak_goodput() for s in sweeps), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, **asdict(self)}

    @classmethod
    def from_dict(cls, data: Any) -> "BenchRun":
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise UsageError("not a saved mmsctl bench run (no \"format\": \"mmsctl-bench\")")
        if data.get("version") != VERSION:
            raise UsageError(f"saved bench run has version {data.get('version')!r}; this mmsctl reads {VERSION}")
        try:
            sweeps = [
                Sweep(**{**s, "levels": [Level(**lvl) for lvl in s.get("levels", [])]})
                for s in data.get("sweeps", [])
            ]
            return cls(sweeps=sweeps, started=str(data.get("started", "")),
                       mmsctl_version=str(data.get("mmsctl_version", "")),
                       settings=dict(data.get("settings") or {}), complete=bool(data.get("complete", True)))
        except (TypeError, AttributeError) as exc:
            raise UsageError(f"saved bench run is malformed: {exc}") from None


def save_run(run: BenchRun, path: Path) -> None:
    """Write *run* atomically (a reader never sees half a file)."""
    write_atomic(path, json.dumps(run.to_dict(), indent=2) + "\n", private=True)


def load_run(path: Path) -> BenchRun:
    """Read a run saved by :func:`save_run`; :class:`InputNotFoundError` when there is no such file, a clear
    :class:`UsageError` for anything else."""
    path = Path(path)
    try:
        if path.stat().st_size > _MAX_FILE_BYTES:
            raise UsageError(f"{path} is too large to be a saved bench run")
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:  # a missing input file is exit 3, as in predict
        raise InputNotFoundError(f"bench file not found: {path}") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"cannot read bench file {path}: {exc}") from None
    return BenchRun.from_dict(data)
