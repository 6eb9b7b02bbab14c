"""The engine's ceiling: MXNet's raw forward pass on a ready tensor, no server and no handler.

One measuring program for every benchmark that needs it (bench/predict.py, bench/models.py,
bench/batching.py): it loads a checkpoint, rewritten as the engine rewrites it for inference
(:mod:`mmsctl.engine.graph`; ``MMSCTL_GRAPH_REWRITE=0``: as saved), into an ``mx.mod.Module`` bound at a batch size,
warms it, says ``ready``, and on ``go`` runs forward passes for a number of passes or seconds;
:func:`forward` starts as many copies as asked together (bench/_together.py).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from _together import run_together

PROBE = """
import json, sys, time
from mmsctl.engine.mxnet_compat import import_mxnet
mx = import_mxnet()
prefix, batch_size, limit = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sym, args, aux = mx.model.load_checkpoint(prefix, 0)
from mmsctl.engine import graph
if graph.enabled():  # the network as the engine runs it
    sym = mx.sym.load_json(graph.normalise(sym.tojson())[0])
data_name = next(n for n in sym.list_arguments() if n not in args)
shape = (batch_size, 3, 224, 224)
module = mx.mod.Module(sym, data_names=[data_name], label_names=None, context=mx.cpu())
module.bind(for_training=False, data_shapes=[(data_name, shape)])
module.set_params(args, aux, allow_missing=True, allow_extra=True)
batch = mx.io.DataBatch([mx.nd.random.uniform(0, 255, shape)])
for _ in range(3):
    module.forward(batch, is_train=False)
    module.get_outputs()[0].asnumpy()
print("ready", flush=True)
sys.stdin.readline()
seconds = float(limit[:-1]) if limit.endswith("s") else None
passes = None if seconds is not None else int(limit)
n, t0, cpu0 = 0, time.time(), time.process_time()
while (n < passes) if passes is not None else (time.time() - t0 < seconds):
    module.forward(batch, is_train=False)
    module.get_outputs()[0].asnumpy()
    n += 1
print(json.dumps([n * batch_size, t0, time.time(), time.process_time() - cpu0]), flush=True)
"""


@dataclass
class Forward:
    """What the copies did together."""

    images: int
    #: From the first copy's start to the last one's end.
    seconds: float
    #: CPU time of all copies (all their threads).
    cpu_seconds: float

    @property
    def rate(self) -> float:
        """Images a second, all copies together."""
        return self.images / self.seconds

    @property
    def cpu_ms_per_image(self) -> float:
        return 1000 * self.cpu_seconds / self.images


def forward(checkpoint: Path, env: dict[str, str], *, copies: int, batch_size: int = 1,
            passes: int | None = None, seconds: float | None = None) -> Forward:
    """*copies* processes running the forward pass of *checkpoint* (a folder with one checkpoint) in
    *env*, each for *passes* passes or *seconds* seconds, started together."""
    prefix = next(checkpoint.glob("*-symbol.json")).name[: -len("-symbol.json")]
    limit = f"{seconds:g}s" if seconds is not None else str(passes)
    spans = run_together([sys.executable, "-c", PROBE, str(checkpoint / prefix), str(batch_size), limit], env,
                         copies, timeout=600)
    return Forward(sum(s[0] for s in spans), max(s[2] for s in spans) - min(s[1] for s in spans),
                   sum(s[3] for s in spans))
