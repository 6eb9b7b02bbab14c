"""A terminal chart of a sweep: goodput, p99 latency and success rate against concurrency (or rate).

The shapes of the MMS 1.0 launch post's graphs, in plain Unicode that survives a
pipe, a log file and a pull-request comment: one panel per figure, one bar per level
(two with ``--compare``: ``█`` for the first server, ``░`` for the second), each
bar scaled to the panel's largest value, with the number beside it.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

from mmsctl.loadtest.results import Level, Sweep

__all__ = ["render_chart"]

_EIGHTHS = " ▏▎▍▌▋▊▉"
_MARKS = ("█", "░")

_Figure = tuple[str, Callable[[Level], Optional[float]], str]
_FIGURES: tuple[_Figure, ...] = (
    ("goodput (ok req/s)", lambda lvl: lvl.goodput, "{:,.1f}"),
    ("p99 latency (ms)", lambda lvl: lvl.latency_ms.get("p99"), "{:,.1f}"),
    ("success rate (%)", lambda lvl: 100.0 * lvl.success_rate if lvl.sent else None, "{:.1f}"),
)


def _bar(value: Optional[float], top: float, width: int, mark: str) -> str:
    if value is None or top <= 0 or width <= 0:
        return " " * width
    cells = max(0.0, min(1.0, value / top)) * width
    full = int(cells)
    if mark != "█":
        return (mark * max(full, 1 if value > 0 else 0)).ljust(width)
    rest = _EIGHTHS[int((cells - full) * 8)] if full < width else ""
    if full == 0 and rest == " " and value > 0:
        rest = "▏"
    return (mark * full + rest).ljust(width)[:width]


def render_chart(sweeps: Sequence[Sweep], width: int = 100) -> str:
    """The chart as text, *width* columns wide (at least 60); empty when no level was measured."""
    sweeps = [s for s in sweeps if s.levels][:2]
    if not sweeps:
        return ""
    width = max(60, width)
    values: list[float] = []
    for sweep in sweeps:
        for level in sweep.levels:
            if level.value not in values:
                values.append(level.value)
    open_loop = sweeps[0].mode == "open"
    axis = "rate" if open_loop else "clients"
    labels = {v: next(lvl.label for s in sweeps for lvl in s.levels if lvl.value == v) for v in values}
    label_w = max(len(axis), *(len(x) for x in labels.values()))
    panel_w = (width - label_w - 1) // len(_FIGURES)
    number_w = 9
    bar_w = max(4, panel_w - number_w - 2)
    lines = [axis.rjust(label_w) + " " + "".join(title.ljust(panel_w) for title, _f, _fmt in _FIGURES).rstrip()]
    tops = []
    for _title, get, _fmt in _FIGURES:
        found = [get(lvl) for s in sweeps for lvl in s.levels]
        tops.append(max((v for v in found if v is not None), default=0.0))
    for value in values:
        for n, sweep in enumerate(sweeps):
            found_level = next((lvl for lvl in sweep.levels if lvl.value == value), None)
            head = (labels[value] if n == 0 else "").rjust(label_w)
            cells = []
            for (_title, get, fmt), top in zip(_FIGURES, tops):
                figure = get(found_level) if found_level is not None else None
                number = "-" if figure is None else fmt.format(figure)
                cells.append(_bar(figure, top, bar_w, _MARKS[n]) + " " + number.rjust(number_w) + " ")
            lines.append(head + " " + "".join(c.ljust(panel_w) for c in cells).rstrip())
    if len(sweeps) == 2:
        lines.append(f"{_MARKS[0]} {sweeps[0].target}   {_MARKS[1]} {sweeps[1].target}")
    return "\n".join(lines) + "\n"
