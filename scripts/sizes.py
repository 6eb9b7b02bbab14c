#!/usr/bin/env python3
"""The largest modules and functions under mmsctl/ (lines), to keep the pieces small.

    python scripts/sizes.py [N]      # the N largest of each (default 5)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mmsctl"


def main(count: int) -> None:
    modules: list[tuple[int, str]] = []
    functions: list[tuple[int, str]] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(PACKAGE.parent).as_posix()
        modules.append((len(text.splitlines()), where))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None:
                functions.append((node.end_lineno - node.lineno + 1, f"{where}:{node.name}"))
    for title, rows in (("modules", modules), ("functions", functions)):
        print(f"largest {title} (lines):")
        for lines, name in sorted(rows, reverse=True)[:count]:
            print(f"  {lines:5d}  {name}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
