"""What a plain `mmsctl` command costs: wall and CPU time of whole commands, each a fresh process.

Most of a command's time is starting Python and importing typer, rich and httpx; this prints the
median of N runs of a few everyday commands against a local `mmsctl serve` with no models (started in a
temp state folder, stopped at the end), beside `python -c pass` and `curl` of the same management call.
The commands run in that temp folder with PYTHONPATH (this checkout unless set), so `-m mmsctl` is the
code asked for; compile an older checkout's bytecode first (`python -m compileall -q DIR/mmsctl`), or
its figures include compiling it.

    .venv/bin/python bench/cli_start.py            # N=15
    .venv/bin/python bench/cli_start.py --runs 30
    PYTHONPATH=/path/to/an/older/checkout .venv/bin/python bench/cli_start.py   # that code's figures
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MMSCTL = [sys.executable, "-m", "mmsctl"]

COMMANDS = (
    ("python -c pass", [sys.executable, "-c", "pass"]),
    ("mmsctl --help", [*MMSCTL, "--help"]),
    ("mmsctl serve status", [*MMSCTL, "serve", "status"]),
    ("mmsctl context list", [*MMSCTL, "context", "list"]),
    ("mmsctl models list", [*MMSCTL, "models", "list"]),
    ("mmsctl ping", [*MMSCTL, "ping"]),
)


def _run(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60,
                   check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall * 1000, (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-cli-"))
    env = {**os.environ, "MMSCTL_STATE_DIR": str(work / "state"), "MMSCTL_CONFIG_DIR": str(work / "config"),
           "MMSCTL_CACHE_DIR": str(work / "cache"), "NO_COLOR": "1", "PYTHONPATH": os.environ.get("PYTHONPATH", str(REPO))}
    start = subprocess.run([*MMSCTL, "serve", "start", "--name", "bench-cli", "--inference-address",
                            "http://127.0.0.1:18380", "--management-address", "http://127.0.0.1:18381",
                            "--metrics-address", "http://127.0.0.1:18382"], env=env, cwd=work, capture_output=True,
                           text=True, timeout=120)
    if start.returncode != 0:
        print(f"cannot start a server: {start.stderr.strip()}", file=sys.stderr)
        return 1
    commands = list(COMMANDS)
    if shutil.which("curl"):
        commands.append(("curl GET /models", ["curl", "-s", "http://127.0.0.1:18381/models"]))
    try:
        results: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in commands}
        for _ in range(args.runs):  # interleaved: each command sees the same machine
            for name, cmd in commands:
                results[name].append(_run(cmd, env, work))
    finally:
        subprocess.run([*MMSCTL, "serve", "stop", "--name", "bench-cli"], env=env, cwd=work, capture_output=True,
                       timeout=60)
        shutil.rmtree(work, ignore_errors=True)
    print(f"median of {args.runs} (1-min load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores):")
    for name, samples in results.items():
        wall = statistics.median(s[0] for s in samples)
        cpu = statistics.median(s[1] for s in samples)
        print(f"  {name:24s} {wall:6.0f} ms wall  {cpu:6.0f} ms CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
