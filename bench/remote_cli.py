"""Benchmark: what a remote command costs from the shell, mmsctl against curl.

    .venv/bin/python bench/remote_cli.py              # full run (on a quiet machine)
    .venv/bin/python bench/remote_cli.py --runs 3     # smoke

Starts an mmsctl server (echo model, 1 worker) on loopback, then runs each
command as a fresh process, as a user or a script would, ``--runs`` times:
``models list``, ``models describe``, ``ping`` and ``predict --context`` against
the curl call that does the same HTTP request. Prints the median wall time of
each, the mmsctl/curl ratio, and writes JSON to bench/out/remote_cli.json.
The gap is mostly Python start-up plus the CLI's imports (typer, rich, httpx).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.mmsctl_server import make_noop_archive, running_mmsctl_server  # noqa: E402

MMSCTL = [str(REPO / ".venv" / "bin" / "mmsctl")]


def _time(cmd: list[str], env: dict[str, str], runs: int) -> float:
    """Median seconds of *cmd* over *runs* runs (after one warm-up); fails loudly on a non-zero exit."""
    samples = []
    for i in range(runs + 1):
        started = time.perf_counter()
        done = subprocess.run(cmd, env=env, capture_output=True, check=False)
        elapsed = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.decode()[-500:]}")
        if i:
            samples.append(elapsed)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="timed runs per command (default 15)")
    args = parser.parse_args()
    curl = shutil.which("curl")
    if curl is None:
        raise SystemExit("curl is not installed: nothing to compare against")
    work = Path(tempfile.mkdtemp(prefix="bench-remote-"))
    echo = make_noop_archive(work / "echo", "echo")
    body = work / "input.bin"
    body.write_bytes(b"x" * 1024)
    results = []
    try:
        with running_mmsctl_server(work, models={"echo": str(echo)}) as srv:
            env = dict(os.environ, MMSCTL_CONFIG_DIR=str(work / "config"), MMSCTL_STATE_DIR=str(work / "state"),
                       MMSCTL_CACHE_DIR=str(work / "cache"), NO_COLOR="1")
            subprocess.run([*MMSCTL, "context", "add", "bench", "--inference", srv.inference_url,
                            "--management", srv.management_url, "--use"], env=env, check=True, capture_output=True)
            cases = [
                ("models list", [*MMSCTL, "models", "list"], [curl, "-sf", f"{srv.management_url}/models"]),
                ("models describe", [*MMSCTL, "models", "describe", "echo", "-o", "json"],
                 [curl, "-sf", f"{srv.management_url}/models/echo"]),
                ("ping", [*MMSCTL, "ping"], [curl, "-sf", f"{srv.inference_url}/ping"]),
                ("predict --context", [*MMSCTL, "predict", "echo", str(body), "--context", "bench", "-o", "json"],
                 [curl, "-sf", "-T", str(body), f"{srv.inference_url}/predictions/echo"]),
            ]
            for name, ours, reference in cases:
                mine, theirs = _time(ours, env, args.runs), _time(reference, env, args.runs)
                results.append({"command": name, "mmsctl_s": round(mine, 4), "curl_s": round(theirs, 4),
                                "ratio": round(mine / theirs, 1)})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{'command':<20}{'mmsctl':>10}{'curl':>10}{'ratio':>8}")
    for row in results:
        print(f"{row['command']:<20}{row['mmsctl_s'] * 1000:>8.0f}ms{row['curl_s'] * 1000:>8.0f}ms{row['ratio']:>7}x")
    out = REPO / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "remote_cli.json").write_text(json.dumps({"runs": args.runs, "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
