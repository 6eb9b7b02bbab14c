"""Benchmarks of `mmsctl predict` against their references (run by hand; not collected by pytest).

1. Cold start: `mmsctl predict squeezenet kitten.jpg` as a fresh process with the archive
   already cached, against real MMS 1.1.11 started from .venv-mms until its first
   successful prediction of the same archive. Target: mmsctl <= 1.5 s.
2. Throughput: a folder of N images (default 500) through the predict pipeline (read,
   decode, resize, forward, JSON), against raw MXNet: `mx.mod.Module.forward` on ready
   tensors with the same batch size. Target: >= 90 % of raw.

    .venv/bin/python bench/predict.py                 # both, N=500
    .venv/bin/python bench/predict.py --images 100 --skip-mms --runs 1   # a quick smoke run

Prints one line per measurement: mmsctl, reference, ratio. Uses ../shared (the real
SqueezeNet and kitten); everything it makes goes to a temp folder.
"""

from __future__ import annotations

import argparse
import io
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

from tests.support.paths import KITTEN_JPG, SQUEEZENET_DIR  # noqa: E402


def _env(work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MMSCTL_")}
    env.update(
        MMSCTL_CACHE_DIR=str(work / "cache"),
        MMSCTL_CONFIG_DIR=str(work / "config"),
        MMSCTL_STATE_DIR=str(work / "state"),
        MMSCTL_ZOO_URL=str(work / "mirror"),  # a mirror folder: no network
        MMSCTL_OFFLINE="1",
    )
    return env


def _prepare_archive(work: Path) -> Path:
    from mmsctl.archive import create_archive

    mirror = work / "mirror"
    mirror.mkdir(parents=True, exist_ok=True)
    create_archive(SQUEEZENET_DIR, model_name="squeezenet_v1.1", export_path=mirror, force=True)
    return mirror / "squeezenet_v1.1.mar"


def bench_cold(work: Path, runs: int, skip_mms: bool) -> None:
    archive = _prepare_archive(work)
    env = _env(work)
    cmd = [str(REPO / ".venv" / "bin" / "mmsctl"), "predict", "squeezenet", str(KITTEN_JPG), "-o", "json"]
    subprocess.run(cmd, env=env, check=True, capture_output=True)  # fills the cache (extraction)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    ours = statistics.median(times)
    line = f"cold predict squeezenet kitten.jpg: mmsctl {ours:.2f} s (median of {runs}, target <= 1.5 s)"
    if skip_mms:
        print(line)
        return
    from tests.support.mms import mms_skip_reason, running_mms, wait_for_prediction

    reason = mms_skip_reason()
    if reason:
        print(line + f"; MMS skipped: {reason}")
        return
    store = work / "store"
    store.mkdir(exist_ok=True)
    shutil.copy(archive, store / "squeezenet.mar")
    body = KITTEN_JPG.read_bytes()
    t0 = time.perf_counter()
    with running_mms(work / "mms", model_store=store, models={"squeezenet": "squeezenet.mar"}) as mms:
        wait_for_prediction(mms, "squeezenet", body, timeout=180)
        theirs = time.perf_counter() - t0
    print(f"{line}; MMS start + first prediction {theirs:.2f} s; ratio mmsctl/MMS {ours / theirs:.2f}")


def _make_images(folder: Path, count: int) -> None:
    """Distinct JPEGs: crops and flips of the kitten, re-encoded (decode work like real photos)."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    base = Image.open(KITTEN_JPG).convert("RGB")
    w, h = base.size
    for i in range(count):
        dx, dy = i % 17, (i * 7) % 13
        img = base.crop((dx, dy, w - (16 - dx), h - (12 - dy)))
        if i % 2:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=85 + i % 10)
        (folder / f"img{i:04d}.jpg").write_bytes(buf.getvalue())


def bench_throughput(work: Path, count: int, batch: int, runs: int) -> None:
    from mmsctl.engine.inputs import expand_inputs
    from mmsctl.engine.mxnet_compat import import_mxnet
    from mmsctl.engine.predict import open_model, predict_local
    from mmsctl.engine.service import load_service

    folder = work / "images"
    _make_images(folder, count)
    sources = expand_inputs([str(folder)])
    service = load_service(open_model(str(SQUEEZENET_DIR)), batch_size=batch)
    list(predict_local(service, sources[:batch], batch_size=batch))  # warm-up (first forward)

    mx = import_mxnet()
    sym, args, aux = mx.model.load_checkpoint(str(SQUEEZENET_DIR / "squeezenet_v1.1"), 0)
    module = mx.mod.Module(sym, data_names=["data_0"], label_names=None, context=mx.cpu())
    module.bind(for_training=False, data_shapes=[("data_0", (batch, 3, 224, 224))])
    module.set_params(args, aux, allow_missing=True, allow_extra=True)
    tensor = mx.nd.random.uniform(0, 255, (batch, 3, 224, 224))
    data = mx.io.DataBatch([tensor])
    module.forward(data, is_train=False)
    module.get_outputs()[0].asnumpy()
    batches = -(-count // batch)

    ours_runs, raw_runs = [], []
    for _ in range(runs):  # interleaved, so both see the same machine load
        t0 = time.perf_counter()
        done = list(predict_local(service, sources, batch_size=batch))
        ours_runs.append(count / (time.perf_counter() - t0))
        assert all(p.ok for p in done), [p.error for p in done if not p.ok][:3]
        t0 = time.perf_counter()
        for _ in range(batches):
            module.forward(data, is_train=False)
            module.get_outputs()[0].asnumpy()
        raw_runs.append(batches * batch / (time.perf_counter() - t0))
    service.close()
    ours, raw = max(ours_runs), max(raw_runs)
    print(
        f"throughput {count} images, batch {batch}: mmsctl {ours:.1f} img/s (decode included), "
        f"raw Module.forward {raw:.1f} img/s; ratio {ours / raw:.1%} (target >= 90 %)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-mms", action="store_true", help="cold start: time mmsctl only")
    parser.add_argument("--only", choices=("cold", "throughput"))
    opts = parser.parse_args()
    if not SQUEEZENET_DIR.exists():
        sys.exit(f"needs ../shared: {SQUEEZENET_DIR} is missing")
    with tempfile.TemporaryDirectory(prefix="mmsctl-bench-") as tmp:
        work = Path(tmp)
        if opts.only in (None, "cold"):
            bench_cold(work, opts.runs, opts.skip_mms)
        if opts.only in (None, "throughput"):
            bench_throughput(work, opts.images, opts.batch_size, opts.runs)


if __name__ == "__main__":
    main()
