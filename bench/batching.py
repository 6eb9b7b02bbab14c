"""Does batching buy throughput on this CPU? The raw forward pass per image at batch 1 to 16.

    .venv/bin/python bench/batching.py            # squeezenet (../shared) and resnet-18 (random weights)

One process, one OpenMP thread (as each server worker runs), the kernel set mmsctl chose for the
model, a ready tensor, CPU time per image over at least 1 s per batch size. If a larger batch
cost much less per image, a server that batches could pass the batch-1 ceiling that
bench/models.py prints; the ratio column says whether it can.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.paths import SQUEEZENET_DIR  # noqa: E402

SIZES = (1, 2, 4, 8, 16)

PROBE = """
import sys, time
from mmsctl.engine.mxnet_compat import import_mxnet
mx = import_mxnet()
prefix, sizes = sys.argv[1], [int(n) for n in sys.argv[2].split(",")]
sym, args, aux = mx.model.load_checkpoint(prefix, 0)
data_name = next(n for n in sym.list_arguments() if n not in args)
for n in sizes:
    module = mx.mod.Module(sym, data_names=[data_name], label_names=None, context=mx.cpu())
    module.bind(for_training=False, data_shapes=[(data_name, (n, 3, 224, 224))])
    module.set_params(args, aux, allow_missing=True, allow_extra=True)
    batch = mx.io.DataBatch([mx.nd.random.uniform(0, 255, (n, 3, 224, 224))])
    for _ in range(3):
        module.forward(batch, is_train=False)
        module.get_outputs()[0].asnumpy()
    done, t0 = 0, time.process_time()
    while time.process_time() - t0 < 1.0:
        module.forward(batch, is_train=False)
        module.get_outputs()[0].asnumpy()
        done += n
    print(n, (time.process_time() - t0) / done * 1000, flush=True)
"""


def per_image_ms(checkpoint: Path) -> dict[int, float]:
    """Milliseconds of CPU per image at each batch size, in a worker's environment."""
    from mmsctl.engine.spec import ServiceSpec
    from mmsctl.engine.worker import worker_env

    env = worker_env(1, spec=ServiceSpec(checkpoint, "m", None))
    prefix = next(checkpoint.glob("*-symbol.json")).name[: -len("-symbol.json")]
    out = subprocess.run([sys.executable, "-c", PROBE, str(checkpoint / prefix), ",".join(map(str, SIZES))],
                         env=env, check=True, capture_output=True, text=True, timeout=600).stdout
    return {int(n): float(ms) for n, ms in (line.split() for line in out.splitlines())}


def main() -> int:
    if not SQUEEZENET_DIR.exists():
        print(f"needs ../shared: {SQUEEZENET_DIR} is missing")
        return 1
    from mmsctl.zoo.untrained import build_checkpoint

    with tempfile.TemporaryDirectory(prefix="bench-batching-") as tmp:
        os.environ.update(MMSCTL_CACHE_DIR=str(Path(tmp) / "cache"), MMSCTL_OFFLINE="1")
        models = {"squeezenet": SQUEEZENET_DIR, "resnet-18": build_checkpoint("resnet-18", Path(tmp) / "r18")}
        for name, checkpoint in models.items():
            ms = per_image_ms(checkpoint)
            print(f"{name}: CPU ms per image, 1 thread (batch: ms, x batch 1)")
            print("  " + "   ".join(f"{n}: {v:.1f} ({v / ms[1]:.2f}x)" for n, v in ms.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
