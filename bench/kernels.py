"""Forward time of a checkpoint per kernel set, with and without mmsctl's graph rewrites (run by hand).

    .venv/bin/python bench/kernels.py                      # the shared SqueezeNet, 3 rounds, 1 thread
    .venv/bin/python bench/kernels.py --rounds 5 --threads 2 DIR

Each round times the four variants (MKL-DNN on/off x graph as imported/rewritten by
mmsctl/engine/graph.py) in the same child processes the per-model kernel measurement uses
(mmsctl/engine/kernels.py: batch 1, CPU time, mean of the faster half), interleaved so that
they see the same machine load. Prints each round, then the median per variant, the
rewritten/original ratio per kernel set, and the set the per-model measurement picks each way.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mmsctl.engine import kernels  # noqa: E402
from mmsctl.engine.graph import normalise  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "models" / "squeezenet_v1.1"
VARIANTS = [(mkldnn, rewrite) for rewrite in (False, True) for mkldnn in (True, False)]


def _name(mkldnn: bool, rewrite: bool) -> str:
    return f"{'MKL-DNN' if mkldnn else 'MXNet own'}, {'rewritten' if rewrite else 'as imported'}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", nargs="?", default=str(SHARED), help="a folder with *-symbol.json and signature.json")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    ckpt = kernels.find_checkpoint(Path(args.model))
    if ckpt is None:
        print(f"{args.model}: no MXNet checkpoint with a signature.json", file=sys.stderr)
        return 2
    print("rewrites:", ", ".join(normalise(ckpt.symbol.read_text())[1]) or "none apply")
    limit = 8 * 1024**3
    times: dict[tuple[bool, bool], list[float]] = {v: [] for v in VARIANTS}
    for r in range(args.rounds):
        row = []
        for mkldnn, rewrite in VARIANTS:
            got = kernels._time_one(ckpt, args.threads, mkldnn, limit, rewrite=rewrite)
            if got is not None:
                times[(mkldnn, rewrite)].append(got[0])
            row.append(f"{_name(mkldnn, rewrite)} {got[0]:.1f}" if got else f"{_name(mkldnn, rewrite)} failed")
        print(f"round {r + 1}: " + "; ".join(row) + " ms")
    med = {v: statistics.median(t) for v, t in times.items() if t}
    for v in VARIANTS:
        if v in med:
            print(f"{_name(*v):26s} {med[v]:6.1f} ms per forward (median of {len(times[v])})")
    for mkldnn in (True, False):
        a, b = med.get((mkldnn, False)), med.get((mkldnn, True))
        if a and b:
            print(f"{'MKL-DNN' if mkldnn else 'MXNet own'}: rewritten/as imported = {b / a:.2f}")
    for rewrite in (False, True):
        on, off = med.get((True, rewrite)), med.get((False, rewrite))
        if on and off:
            pick = "MKL-DNN" if on <= kernels._MARGIN * off else "MXNet's own"
            print(f"graph {'rewritten' if rewrite else 'as imported'}: the per-model measurement picks {pick}")
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
