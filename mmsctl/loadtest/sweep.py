"""A sweep: the same load at growing concurrency (or rate) against one or two servers, level by level.

With two targets (``--compare``) the levels are interleaved, A then B at the first
level, B then A at the next, so a drift in the machine's speed (another job, a
warming CPU) falls on both alike. Each level gets a fresh event loop and its own
server-metrics scrapes before and after.

A level in which nothing succeeded ends the sweep (after the other target ran that
level too, so the levels stay aligned); so does the *stop* flag (Ctrl-C), keeping
the cut level marked partial.
"""

from __future__ import annotations

import re
import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional, Sequence

from mmsctl.config import DEFAULT_MAX_RESPONSE_BYTES
from mmsctl.loadtest.errors import BenchInterrupted, LevelFailed
from mmsctl.loadtest.loadgen import MAX_CONCURRENCY, MAX_RATE, Endpoint, LevelResult, LoadSpec, run_in_loop, run_load
from mmsctl.loadtest.pool import MAX_PROCESSES, LoadPool, auto_processes
from mmsctl.loadtest.results import Level, Sweep
from mmsctl.loadtest.server_side import ServerProbe
from mmsctl.errors import MmsError, UsageError

__all__ = ["Plan", "Target", "Tick", "parse_duration", "parse_levels", "run_sweep",
           "stop_on_sigint"]

MAX_LEVELS = 50
MAX_DURATION_S = 24 * 3600.0
MAX_REQUESTS = 100_000_000
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str, what: str = "duration") -> float:
    """``10s``, ``500ms``, ``2m``, ``1h`` or plain seconds, as seconds.

    Raises:
        UsageError: anything else, a negative value, or more than a day.
    """
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", text or "")
    if not match:
        raise UsageError(f"bad {what} {text!r}: use a number with s, ms, m or h (10s, 500ms, 2m)", param=what)
    seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    if seconds > MAX_DURATION_S:
        raise UsageError(f"{what} {text!r} is longer than a day", param=what)
    return seconds


def parse_levels(text: str, *, rate: bool = False) -> tuple[float, ...]:
    """``1,10,100`` (clients) or ``50,100.5`` (requests/s), in the order given, duplicates dropped.

    Raises:
        UsageError: an empty list, a value that is not a positive number (a whole one for
            clients), above the ceiling, or more than 50 levels.
    """
    what = "rate" if rate else "concurrency"
    values: list[float] = []
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        try:
            value = float(part) if rate else int(part)
        except ValueError:
            kind = "a number of requests per second" if rate else "a whole number of clients"
            raise UsageError(f"bad {what} value {part!r}: expected {kind}", param=what) from None
        ceiling = MAX_RATE if rate else MAX_CONCURRENCY
        if not 0 < value <= ceiling:
            raise UsageError(f"bad {what} value {part}: must be above 0 and at most {ceiling:g}", param=what)
        if value not in values:
            values.append(value)
    if not values:
        raise UsageError(f"{what} needs at least one value, e.g. {'10,50,100' if rate else '1,10,100'}", param=what)
    if len(values) > MAX_LEVELS:
        raise UsageError(f"{what} has {len(values)} levels; at most {MAX_LEVELS}", param=what)
    return tuple(values)


@dataclass(frozen=True)
class Plan:
    """What every level of a sweep runs: the levels, and how long or how many requests each."""

    levels: tuple[float, ...]
    open_loop: bool = False
    duration_s: Optional[float] = 10.0
    requests: Optional[int] = None
    warmup_s: float = 2.0
    timeout_s: float = 30.0
    max_connections: int = 1000
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES  # a longer answer is an error (too-large)
    processes: Optional[int] = None  # load-generator processes per level; None: as many as the level needs

    def __post_init__(self) -> None:
        if self.requests is not None and not 1 <= self.requests <= MAX_REQUESTS:
            raise UsageError(f"requests must be 1 to {MAX_REQUESTS:,}", param="requests")
        if self.processes is not None and not 1 <= self.processes <= MAX_PROCESSES:
            raise UsageError(f"processes must be auto or 1 to {MAX_PROCESSES}", param="processes")
        for value in self.levels:  # LoadSpec checks every figure once, here, before anything runs
            self.spec(value)

    @property
    def mode(self) -> str:
        return "open" if self.open_loop else "closed"

    def spec(self, value: float) -> LoadSpec:
        return LoadSpec(
            concurrency=None if self.open_loop else int(value),
            rate=float(value) if self.open_loop else None,
            duration_s=None if self.requests is not None else self.duration_s,
            requests=self.requests,
            warmup_s=self.warmup_s,
            timeout_s=self.timeout_s,
            max_connections=self.max_connections,
            max_response_bytes=self.max_response_bytes,
        )

    def settings(self) -> dict[str, Any]:
        return {"mode": self.mode, "levels": list(self.levels), "duration_s": self.duration_s
                if self.requests is None else None, "requests": self.requests, "warmup_s": self.warmup_s,
                "timeout_s": self.timeout_s, "max_connections": self.max_connections if self.open_loop else None,
                "max_response_bytes": self.max_response_bytes, "processes": self.processes or "auto"}

    def processes_for(self, spec: LoadSpec) -> int:
        return self.processes or auto_processes(spec)


@dataclass
class Target:
    """One server to load: its name for the user, where requests go, and its metrics probe."""

    label: str
    url: str
    model: str
    kind: str
    endpoint: Endpoint
    probe: Optional[ServerProbe] = None


@dataclass
class Tick:
    """Live figures of the level that is running, for a progress line."""

    target: str
    level: str
    index: int  # 0-based level number
    levels: int
    elapsed_s: float
    sent: int
    ok: int
    expected_s: Optional[float] = None  # duration mode: warm-up + duration
    expected_requests: Optional[int] = None
    errors: dict[str, int] = field(default_factory=dict)
    warmup_s: float = 0.0  # the first seconds of elapsed_s, whose answers are not counted

    @property
    def ok_per_s(self) -> float:
        """Successful answers per second of the measured time so far: the same figure the level ends with."""
        measured = self.elapsed_s - self.warmup_s
        return self.ok / measured if measured > 0 else 0.0


@contextmanager
def stop_on_sigint(stop: threading.Event, on_first: Callable[[], None] = lambda: None) -> Iterator[None]:
    """While the block runs, the first Ctrl-C only sets *stop*; a second raises KeyboardInterrupt.

    Outside the main thread (tests, embedding) nothing is installed.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        on_first()

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _level(plan: Plan, value: float, result: LevelResult, server: dict[str, float]) -> Level:
    return Level(
        concurrency=None if plan.open_loop else int(value),
        rate=float(value) if plan.open_loop else None,
        duration_s=round(result.duration_s, 6),
        sent=result.sent,
        ok=result.ok,
        errors=dict(sorted(result.errors.items())),
        latency_ms=result.latency.summary_ms(),
        server=server,
        complete=not result.interrupted,
    )


def _failure(target: Target, level: Level) -> str:
    causes = ", ".join(f"{k}: {v}" for k, v in sorted(level.errors.items(), key=lambda kv: -kv[1]))
    return (f"level {level.label} failed completely on {target.label}: {level.sent} sent, 0 ok"
            + (f" ({causes})" if causes else ""))


def run_sweep(
    targets: Sequence[Target],
    plan: Plan,
    *,
    stop: Optional[threading.Event] = None,
    on_tick: Optional[Callable[[Tick], None]] = None,
    on_level: Optional[Callable[[Target, Level], None]] = None,
) -> tuple[list[Sweep], Optional[MmsError]]:
    """Run every level against every target; return the sweeps and why it ended early (or None).

    The error is returned, not raised, so the caller can print and save the partial
    results first: :class:`LevelFailed` (exit 4) or :class:`BenchInterrupted` (exit 130).
    """
    stop = stop or threading.Event()
    sweeps = [Sweep(target=t.label, url=t.url, model=t.model, server_kind=t.kind, mode=plan.mode)
              for t in targets]
    pool: Optional[LoadPool] = None
    size = max(plan.processes_for(plan.spec(v)) for v in plan.levels)
    try:
        if size > 1:
            pool = LoadPool(size)
        return _levels(targets, plan, sweeps, stop, pool, on_tick, on_level)
    finally:
        if pool is not None:
            pool.close()


def _levels(targets: Sequence[Target], plan: Plan, sweeps: list[Sweep], stop: threading.Event,
            pool: Optional[LoadPool], on_tick: Optional[Callable[[Tick], None]],
            on_level: Optional[Callable[[Target, Level], None]]) -> tuple[list[Sweep], Optional[MmsError]]:
    failures: list[str] = []
    for index, value in enumerate(plan.levels):
        order = list(range(len(targets)))
        if index % 2:
            order.reverse()
        for i in order:
            if stop.is_set():
                break
            target = targets[i]
            spec = plan.spec(value)
            label = Level(concurrency=spec.concurrency, rate=spec.rate).label

            def tick(result: LevelResult, elapsed: float, _t: Target = target, _l: str = label) -> None:
                if on_tick is not None:
                    on_tick(Tick(_t.label, _l, index, len(plan.levels), elapsed, result.sent, result.ok,
                                 None if spec.duration_s is None else spec.warmup_s + spec.duration_s,
                                 spec.requests, result.errors, spec.warmup_s))

            before = target.probe.scrape() if target.probe else None
            parts = plan.processes_for(spec)
            if pool is not None and parts > 1:
                result = pool.run(target.endpoint, spec, parts, stop=stop, on_progress=tick)
            else:
                result = run_in_loop(run_load(target.endpoint, spec, stop=stop, on_progress=tick))
            after = target.probe.scrape() if target.probe and before is not None else None
            level = _level(plan, value, result, target.probe.figures(before, after) if target.probe else {})
            if level.complete or level.sent:
                sweeps[i].levels.append(level)
                if on_level is not None:
                    on_level(target, level)
            if level.complete and level.sent and level.ok == 0:
                failures.append(_failure(target, level))
        if stop.is_set():
            done = sum(1 for lvl in sweeps[0].levels if lvl.complete)
            cut = any(not lvl.complete for sweep in sweeps for lvl in sweep.levels)
            cut_spec = plan.spec(value)
            where = f"in level {Level(concurrency=cut_spec.concurrency, rate=cut_spec.rate).label} " \
                    f"({index + 1} of {len(plan.levels)})"
            return sweeps, BenchInterrupted(
                f"interrupted {where}: {done} level(s) complete"
                + ("; the row marked (cut) covers the time its level ran" if cut else "")
                + "; the results so far are shown")
        if failures:
            return sweeps, LevelFailed("; ".join(failures),
                                       hint="the sweep stops at a level where nothing succeeds; "
                                            "the errors column says why")
    return sweeps, None
