"""Does batching buy throughput on this CPU? The raw forward pass per image at batch 1 to 16.

    .venv/bin/python bench/batching.py            # squeezenet (../shared) and resnet-18 (random weights)

One process, one OpenMP thread (as each server worker runs), the kernel set mmsctl chose for the
model, a ready tensor, CPU time per image over at least 1 s per batch size. If a larger batch
cost much less per image, a server that batches could pass the batch-1 ceiling that
bench/models.py prints; the ratio column says whether it can.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.paths import SQUEEZENET_DIR  # noqa: E402

from _forward import forward  # noqa: E402 - bench/ is this script's folder

SIZES = (1, 2, 4, 8, 16)

def per_image_ms(checkpoint: Path) -> dict[int, float]:
    """Milliseconds of CPU per image at each batch size, in a worker's environment (one process)."""
    from mmsctl.engine.spec import ServiceSpec
    from mmsctl.engine.worker.spawn import worker_env

    env = worker_env(1, spec=ServiceSpec(checkpoint, "m", None))
    return {n: forward(checkpoint, env, copies=1, batch_size=n, seconds=1.0).cpu_ms_per_image for n in SIZES}


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
