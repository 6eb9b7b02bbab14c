#!/usr/bin/env python3
"""Regenerate completions/ from the CLI (tests/cli/test_completion.py fails when they drift)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from mmsctl.cli.completion import SHELLS, completion_script  # noqa: E402


def main() -> int:
    out = REPO / "completions"
    out.mkdir(exist_ok=True)
    for shell, name in SHELLS.items():
        (out / name).write_text(completion_script(shell))
        print(out / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
