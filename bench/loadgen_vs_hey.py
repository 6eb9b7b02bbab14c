"""Benchmark: `mmsctl bench`'s load generator against `hey`, on the same no-op server, in one run.

    .venv/bin/python bench/loadgen_vs_hey.py                     # 100 clients, 10 s each, 3 rounds
    .venv/bin/python bench/loadgen_vs_hey.py --duration 5 --rounds 1   # quick

The target is mmsctl's own server (``python -m mmsctl.server``) with the echo
no-op model and 2 workers. Each round runs ``hey -z Ds -c 100 -m POST`` and then
``mmsctl bench noop EMPTY -c 100 -d Ds`` (the real command, in its own process, an
empty body like hey's) against it, alternating which goes first. The figure compared is
*successful* requests per second (hey: its 200 responses / its total time; mmsctl:
OK/s). Both share the machine with the server, so a cheaper load generator leaves
the server more CPU: the ratio measures exactly "the tool must not be the
bottleneck it measures". Target: mmsctl >= 0.8x hey (median of the rounds).

Prints both figures per round, the medians and the ratio, and writes JSON to
bench/out/loadgen_vs_hey.json. Exits 0 with a message when hey is not installed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.mmsctl_server import make_noop_archive, running_mmsctl_server  # noqa: E402

import _loadgen  # noqa: E402 - bench/ is this script's folder

TARGET_RATIO = 0.8


def _result(load: _loadgen.Load) -> dict[str, Any]:
    return {"ok_per_s": load.rps, "ok": load.ok, "sent": load.sent, "seconds": load.seconds, "p99_ms": load.p99_ms}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    if _loadgen.HEY is None:
        print("hey is not installed (looked on PATH and at /usr/bin/hey): install it (apt-get install hey) "
              "to compare mmsctl bench with it. Skipped.")
        return 0
    work = Path(tempfile.mkdtemp(prefix="bench-hey-"))
    store = work / "store"
    make_noop_archive(store / "noop")
    body = work / "empty.bin"
    body.write_bytes(b"")
    rounds: list[dict[str, Any]] = []
    with running_mmsctl_server(work / "srv", model_store=store, models={"noop": "noop"},
                               workers=args.workers) as srv:
        url = f"{srv.inference_url}/predictions/noop"
        env = {k: v for k, v in os.environ.items() if not k.startswith("MMSCTL_")}
        env.update(MMSCTL_INFERENCE_URL=srv.inference_url, MMSCTL_MANAGEMENT_URL=srv.management_url,
                   MMSCTL_METRICS_URL=srv.metrics_url, MMSCTL_CONFIG_DIR=str(work / "config"),
                   MMSCTL_STATE_DIR=str(work / "state"), PYTHONPATH=str(REPO))
        _loadgen.hey(url, args.clients, 2.0)  # warm the server (workers, caches) before measuring
        print(f"target: mmsctl server, no-op model, {args.workers} workers; {args.clients} clients, "
              f"{args.duration:g} s per run, {os.cpu_count()} CPUs shared by server and load generator")
        for i in range(args.rounds):
            order = ["hey", "mmsctl"] if i % 2 == 0 else ["mmsctl", "hey"]
            result: dict[str, Any] = {}
            for tool in order:
                if tool == "hey":
                    result["hey"] = _result(_loadgen.hey(url, args.clients, args.duration))
                else:
                    result["mmsctl"] = _result(_loadgen.mmsctl_bench(url, args.clients, args.duration, body=body,
                                                                     env=env))
            rounds.append(result)
            print(f"round {i + 1}: hey {result['hey']['ok_per_s']:8,.0f} ok/s   "
                  f"mmsctl bench {result['mmsctl']['ok_per_s']:8,.0f} ok/s   "
                  f"ratio {result['mmsctl']['ok_per_s'] / result['hey']['ok_per_s']:.2f}")
    shutil.rmtree(work, ignore_errors=True)
    hey_rate = statistics.median(r["hey"]["ok_per_s"] for r in rounds)
    ours = statistics.median(r["mmsctl"]["ok_per_s"] for r in rounds)
    ratio = ours / hey_rate if hey_rate else 0.0
    verdict = "PASS" if ratio >= TARGET_RATIO else "FAIL"
    print(f"median: hey {hey_rate:,.0f} ok/s, mmsctl bench {ours:,.0f} ok/s, "
          f"ratio {ratio:.2f} (target >= {TARGET_RATIO}) {verdict}")
    out = REPO / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "loadgen_vs_hey.json").write_text(json.dumps(
        {"clients": args.clients, "duration_s": args.duration, "rounds": rounds, "hey_ok_per_s": hey_rate,
         "mmsctl_ok_per_s": ours, "ratio": ratio}, indent=2))
    return 0 if ratio >= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
