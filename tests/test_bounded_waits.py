"""Every wait is bounded: a loop that sleeps between looks must also watch a deadline.

A poll such as ``while "x" not in page(): sleep(0.02)`` hangs the whole run when "x" never
comes. Read with ``ast`` from every module of mmsctl/, bench/ and tests/: a ``while`` loop whose
body sleeps (``sleep``, ``pause``, ``wait``) must name its bound in its condition or body (a
deadline, a clock, a timeout, a count of tries), or say on its ``while`` line why it ends
(``# bounded: ...``). Tests wait with tests/support/waiting.py.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.waiting import wait_until, wait_until_async

ROOT = Path(__file__).resolve().parents[1]
#: Words that bound a loop: a deadline, a clock read, a timeout, the time or tries used so far.
BOUND = re.compile(r"deadline|monotonic|perf_counter|clock|timeout|waited|stop_at|left|polls|tries|attempts",
                   re.IGNORECASE)
SLEEPS = {"sleep", "pause", "wait"}
#: Loops bounded elsewhere, in modules another change owns (each must keep its reason, and the list must shrink).
KNOWN: dict[str, str] = {
}


def _names(node: ast.AST) -> Iterator[str]:
    """Every name and attribute the node uses, nested functions left out (their loops are their own)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(child, ast.Name):
            yield child.id
        elif isinstance(child, ast.Attribute):
            yield child.attr
        elif isinstance(child, ast.arg):
            yield child.arg
        yield from _names(child)


def _sleeps(loop: ast.While) -> bool:
    for node in ast.walk(loop):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in SLEEPS:
                return True
    return False


def unbounded_waits(source: str) -> list[int]:
    """The lines of the ``while`` loops in *source* that sleep and name no bound."""
    found = []
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.While) and _sleeps(node) and not any(BOUND.search(n) for n in _names(node)) \
                and "# bounded: " not in lines[node.lineno - 1]:
            found.append(node.lineno)
    return found


def _modules() -> Iterator[Path]:
    for top in ("mmsctl", "bench", "tests"):
        yield from sorted((ROOT / top).rglob("*.py"))


def test_every_loop_that_sleeps_watches_a_deadline() -> None:
    found = [f"{path.relative_to(ROOT)}:{line}" for path in _modules() for line in unbounded_waits(path.read_text())]
    assert sorted(set(found) - set(KNOWN)) == []
    assert sorted(set(KNOWN) - set(found)) == []  # fixed (or moved): take it off KNOWN


@pytest.mark.parametrize("source, lines", [
    ("while 'x' not in page():\n    time.sleep(0.02)\n", [1]),
    ("async def f():\n    while (await get()).status != 503:\n        await asyncio.sleep(0.02)\n", [2]),
    ("while True:\n    if ready():\n        break\n    pilot.pause(0.1)\n", [1]),
    ("while time.monotonic() < deadline:\n    time.sleep(0.02)\n", []),
    ("while True:\n    if waited >= timeout:\n        raise E\n    sleep(1)\n    waited += 1\n", []),
    ("while True:\n    chunk = read()\n    if not chunk:\n        break\n", []),  # no sleep: not a wait
    ("while (step := next_step()) is not None:  # bounded: the steps' own deadline\n    sleep(step)\n", []),
])
def test_the_check_tells_a_bounded_wait_from_an_unbounded_one(source: str, lines: list[int]) -> None:
    assert unbounded_waits(source) == lines


def test_wait_until_returns_what_the_check_saw_and_fails_at_its_deadline() -> None:
    seen = iter([None, 0, "ready"])
    assert wait_until(lambda: next(seen), timeout=5, what="ready", interval=0) == "ready"
    with pytest.raises(TimeoutError, match=r"^the flag: not done after 0.05 s; last saw: \[\]$"):
        wait_until(lambda: [], timeout=0.05, what="the flag", interval=0.01)


def test_wait_until_async_names_the_last_error_at_its_deadline() -> None:
    import asyncio

    async def refused() -> bool:
        raise ConnectionRefusedError("refused")

    with pytest.raises(TimeoutError, match=r"^the server: not done after 0.05 s; last error: ConnectionRefused"):
        asyncio.run(wait_until_async(refused, timeout=0.05, what="the server", interval=0.01))
