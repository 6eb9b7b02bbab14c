"""Short, fixed-width text for numbers in the monitor's cells.

Unavailable and idle are told apart: ``n/a`` means the server does not publish
the number at all (real MMS has no metrics), ``-`` means it does but there was
nothing to measure in the last interval (no requests, so no latency); ``mixed``
means the members of a fleet differ.
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "IDLE",
    "MIXED",
    "NA",
    "fmt_age",
    "fmt_bytes",
    "fmt_count",
    "fmt_int",
    "fmt_ms",
    "fmt_percent",
    "fmt_rate",
    "fmt_workers",
]

NA = "n/a"
IDLE = "-"
#: A setting the members of a fleet do not agree on.
MIXED = "mixed"


def _missing(known: bool) -> str:
    return IDLE if known else NA


def fmt_rate(value: Optional[float], known: bool = True) -> str:
    """Requests or errors per second."""
    if value is None:
        return _missing(known)
    if value == 0:
        return "0"
    if value >= 10_000:
        return f"{value / 1000:.0f}k"
    if value >= 1000:
        return f"{value / 1000:.1f}k"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 0.1:
        return f"{value:.1f}"
    return f"{value:.2f}"


def fmt_ms(value: Optional[float], known: bool = True) -> str:
    """A latency given in milliseconds."""
    if value is None:
        return _missing(known)
    if value >= 10_000:
        return f"{value / 1000:.0f}s"
    if value >= 1000:
        return f"{value / 1000:.1f}s"
    if value >= 100:
        return f"{value:.0f}ms"
    if value >= 10:
        return f"{value:.1f}ms"
    return f"{value:.2f}ms"


def fmt_count(value: Optional[float], known: bool = True) -> str:
    if value is None:
        return _missing(known)
    return f"{value:.0f}"


def fmt_int(value: Optional[int]) -> str:
    return NA if value is None else str(value)


def fmt_workers(ready: Optional[int], total: Optional[int]) -> str:
    if total is None:
        return NA
    return f"{ready if ready is not None else '?'}/{total}"


def fmt_bytes(value: Optional[float]) -> str:
    """Binary units like ``kubectl top`` (Ki, Mi, Gi), the unit picked by ``rich.filesize``."""
    if value is None:
        return NA
    from rich.filesize import pick_unit_and_suffix

    unit, suffix = pick_unit_and_suffix(int(value), ["B", "Ki", "Mi", "Gi"], 1024)
    if unit == 1:
        return f"{value:.0f}B"
    scaled = value / unit
    return f"{scaled:.1f}{suffix}" if scaled < 10 else f"{scaled:.0f}{suffix}"


def fmt_percent(value: Optional[float]) -> str:
    return NA if value is None else f"{value:.0f}%"


def fmt_age(seconds: float) -> str:
    """How long ago, in the largest whole unit: ``12s``, ``3m``, ``2h``, ``4d``."""
    value = max(0, int(seconds))
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if value >= size:
            return f"{value // size}{unit}"
    return f"{value}s"
