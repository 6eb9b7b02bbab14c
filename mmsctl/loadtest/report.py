"""A run as rows: one per level and server for the table and CSV, and one per level for ``--compare`` ratios.

Pure functions over :class:`~mmsctl.loadtest.results.BenchRun`; ``mmsctl bench`` and
``mmsctl bench show`` render the same rows, so a saved run looks exactly as it did live.
"""

from __future__ import annotations

import csv
import io
from typing import Any, Optional, Sequence

from mmsctl.loadtest.results import BenchRun, Level, Sweep

__all__ = ["CSV_FIELDS", "align", "compare_rows", "errors_text", "level_row", "level_rows", "to_csv"]

CSV_FIELDS = ("target", "model", "level", "concurrency", "rate", "duration_s", "sent", "ok", "success_pct",
              "goodput", "p50_ms", "p90_ms", "p99_ms", "p99.9_ms", "max_ms", "errors", "server_queue_ms",
              "server_inference_ms", "complete")


def errors_text(errors: dict[str, int]) -> str:
    """``503:12 timeout:3``, most frequent first; empty when there were none."""
    return " ".join(f"{k}:{v}" for k, v in sorted(errors.items(), key=lambda kv: (-kv[1], kv[0])))


def level_row(sweep: Sweep, level: Level) -> dict[str, Any]:
    lat = level.latency_ms
    return {
        "target": sweep.target,
        "model": sweep.model,
        "level": level.label + ("" if level.complete else " (cut)"),
        "concurrency": level.concurrency,
        "rate": level.rate,
        "duration_s": round(level.duration_s, 3),
        "sent": level.sent,
        "ok": level.ok,
        "success_pct": round(100.0 * level.success_rate, 2),
        "goodput": round(level.goodput, 1),
        "p50_ms": lat.get("p50"),
        "p90_ms": lat.get("p90"),
        "p99_ms": lat.get("p99"),
        "p99.9_ms": lat.get("p99.9"),
        "max_ms": lat.get("max"),
        "errors": errors_text(level.errors),
        "server_queue_ms": level.server.get("queue_ms"),
        "server_inference_ms": level.server.get("inference_ms"),
        "complete": level.complete,
    }


def level_rows(run: BenchRun) -> list[dict[str, Any]]:
    """Every level of every sweep, interleaved by level as they ran."""
    return [level_row(sweep, level) for sweep, level in align(run.sweeps) if level is not None and sweep is not None]


def align(sweeps: Sequence[Sweep]) -> list[tuple[Optional[Sweep], Optional[Level]]]:
    """Levels of all sweeps grouped by level value, in the order of the first sweep that has each."""
    order: list[float] = []
    for sweep in sweeps:
        for level in sweep.levels:
            if level.value not in order:
                order.append(level.value)
    out: list[tuple[Optional[Sweep], Optional[Level]]] = []
    for value in order:
        for sweep in sweeps:
            out.append((sweep, next((lvl for lvl in sweep.levels if lvl.value == value), None)))
    return out


def _ratio(b: Optional[float], a: Optional[float]) -> Optional[float]:
    if a is None or b is None or a == 0:
        return None
    return round(b / a, 3)


def compare_rows(a: Sweep, b: Sweep) -> list[dict[str, Any]]:
    """One row per level both sweeps ran: B's goodput and p99 as a ratio of A's, and both success rates."""
    rows = []
    for level_a in a.levels:
        level_b = next((lvl for lvl in b.levels if lvl.value == level_a.value), None)
        if level_b is None:
            continue
        rows.append({
            "level": level_a.label,
            "goodput_a": round(level_a.goodput, 1),
            "goodput_b": round(level_b.goodput, 1),
            "goodput_ratio": _ratio(level_b.goodput, level_a.goodput),
            "p99_a": level_a.latency_ms.get("p99"),
            "p99_b": level_b.latency_ms.get("p99"),
            "p99_ratio": _ratio(level_b.latency_ms.get("p99"), level_a.latency_ms.get("p99")),
            "success_a": round(100.0 * level_a.success_rate, 2),
            "success_b": round(100.0 * level_b.success_rate, 2),
        })
    return rows


def to_csv(rows: Sequence[dict[str, Any]], fields: Sequence[str] = CSV_FIELDS) -> str:
    """RFC 4180 CSV with a header line; missing figures are empty cells."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(fields), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in fields})
    return out.getvalue()
