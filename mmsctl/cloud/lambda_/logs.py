"""``mmsctl lambda logs``: the function's CloudWatch log events, once or followed (like ``aws logs tail``)."""

from __future__ import annotations

import re
import time
from typing import Any, Callable, Iterator, Optional

from mmsctl.cloud.aws.errors import aws_code
from mmsctl.cloud.aws.session import AwsSession
from mmsctl.cloud.lambda_ import spec as names
from mmsctl.errors import CloudError, NotFoundError, UsageError

__all__ = ["log_events", "parse_since"]

_SINCE = re.compile(r"^\s*(\d+)\s*(s|m|h|d|w)\s*$")
_MAX_SINCE_S = 90 * 86400


def parse_since(text: str) -> float:
    """``10m`` -> 600.0 seconds (s, m, h, d, w; at most 90 days)."""
    match = _SINCE.match(text or "")
    if not match:
        raise UsageError(f"since {text!r} is not a duration", param="since", hint="write it like 30s, 10m, 2h or 1d")
    seconds = int(match.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[match.group(2)]
    if seconds > _MAX_SINCE_S:
        raise UsageError(f"since {text}: at most 90 days", param="since")
    return float(seconds)


def log_events(aws: AwsSession, name: str, *, since_s: float, follow: bool = False, interval: float = 2.0,
               clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
               max_polls: Optional[int] = None) -> Iterator[dict[str, Any]]:
    """Events of ``/aws/lambda/NAME`` from *since_s* seconds ago, oldest first; with *follow*, then new ones.

    Following stops on Ctrl+C (or after *max_polls* polls); each event is yielded once.
    """
    group = names.log_group_name(name)
    start_ms = int((clock() - since_s) * 1000)
    seen: dict[str, int] = {}  # event id -> timestamp, pruned as the window moves on
    polls = 0
    while True:
        newest = start_ms
        try:
            events = aws.paginate("logs", "filter_log_events", "events", logGroupName=group, startTime=start_ms)
        except CloudError as exc:
            if aws_code(exc) == "ResourceNotFoundException":
                raise NotFoundError(f"no log group {group} in {aws.region}",
                                    hint="it appears with the first invocation, or with `mmsctl lambda deploy`") from exc
            raise
        for event in sorted(events, key=lambda e: (e.get("timestamp", 0), e.get("eventId", ""))):
            event_id = str(event.get("eventId"))
            if event_id in seen:
                continue
            seen[event_id] = int(event.get("timestamp", 0))
            newest = max(newest, seen[event_id])
            yield event
        polls += 1
        if not follow or (max_polls is not None and polls >= max_polls):
            return
        start_ms = newest  # events with the same millisecond come again and are skipped as seen
        seen = {k: v for k, v in seen.items() if v >= start_ms}
        sleep(interval)
