"""A fleet member's line as text: the members view and ``top --once`` show the same cells."""

from __future__ import annotations

from mmsctl.tui.format import IDLE, fmt_age, fmt_int, fmt_ms, fmt_percent, fmt_rate, fmt_workers
from mmsctl.tui.snapshot import MemberStatus

__all__ = ["MEMBER_COLUMNS", "MEMBER_KEYS", "member_cells"]

MEMBER_COLUMNS = ("MEMBER", "STATE", "KIND", "MODELS", "WORKERS", "REQ/S", "CPU", "POLL", "LAST ERROR", "URL")
_ERROR_WIDTH = 70


def _last_error(member: MemberStatus, now: float) -> str:
    if member.state == "down":
        return member.server.error or "unreachable"
    if member.last_error is None:
        return IDLE
    age = f"{fmt_age(now - member.last_error_at)} ago: " if member.last_error_at is not None else ""
    return age + member.last_error


def _short(text: str) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= _ERROR_WIDTH else line[: _ERROR_WIDTH - 1] + "…"


def member_cells(member: MemberStatus, now: float) -> tuple[str, ...]:
    """One member as the table's (and ``--once``'s) text cells."""
    up = member.server.reachable
    return (
        member.name,
        member.state,
        member.server.kind if up else IDLE,
        fmt_int(member.models) if up else IDLE,
        fmt_workers(member.workers_ready, member.workers_total) if up else IDLE,
        fmt_rate(member.requests_per_s, member.server.metrics) if up else IDLE,
        fmt_percent(member.host.cpu_percent) if up else IDLE,
        fmt_ms(member.poll_ms) if member.poll_ms is not None else IDLE,
        _short(_last_error(member, now)),
        member.server.url,
    )


#: The same cells as plain keys, for ``--once -o table``.
MEMBER_KEYS = ("member", "state", "kind", "models", "workers", "rps", "cpu", "poll", "error", "url")
