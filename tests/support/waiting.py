"""The one way tests wait for observed state: poll a check until it holds, or fail at a deadline.

Every wait in the tests goes through here (tests/test_bounded_waits.py checks it), so none can hang
a run: at its deadline a wait raises ``TimeoutError`` naming what it waited for and what it last saw.
"""

from __future__ import annotations

import asyncio
import time
import urllib.error
from typing import Awaitable, Callable, Optional, TypeVar

__all__ = ["TRANSIENT", "wait_until", "wait_until_async"]

T = TypeVar("T")

#: Errors a check may raise while the thing it looks at is still coming up (a refused connection,
#: a half-written JSON file); the wait goes on, and the last one is named if the deadline passes.
TRANSIENT: tuple[type[BaseException], ...] = (OSError, urllib.error.URLError, ValueError)


def _timeout_error(what: str, timeout: float, last: object, error: Optional[BaseException]) -> TimeoutError:
    seen = f"; last error: {error!r}" if error is not None else f"; last saw: {last!r}"
    return TimeoutError(f"{what}: not done after {timeout:g} s{seen}"[:2000])


def wait_until(
    check: Callable[[], T],
    *,
    timeout: float,
    what: str,
    interval: float = 0.05,
    alive: Optional[Callable[[], Optional[str]]] = None,
) -> T:
    """Call *check* until it returns something true, and return that; raise TimeoutError after *timeout* s.

    *alive* returns a reason string when waiting is pointless (the process died). The default *interval*
    is short because every wait overshoots by half of it on average, and the suite waits hundreds of times;
    a check that costs more than a cheap request passes a longer one.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    error: Optional[BaseException] = None
    while True:
        try:
            last, error = check(), None
            if last:
                return last
        except TRANSIENT as exc:
            error = exc
        if alive is not None:
            reason = alive()
            if reason:
                raise RuntimeError(f"{what}: {reason}")
        if time.monotonic() > deadline:
            raise _timeout_error(what, timeout, last, error)
        time.sleep(interval)


async def wait_until_async(
    check: Callable[[], Awaitable[T]],
    *,
    timeout: float,
    what: str,
    interval: float = 0.02,
) -> T:
    """``wait_until`` for a coroutine check, inside an event loop (other tasks run while it waits)."""
    deadline = time.monotonic() + timeout
    last: object = None
    error: Optional[BaseException] = None
    while True:
        try:
            last, error = await check(), None
            if last:
                return last  # type: ignore[return-value]
        except TRANSIENT as exc:
            error = exc
        if time.monotonic() > deadline:
            raise _timeout_error(what, timeout, last, error)
        await asyncio.sleep(interval)
