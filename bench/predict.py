"""Benchmarks of `mmsctl predict` against their references (run by hand; not collected by pytest).

1. Cold start: `mmsctl predict squeezenet kitten.jpg` as a fresh process with the archive
   already cached, against real MMS 1.1.11 started from .venv-mms until its first
   successful prediction of the same archive. Target: mmsctl <= 1.5 s.
2. Throughput: a folder of N images (default 300) through the whole command,
   `mmsctl predict squeezenet DIR -o jsonl > /dev/null` (wall time of the process: start-up,
   model load, reading, decoding, forward passes, JSON), against the engine's ceiling on this
   machine measured in the same run: one process per core, one OpenMP thread each, raw
   `Module.forward` at batch 1 on a ready tensor (start-up, import, bind and warm-up not
   counted), with MKL-DNN on and off; the faster is the ceiling. Target: >= 0.9x. Also checks
   that the pool's top-1 classes equal those of `--workers 1`.
   With --in-process, also the pipeline inside one Python process (no start-up).
3. Server start: `mmsctl serve start --models squeezenet` on an empty cache folder (no kernel choice
   remembered) until it says ready; the kernels are measured in the background after. Target <= 2 s.
4. Warm predict: with a local `mmsctl serve` of the same archive running (one worker per core), a repeated
   one-image `predict -o json` (the whole command, a fresh process each time: the lean path of
   mmsctl/cli/lean.py; median of 10 per round, target <= 150 ms) against the same command with `--local`,
   and the N-image command against the same ceiling (target >= 0.9x).

    .venv/bin/python bench/predict.py                 # both, N=300
    .venv/bin/python bench/predict.py --images 100 --skip-mms --runs 1   # a quick smoke run

Prints one line per measurement: mmsctl, reference, ratio (medians over --runs, the
variants interleaved so they see the same machine load), plus the load average. Uses
../shared (the real SqueezeNet and kitten); everything it makes goes to a temp folder.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.paths import KITTEN_JPG, SQUEEZENET_DIR  # noqa: E402

from _forward import forward  # noqa: E402 - bench/ is this script's folder


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


def _load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


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
    line = (f"cold predict squeezenet kitten.jpg: mmsctl {ours:.2f} s (median of {runs}, "
            f"min {min(times):.2f}, max {max(times):.2f}; target <= 1.5 s; {_load()})")
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
    print(f"{line}\n  MMS start + first prediction {theirs:.2f} s; ratio mmsctl/MMS {ours / theirs:.2f}")


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_env(work: Path) -> dict[str, str]:
    """The bench environment, with Python's compiled modules kept (in the work folder) as an installed
    mmsctl has them: under PYTHONDONTWRITEBYTECODE every process of a start (CLI, server, worker) would
    compile mmsctl's modules from source again. One untimed start with a cache folder of its own fills
    them (mmsctl's cache folder of the timed runs starts empty)."""
    env = {k: v for k, v in _env(work).items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    warm = {**env, "MMSCTL_CACHE_DIR": str(work / "warm-cache")}
    mmsctl = str(REPO / ".venv" / "bin" / "mmsctl")
    subprocess.run([mmsctl, "serve", "start", "--models", "squeezenet", "--name", "bench-start-warm",
                    "--port", str(_start_port())], env=warm, check=True, capture_output=True)
    subprocess.run([mmsctl, "serve", "stop", "--name", "bench-start-warm"], env=warm, capture_output=True)
    shutil.rmtree(work / "warm-cache", ignore_errors=True)
    return env


def _start_port() -> int:
    """N with N, N+1 and N+2 free on 127.0.0.1 (``serve start --port N`` takes all three)."""
    import socket

    while True:  # bounded in practice: most ports are free
        port = _free_port()
        try:
            for offset in (1, 2):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port + offset))
            return port
        except OSError:
            continue


def _mms_start_seconds(work: Path) -> Optional[float]:
    """Real MMS 1.1.11 from .venv-mms started with the same archive until its first successful prediction
    (its describe says READY before a worker can serve); None where it cannot run here."""
    from tests.support.mms import mms_skip_reason, running_mms, wait_for_prediction

    reason = mms_skip_reason()
    if reason:
        print(f"  MMS skipped: {reason}")
        return None
    store = work / "store-start"
    store.mkdir(exist_ok=True)
    shutil.copy(work / "mirror" / "squeezenet_v1.1.mar", store / "squeezenet.mar")
    t0 = time.perf_counter()
    with running_mms(work / "mms-start", model_store=store, models={"squeezenet": "squeezenet.mar"}) as mms:
        wait_for_prediction(mms, "squeezenet", KITTEN_JPG.read_bytes(), timeout=180)
        return time.perf_counter() - t0


def bench_serve_start(work: Path, runs: int, skip_mms: bool = False) -> None:
    """``serve start --models squeezenet`` until ready (its workers can answer), then stop: first on an empty
    cache folder (the archive copied and extracted), then with that cache
    kept but no kernel choice (measured in the background each time). MMS's start, once, in the same run."""
    if not (work / "mirror" / "squeezenet_v1.1.mar").exists():
        _prepare_archive(work)
    mmsctl = str(REPO / ".venv" / "bin" / "mmsctl")
    env = _start_env(work)
    env["MMSCTL_CACHE_DIR"] = str(work / "start-cache")
    env["MMSCTL_MKLDNN"] = "auto"
    shutil.rmtree(work / "start-cache", ignore_errors=True)
    times: list[float] = []
    notes: list[str] = []
    mms: Optional[float] = None
    for run in range(runs):
        shutil.rmtree(work / "start-cache" / "kernels", ignore_errors=True)
        cmd = [mmsctl, "serve", "start", "--models", "squeezenet", "--name", f"bench-start-{run}",
               "--port", str(_start_port())]
        t0 = time.perf_counter()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        subprocess.run([mmsctl, "serve", "stop", "--name", f"bench-start-{run}"], env=env, capture_output=True)
        if done.returncode != 0:
            sys.exit(f"serve start failed: {done.stderr.strip()}")
        notes = [line.strip() for line in (done.stdout + done.stderr).splitlines() if "background" in line]
        if run == 0 and not skip_mms:
            mms = _mms_start_seconds(work)
    print(f"serve start --models squeezenet, empty cache (archive copied and extracted): "
          f"READY in {times[0]:.2f} s; {times[0] / 2.0:.2f}x the 2 s target; {_load()}")
    if len(times) > 1:
        kept = statistics.median(times[1:])
        print(f"  cache kept, no kernel choice remembered: {kept:.2f} s (median of {len(times) - 1}, "
              f"max {max(times[1:]):.2f}); {kept / 2.0:.2f}x the target")
    if mms is not None:
        print(f"  MMS 1.1.11 start until its first prediction: {mms:.2f} s; ratio mmsctl (empty cache)/MMS "
              f"{times[0] / mms:.2f}")
    for note in notes:
        print(f"  it said: {note}")


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


def ceiling(count: int, mkldnn: bool, processes: Optional[int] = None) -> float:
    """The engine's ceiling in img/s: one process per core, one OpenMP thread each, raw forward at
    batch 1 on a ready tensor, all started together (import, bind and warm-up not counted)."""
    from mmsctl.predict.pool import cpu_count

    n = processes or cpu_count()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "MKL_", "MXNET_MKLDNN"))}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", MXNET_MKLDNN_ENABLED="1" if mkldnn else "0",
               MXNET_STORAGE_FALLBACK_LOG_VERBOSE="0", MXNET_SUBGRAPH_VERBOSE="0")
    return forward(SQUEEZENET_DIR, env, copies=n, passes=-(-count // n)).rate


def _command_seconds(env: dict[str, str], folder: Path, batch: Optional[int], workers: Optional[int],
                     out: Optional[Path] = None, *extra: str) -> float:
    cmd = [str(REPO / ".venv" / "bin" / "mmsctl"), "predict", "squeezenet", str(folder), "-o", "jsonl", *extra]
    if batch is not None:
        cmd += ["--batch-size", str(batch)]
    if workers is not None:
        cmd += ["--workers", str(workers)]
    t0 = time.perf_counter()
    with open(out or os.devnull, "wb") as sink:
        subprocess.run(cmd, env=env, check=True, stdout=sink, stderr=subprocess.PIPE)
    return time.perf_counter() - t0


def _import_seconds(env: dict[str, str]) -> float:
    """A fresh Python process that imports mxnet as mmsctl's workers do, and exits."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import os\nfrom mmsctl.engine import mxnet_compat as c\n"
                    "c.leave_out_operator_docs(); c.import_mxnet(); os._exit(0)"],
                   env=env, check=True, capture_output=True, timeout=120)
    return time.perf_counter() - t0


#: One-image warm runs per --runs round (their median is printed).
_ONE_REPEATS = 10


def _top1(path: Path) -> list[str]:
    return [json.loads(line)["result"][0]["class"] for line in path.read_text().splitlines()]


def _compiled(env: dict[str, str], work: Path) -> dict[str, str]:
    """Python's compiled modules kept, as an installed mmsctl has them, where a shell sets
    PYTHONDONTWRITEBYTECODE: compiling mmsctl's modules again on every run costs a short command
    (the warm one-image predict) tens of milliseconds. In the work folder, not the repository."""
    env = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    return env


def bench_throughput(work: Path, count: int, batch: Optional[int], runs: int, in_process: bool) -> None:
    """The whole command against the engine's ceiling (both kernel sets), interleaved, medians over *runs*."""
    if not (work / "mirror" / "squeezenet_v1.1.mar").exists():
        _prepare_archive(work)
    env = _compiled(_env(work), work)
    folder = work / "images"
    _make_images(folder, count)
    # One kernel set for every run below, the faster here: the warm path sends to a server only where its
    # workers run the set this process would choose, and two measurements (one per thread count) can
    # disagree on a loaded machine.
    on, off = ceiling(count, True), ceiling(count, False)
    env["MMSCTL_MKLDNN"] = "1" if on >= off else "0"
    print(f"kernels for every run: {'MKL-DNN' if on >= off else 'MXNet own (MKL-DNN off)'} "
          f"(raw forward {on:.1f} vs {off:.1f} img/s with MKL-DNN on vs off)")
    # Extraction into the cache and the kernel choice (measured once per
    # thread count: the pool's workers run one thread each, one process runs as many as cores).
    _command_seconds(env, folder, batch, None, work / "pool.jsonl")
    _command_seconds(env, folder, batch, 1, work / "first.jsonl")
    from mmsctl.predict.pool import cpu_count

    # Where the time goes: the same command (same pool) on a tenth of the images gives the rate once
    # running, and so the fixed part (start-up, load, first forward, exit); and the least any process
    # that predicts pays: Python starting and importing mxnet, as a worker does.
    few = work / "few"
    few.mkdir(exist_ok=True)
    some = max(count // 10, 1)
    for image in sorted(folder.iterdir())[:some]:
        shutil.copy(image, few / image.name)
    times: dict[str, list[float]] = {"ceiling MKL-DNN": [], "ceiling no MKL-DNN": [], "mmsctl": [], "few": [],
                                     "import": [], "warm": [], "warm one": [], "cold one": []}
    loads = []
    mmsctl = str(REPO / ".venv" / "bin" / "mmsctl")
    # The warm path: a local server that serves the same archive (one worker per core) answers `predict`.
    subprocess.run([mmsctl, "serve", "start", "--models", "squeezenet", "--name", "bench-warm", "--workers",
                    str(cpu_count()), "--port", str(_free_port()), "--model-store", str(work / "mirror")],
                   env=env, check=True, capture_output=True)
    one = [mmsctl, "predict", "squeezenet", str(KITTEN_JPG), "-o", "json"]
    try:
        deadline, said = time.monotonic() + 180, ""
        while time.monotonic() < deadline:  # its workers replaced once its background kernel measurement is done;
            # the first run that finds the server remembers what MODEL came to, the next takes the lean path
            said = subprocess.run(one + ["-v"], env=env, check=True, capture_output=True, text=True).stderr.strip()
            if "(lean path)" in said:
                break
            time.sleep(2)
        print(f"warm path check: {said.splitlines()[-1] if said else '?'}")
        _command_seconds(env, folder, batch, None, work / "warm.jsonl")
        for _ in range(runs):
            loads.append(os.getloadavg()[0])
            times["ceiling MKL-DNN"].append(count / ceiling(count, True))
            times["ceiling no MKL-DNN"].append(count / ceiling(count, False))
            times["mmsctl"].append(_command_seconds(env, folder, batch, None, work / "pool.jsonl", "--local"))
            times["few"].append(_command_seconds(env, few, batch, cpu_count(), None, "--local"))
            times["import"].append(_import_seconds(env))
            times["warm"].append(_command_seconds(env, folder, batch, None, work / "warm.jsonl"))
            for _ in range(_ONE_REPEATS):  # the whole command each time, a fresh process, as a user runs it
                t0 = time.perf_counter()
                subprocess.run(one, env=env, check=True, capture_output=True)
                times["warm one"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            subprocess.run(one + ["--local"], env=env, check=True, capture_output=True)
            times["cold one"].append(time.perf_counter() - t0)
        said = subprocess.run(one + ["-v"], env=env, check=True, capture_output=True, text=True).stderr.strip()
        print(f"warm path after the runs: {said.splitlines()[-1] if said else '?'}")  # the server stayed a match
        _batched_warm(env, folder, batch, runs, times, work)
    finally:
        subprocess.run([mmsctl, "serve", "stop", "--name", "bench-warm"], env=env, capture_output=True)
    same = _top1(work / "first.jsonl") == _top1(work / "pool.jsonl")
    warm_same = (work / "warm.jsonl").read_bytes() == (work / "pool.jsonl").read_bytes()
    best = min(statistics.median(times["ceiling MKL-DNN"]), statistics.median(times["ceiling no MKL-DNN"]))

    print(f"throughput, {count} images (median of {runs}; 1-min load average at the runs "
          f"{', '.join(f'{x:.2f}' for x in loads)}; {cpu_count()} cores):")
    for label in ("ceiling MKL-DNN", "ceiling no MKL-DNN"):
        t = statistics.median(times[label])
        print(f"  {label + ' (cores x raw forward, batch 1, 1 thread)':58} {count / t:6.1f} img/s")
    ours = statistics.median(times["mmsctl"])
    print(f"  {'mmsctl predict DIR -o jsonl (whole command)':58} {count / ours:6.1f} img/s; "
          f"ratio {best / ours:.2f}x the faster ceiling (target >= 0.9x); top-1 same as --workers 1: {same}")
    warm, warm_one = statistics.median(times["warm"]), statistics.median(times["warm one"])
    print(f"  {'warm: the same command, a local server serves it':58} {count / warm:6.1f} img/s; "
          f"ratio {best / warm:.2f}x the faster ceiling (target >= 0.9x); output same as in-process: {warm_same}")
    if times.get("warm batched"):
        b_best = min(statistics.median(times["b ceiling MKL-DNN"]), statistics.median(times["b ceiling no MKL-DNN"]))
        b_warm = statistics.median(times["warm batched"])
        print(f"  {f'warm, the model registered with batch size {WARM_BATCH}':58} {count / b_warm:6.1f} img/s; "
              f"ratio {b_best / b_warm:.2f}x the faster batch-1 ceiling of the same rounds (target >= 0.9x); "
              f"output same as in-process: {(work / 'warm-b.jsonl').read_bytes() == (work / 'pool.jsonl').read_bytes()}")
    cold_one = statistics.median(times["cold one"])
    print(f"  warm: repeated one-image predict (-o json) {warm_one * 1000:.0f} ms (median of {len(times['warm one'])}, "
          f"min {min(times['warm one']) * 1000:.0f}; target <= 150 ms) vs in-process (--local) "
          f"{cold_one * 1000:.0f} ms: ratio {warm_one / cold_one:.2f}")
    partial, imported = statistics.median(times["few"]), statistics.median(times["import"])
    rate = (count - some) / max(ours - partial, 1e-9)
    print(f"  where the time goes: once running, {rate:.1f} img/s = {rate * best / count:.2f}x the ceiling "
          f"(from the same command on {some} images: {partial:.2f} s); fixed part (start-up, load, first "
          f"forward, exit) {ours - count / rate:.2f} s of the {ours:.2f} s")
    print(f"  a whole-command 0.9x would leave {best / 0.9 - best:.2f} s for everything but the forward passes; "
          f"a Python process that only imports mxnet takes {imported:.2f} s here")
    if in_process:
        _bench_in_process(folder, count, batch or 16, runs)


#: The batch size the warm server's model is registered with for the batched warm runs (the engine's
#: per-image cost at batch 4 is below batch 1's where MKL-DNN runs: bench/kernels.py).
WARM_BATCH = 4


def _batched_warm(env: dict[str, str], folder: Path, batch: Optional[int], runs: int,
                  times: dict[str, list[float]], work: Path) -> None:
    """The warm server's model registered again with batch size :data:`WARM_BATCH` (as a user tunes a
    server for throughput: ``models register --batch-size``), the N-image command sent to it, and the
    ceilings in the same rounds."""
    mmsctl = str(REPO / ".venv" / "bin" / "mmsctl")
    from mmsctl.predict.pool import cpu_count

    ctx = ["--context", "local:bench-warm"]
    subprocess.run([mmsctl, "models", "unregister", "squeezenet", *ctx], env=env, check=True, capture_output=True)
    subprocess.run([mmsctl, "models", "register", "squeezenet_v1.1.mar", "--model-name", "squeezenet",
                    "--batch-size", str(WARM_BATCH), "--max-batch-delay", "5", "--initial-workers", str(cpu_count()),
                    *ctx], env=env, check=True, capture_output=True)
    said = subprocess.run([mmsctl, "predict", "squeezenet", str(KITTEN_JPG), "-v"], env=env, check=True,
                          capture_output=True, text=True).stderr.strip()
    print(f"batched warm path check: {said.splitlines()[-1] if said else '?'}")
    _command_seconds(env, folder, batch, None, work / "warm-b.jsonl")
    for key in ("b ceiling MKL-DNN", "b ceiling no MKL-DNN", "warm batched"):
        times.setdefault(key, [])
    count = len(list(folder.iterdir()))
    for _ in range(runs):
        times["b ceiling MKL-DNN"].append(count / ceiling(count, True))
        times["b ceiling no MKL-DNN"].append(count / ceiling(count, False))
        times["warm batched"].append(_command_seconds(env, folder, batch, None, work / "warm-b.jsonl"))


def _bench_in_process(folder: Path, count: int, batch: int, runs: int) -> None:
    """The predict pipeline inside this process (model loaded, no start-up) against raw forward here."""
    from mmsctl.predict.inputs import expand_inputs
    from mmsctl.engine.mxnet_compat import import_mxnet
    from mmsctl.predict import open_model, predict_local
    from mmsctl.engine.service import load_service

    sources = expand_inputs([str(folder)])
    service = load_service(replace(open_model(str(SQUEEZENET_DIR)), batch_size=batch))
    list(predict_local(service, sources[:batch], batch_size=batch))  # warm-up (first forward)
    mx = import_mxnet()
    sym, args, aux = mx.model.load_checkpoint(str(SQUEEZENET_DIR / "squeezenet_v1.1"), 0)
    module = mx.mod.Module(sym, data_names=["data_0"], label_names=None, context=mx.cpu())
    module.bind(for_training=False, data_shapes=[("data_0", (batch, 3, 224, 224))])
    module.set_params(args, aux, allow_missing=True, allow_extra=True)
    data = mx.io.DataBatch([mx.nd.random.uniform(0, 255, (batch, 3, 224, 224))])
    module.forward(data, is_train=False)
    module.get_outputs()[0].asnumpy()
    ours_runs, raw_runs = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        done = list(predict_local(service, sources, batch_size=batch))
        ours_runs.append(count / (time.perf_counter() - t0))
        assert all(p.ok for p in done), [p.error for p in done if not p.ok][:3]
        t0 = time.perf_counter()
        for _ in range(-(-count // batch)):
            module.forward(data, is_train=False)
            module.get_outputs()[0].asnumpy()
        raw_runs.append(count / (time.perf_counter() - t0))
    service.close()
    ours, raw = statistics.median(ours_runs), statistics.median(raw_runs)
    print(f"  in-process pipeline (warm, one process): {ours:.1f} img/s vs raw {raw:.1f} img/s; "
          f"ratio {ours / raw:.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=None, help="throughput: pass --batch-size (default: mmsctl's choice)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-mms", action="store_true", help="cold start: time mmsctl only")
    parser.add_argument("--only", choices=("cold", "throughput", "start"))
    parser.add_argument("--in-process", action="store_true", help="throughput: also the warm in-process pipeline")
    opts = parser.parse_args()
    if not SQUEEZENET_DIR.exists():
        sys.exit(f"needs ../shared: {SQUEEZENET_DIR} is missing")
    with tempfile.TemporaryDirectory(prefix="mmsctl-bench-") as tmp:
        work = Path(tmp)
        if opts.only in (None, "cold"):
            bench_cold(work, opts.runs, opts.skip_mms)
        if opts.only in (None, "start"):
            bench_serve_start(work, opts.runs, opts.skip_mms)
        if opts.only in (None, "throughput"):
            bench_throughput(work, opts.images, opts.batch_size, opts.runs, opts.in_process)


if __name__ == "__main__":
    main()
