#!/usr/bin/env python3
"""The largest modules and functions under mmsctl/ (lines), to keep the pieces small.

    python scripts/sizes.py [N]      # the N largest of each (default 5)

A function's body is counted from its first statement after the docstring to its end
(signature, decorators and docstring left out): tests/test_sizes.py holds every body
to :data:`MAX_BODY_LINES` and uses :func:`functions` from here, so both count alike.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Union

PACKAGE = Path(__file__).resolve().parents[1] / "mmsctl"
MAX_BODY_LINES = 60

_Function = Union[ast.FunctionDef, ast.AsyncFunctionDef]


@dataclass(frozen=True)
class Function:
    """One function or method: where it is, and its length with and without signature and docstring."""

    where: str  # mmsctl/x/y.py
    qualname: str  # Class.method, outer.inner
    name: str
    line: int
    lines: int
    body_lines: int


def body_lines(node: _Function) -> int:
    """Lines from the first statement after the docstring to the end (0 for a docstring alone)."""
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    if not body or node.end_lineno is None:
        return 0
    return node.end_lineno - body[0].lineno + 1


def functions(package: Path = PACKAGE) -> Iterator[Function]:
    """Every function and method (nested ones too) of every module under *package*."""
    for path in sorted(package.rglob("*.py")):
        where = path.relative_to(package.parent).as_posix()
        yield from _walk(ast.parse(path.read_text(encoding="utf-8")), where, "")


def _walk(node: ast.AST, where: str, prefix: str) -> Iterator[Function]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and child.end_lineno is not None:
            qualname = prefix + child.name
            yield Function(where, qualname, child.name, child.lineno, child.end_lineno - child.lineno + 1,
                           body_lines(child))
            yield from _walk(child, where, qualname + ".")
        elif isinstance(child, ast.ClassDef):
            yield from _walk(child, where, prefix + child.name + ".")
        else:
            yield from _walk(child, where, prefix)


def main(count: int) -> None:
    modules = sorted(((len(path.read_text(encoding="utf-8").splitlines()), path.relative_to(PACKAGE.parent).as_posix())
                      for path in PACKAGE.rglob("*.py")), reverse=True)
    print("largest modules (lines):")
    for lines, name in modules[:count]:
        print(f"  {lines:5d}  {name}")
    rows = sorted(((f.lines, f"{f.where}:{f.name}", f.body_lines) for f in functions()), reverse=True)
    print(f"largest functions (lines, body lines; a body may have at most {MAX_BODY_LINES}):")
    for lines, name, body in rows[:count]:
        print(f"  {lines:5d}  {body:5d}  {name}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
