"""Start N copies of a measuring program and let them run at the same moment (the ceilings' way).

Each copy loads what it needs, prints ``ready``, waits for ``go`` on stdin, does its timed work and
prints one JSON line; the caller gets those lines back, in order. Used by bench/models.py (a
handler's ceiling) and bench/_forward.py (the raw forward pass's), so start-up is never timed.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any


def run_together(argv: list[str], env: dict[str, str], copies: int, timeout: float) -> list[Any]:
    """Run *copies* processes of *argv*; start their timed parts together; their JSON answers."""
    procs = [subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for _ in range(copies)]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        return [json.loads(p.stdout.readline()) for p in procs if p.stdout is not None]
    finally:
        for p in procs:
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
