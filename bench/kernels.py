"""The per-model kernel choice (MKL-DNN or MXNet's own) on a quiet machine and under a synthetic CPU load.

    .venv/bin/python bench/kernels.py                      # the shared SqueezeNet, 1 thread
    .venv/bin/python bench/kernels.py --as-saved           # the graph as MMS's example handler binds it
    .venv/bin/python bench/kernels.py --threads 2 DIR      # another checkpoint folder (with a signature.json)
    .venv/bin/python bench/kernels.py --graphs             # the graph as imported vs rewritten, per kernel set

The default run measures the model as mmsctl does (mmsctl/engine/kernel_trials.py: both kernel sets in
child processes taking turns, each judged by its fastest forward in CPU time), first as the machine is, then
with one busy-loop process per core (each bounded: it ends by itself after --load-seconds, and is killed
when the run ends), and prints both decisions with their trials' conditions, and what the mean of the same
loaded trials would have picked. Exit 0 when the loaded choice is the quiet one, 1 when it is not.

--graphs times the four variants (MKL-DNN on/off x graph as imported/rewritten by mmsctl/engine/graph.py)
interleaved in the same children and prints each one's fastest and median forward.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mmsctl.engine import kernel_trials as kt  # noqa: E402
from mmsctl.engine import kernels  # noqa: E402
from mmsctl.engine.graph import normalise  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "models" / "squeezenet_v1.1"
LIMIT = 8 * 1024**3
BUSY = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


def _model(ckpt: kernels.Checkpoint) -> list[object]:
    return [str(ckpt.symbol), str(ckpt.params), ckpt.data_name, list(ckpt.shape), LIMIT]


def _measure(ckpt: kernels.Checkpoint, threads: int, rewrite: bool) -> tuple[Optional[kt.Decision], kt.Trials]:
    variants = [kt.Variant(True, rewrite), kt.Variant(False, rewrite)]
    trials = kt.run_trials(_model(ckpt), variants, threads=threads, low_priority=False,
                           sure=lambda t: bool((d := kt.decide(t, *variants)) and d.confident))
    if trials is None:
        raise SystemExit("the model did not load in the measuring children")
    return kt.decide(trials, *variants), trials


def _show(label: str, decision: Optional[kt.Decision], trials: kt.Trials) -> None:
    assert decision is not None
    on, off = (trials.one[v] for v in sorted(trials.one, key=lambda v: not v.mkldnn))
    pick = "MKL-DNN" if decision.mkldnn else "MXNet's own kernels"
    print(f"{label}: {pick}, batch {decision.batch} (fastest forward: {decision.on_ms:.1f} ms with MKL-DNN, "
          f"{decision.off_ms:.1f} ms without; median {statistics.median(on):.1f} / {statistics.median(off):.1f}; "
          f"{decision.rounds} rounds, load average {decision.load:.2f} on {trials.cpus} CPUs, spread "
          f"{decision.spread:.0%}; {'confident' if decision.confident else 'unsure: ' + decision.doubt})")


def _by_mean(trials: kt.Trials) -> str:
    on, off = (statistics.mean(trials.one[v]) for v in sorted(trials.one, key=lambda v: not v.mkldnn))
    return "MKL-DNN" if on <= kt.MARGIN * off else "MXNet's own kernels"


def _busy(count: int, seconds: float) -> list[subprocess.Popen[bytes]]:
    code = BUSY.format(seconds=seconds)
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(count)]


def choice_under_load(ckpt: kernels.Checkpoint, args: argparse.Namespace) -> int:
    rewrite = kernels.rewrites_graph(ckpt) and not args.as_saved
    print(f"model {ckpt.symbol.parent.name}, {args.threads} thread(s), graph "
          f"{'rewritten' if rewrite else 'as saved'}; {os.cpu_count()} CPUs")
    quiet, _ = _measure(ckpt, args.threads, rewrite)
    _show("quiet   ", quiet, _)
    procs = _busy(args.load_procs, args.load_seconds)
    try:
        time.sleep(1.0)  # the busy loops running before the children start
        loaded, trials = _measure(ckpt, args.threads, rewrite)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    _show(f"loaded ({args.load_procs} busy loops)", loaded, trials)
    print(f"the mean of the loaded trials would pick: {_by_mean(trials)}")
    same = quiet is not None and loaded is not None and quiet.mkldnn == loaded.mkldnn
    print(f"same choice quiet and loaded: {'yes' if same else 'NO'}")
    return 0 if same else 1


def graphs(ckpt: kernels.Checkpoint, args: argparse.Namespace) -> int:
    print("rewrites:", ", ".join(normalise(ckpt.symbol.read_text())[1]) or "none apply")
    variants = [kt.Variant(mkldnn, rewrite) for rewrite in (False, True) for mkldnn in (True, False)]
    trials = kt.run_trials(_model(ckpt), variants, threads=args.threads, low_priority=False)
    if trials is None:
        return 1
    for v in variants:
        times = trials.one.get(v) or []
        name = f"{'MKL-DNN' if v.mkldnn else 'MXNet own'}, {'rewritten' if v.rewrite else 'as imported'}"
        if times:
            print(f"{name:26s} fastest {min(times):6.1f} ms, median {statistics.median(times):6.1f} ms per forward")
    for rewrite in (False, True):
        decision = kt.decide(trials, kt.Variant(True, rewrite), kt.Variant(False, rewrite))
        if decision is not None:
            print(f"graph {'rewritten' if rewrite else 'as imported'}: the per-model measurement picks "
                  f"{'MKL-DNN' if decision.mkldnn else 'MXNet own'}")
    print(f"{trials.rounds} rounds; load average {trials.load:.2f}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", nargs="?", default=str(SHARED), help="a folder with *-symbol.json and signature.json")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--load-procs", type=int, default=os.cpu_count() or 1, help="busy loops (default: one per CPU)")
    parser.add_argument("--load-seconds", type=float, default=60.0, help="each busy loop ends by itself after this")
    parser.add_argument("--as-saved", action="store_true", help="the graph as saved, as MMS's example handler and "
                        "your own handlers bind it (default: as the built-in handler runs it)")
    parser.add_argument("--graphs", action="store_true", help="compare the graph as imported and rewritten instead")
    args = parser.parse_args()
    ckpt = kernels.find_checkpoint(Path(args.model))
    if ckpt is None:
        print(f"{args.model}: no MXNet checkpoint with a signature.json", file=sys.stderr)
        return 2
    return graphs(ckpt, args) if args.graphs else choice_under_load(ckpt, args)


if __name__ == "__main__":
    sys.exit(main())
