"""Benchmark: real models on the mmsctl server and on real MMS 1.1.11, side by side in one run.

    .venv/bin/python bench/models.py                       # squeezenet and resnet-18, 10 s per load, 3 rounds
    .venv/bin/python bench/models.py --models squeezenet --duration 5 --rounds 1   # quicker

For each model (squeezenet v1.1, the real checkpoint from ../shared; resnet-18 with random
weights, built by mmsctl.zoo.untrained) four servers run the same weights, 2 workers each,
one OpenMP thread per worker (OMP_NUM_THREADS=1 for MMS too, as in the issue's figures), each
archive on both servers:

* ``mms/example``, ``mmsctl/example``: MMS's example handler (examples/model_service_template,
  tests/fixtures/mms_examples, packed by MMS's own model-archiver: what MMS's zoo archives use);
* ``mms/builtin``, ``mmsctl/builtin``: an archive from ``mmsctl archive create`` (mmsctl's
  built-in handler, which MMS 1.1 serves too).

Per server: start -> first successful prediction (the kernel choice already measured and
remembered, as on every start but a machine's first), then a 2 s warm-up and 10 clients
(``mmsctl bench``'s load generator, or ``hey`` with --loadgen hey) POSTing the kitten for
--duration seconds (req/s, p99), the workers' and the front
end's resident memory, and the top-1 class. Per handler, its own ceiling in the same run: the
handler loaded by ``load_service`` and called in a loop with the kitten by 2 processes (one
thread each, the kernel set mmsctl chose), no server; and the engine's own ceiling, the raw forward pass at
batch 1 on a ready tensor in 2 processes: no server and no handler can serve more, so it bounds
what switching servers or handlers can gain on this machine. Prints every target's ratio and the
1-min load average beside the figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.engine.helpers import link_checkpoint  # noqa: E402
from tests.support.paths import KITTEN_JPG, SQUEEZENET_DIR  # noqa: E402
from tests.support.waiting import wait_until  # noqa: E402

import _loadgen  # noqa: E402 - bench/ is this script's folder
from _forward import forward  # noqa: E402
from _together import run_together  # noqa: E402

EXAMPLES = REPO / "tests" / "fixtures" / "mms_examples"
EXAMPLE_HANDLER = "mxnet_vision_service:handle"
WORKERS = 2
CLIENTS = 10
#: The load generator: mmsctl bench's (as bench/serve.py; about a third of hey's CPU a request, which
#: leaves both servers more of a 2-core machine) or ``hey`` (--loadgen hey).
LOADGEN = "mmsctl"


@dataclass
class Scenario:
    server: str  # "mms" | "mmsctl"
    handler: str  # "example" | "builtin"
    start_s: float = 0.0
    rps: float = 0.0
    p99_ms: float = 0.0
    non200: int = 0
    worker_mb: float = 0.0
    frontend_mb: float = 0.0
    top1: str = ""
    load: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.server}/{self.handler}"


@dataclass
class ModelRun:
    name: str
    scenarios: list[Scenario] = field(default_factory=list)
    ceilings: dict[str, float] = field(default_factory=dict)
    kernels: str = ""

    def get(self, server: str, handler: str) -> Optional[Scenario]:
        return next((s for s in self.scenarios if s.server == server and s.handler == handler), None)


def _loadavg() -> float:
    return os.getloadavg()[0]


# -- model folders and archives ------------------------------------------------------------------


def _checkpoint(name: str, work: Path) -> Path:
    if name == "squeezenet":
        return SQUEEZENET_DIR
    from mmsctl.zoo.untrained import build_checkpoint

    return build_checkpoint("resnet-18", work / "resnet-18")


def _example_folder(checkpoint: Path, folder: Path) -> Path:
    """The checkpoint plus MMS's unmodified example handler files."""
    link_checkpoint(checkpoint, folder)
    for f in ("model_handler.py", "mxnet_model_service.py", "mxnet_vision_service.py"):
        shutil.copy(EXAMPLES / f, folder / f)
    (folder / "mxnet_utils").mkdir(exist_ok=True)
    for f in (EXAMPLES / "mxnet_utils").glob("*.py"):
        shutil.copy(f, folder / "mxnet_utils" / f.name)
    return folder


def _archives(name: str, checkpoint: Path, example: Path, store: Path) -> dict[str, str]:
    """``{"example": file, "builtin": file}`` in *store*; the same files go to both servers."""
    from mmsctl.archive import create_archive
    from tests.support.mms import ARCHIVER_BIN

    prefix = next(checkpoint.glob("*-symbol.json")).name[: -len("-symbol.json")]
    subprocess.run([str(ARCHIVER_BIN), "--model-name", prefix, "--model-path", str(example),
                    "--handler", EXAMPLE_HANDLER, "--export-path", str(store), "--force"],
                   check=True, capture_output=True, timeout=300)
    (store / f"{prefix}.mar").rename(store / f"{name}-example.mar")
    create_archive(checkpoint, model_name=prefix, export_path=store / "tmp", force=True)
    (store / "tmp" / f"{prefix}.mar").rename(store / f"{name}-builtin.mar")
    return {"example": f"{name}-example.mar", "builtin": f"{name}-builtin.mar"}


# -- measurements ----------------------------------------------------------------------------------


def _load(url: str, body: Path, duration: float) -> tuple[float, float, int]:
    """req/s, p99 ms and failed requests of CLIENTS clients POSTing *body* for *duration* seconds."""
    if LOADGEN == "hey":
        load = _loadgen.hey(url, CLIENTS, duration, body=body, content_type="image/jpeg")
    else:
        env = {k: v for k, v in os.environ.items() if k not in ("MMSCTL_INFERENCE_URL", "MMSCTL_MANAGEMENT_URL")}
        load = _loadgen.mmsctl_bench(url, CLIENTS, duration, body=body, env=env)
    return load.rps, load.p99_ms if load.p99_ms is not None else float("nan"), load.failed


def _memory(pid: int, worker_mark: str) -> tuple[float, float]:
    """MB: mean resident memory of the worker processes, and of the front end (everything else
    under *pid* that is not a launcher script: the JVM for MMS, the server for mmsctl)."""
    import psutil

    root = psutil.Process(pid)
    procs = [root] + root.children(recursive=True)
    workers, front = [], 0
    for p in procs:
        try:
            cmd = " ".join(p.cmdline())
            rss = p.memory_info().rss
            # MMS forks its workers from a small parent that matches the mark too (17 MB): only the
            # processes that serve (no worker below them) are workers.
            serves = not any(worker_mark in " ".join(c.cmdline()) for c in p.children())
        except psutil.Error:
            continue
        if worker_mark in cmd and serves:
            workers.append(rss)
        elif "java" in cmd or "mmsctl.server" in cmd:
            front += rss
    return (statistics.mean(workers) / 2**20 if workers else 0.0), front / 2**20


def _first_prediction(url: str, body: bytes, timeout: float = 300) -> str:
    """Poll until *url* answers 200; the top-1 class of that answer."""
    import httpx

    def answer() -> str | None:
        try:
            resp = httpx.post(url, content=body, timeout=60, headers={"content-type": "image/jpeg"})
            if resp.status_code == 200:
                answer = resp.json()
                return str(answer[0]["class"]) if isinstance(answer, list) else str(answer)
        except Exception:  # noqa: BLE001 - not up yet
            pass
        return None

    try:
        return wait_until(answer, timeout=timeout, what=f"a prediction from {url}", interval=0.05)
    except TimeoutError:
        raise RuntimeError(f"no prediction from {url} in {timeout:g} s") from None


def _run_server(scenario: Scenario, start: Callable[[], AbstractContextManager[Any]], model: str,
                duration: float) -> Scenario:
    body = KITTEN_JPG.read_bytes()
    scenario.load = _loadavg()
    t0 = time.monotonic()
    with start() as srv:
        url = f"{srv.inference_url}/predictions/{model}"
        scenario.top1 = _first_prediction(url, body)
        scenario.start_s = time.monotonic() - t0
        _load(url, KITTEN_JPG, 2.0)  # warm-up: every worker
        scenario.rps, scenario.p99_ms, scenario.non200 = _load(url, KITTEN_JPG, duration)
        mark = "model_service_worker" if scenario.server == "mms" else "mmsctl.engine.worker"
        scenario.worker_mb, scenario.frontend_mb = _memory(srv.pid, mark)
    return scenario


CEILING = """
import json, os, sys, time
from pathlib import Path
from mmsctl.engine.protocol import RequestItem
from mmsctl.engine.service import load_service
from mmsctl.engine.spec import ServiceSpec
root, handler, image, duration, name = sys.argv[1], sys.argv[2] or None, sys.argv[3], float(sys.argv[4]), sys.argv[5]
manifest = {"model": {"modelName": name, "handler": handler}}  # as the archive's (MMS's handler reads it)
service = load_service(ServiceSpec(Path(root), name, handler, manifest=manifest, batch_size=1))
body = Path(image).read_bytes()
for _ in range(5):
    assert service.handle([RequestItem.from_body("w", body)])[0].status == 200
print("ready", flush=True)
sys.stdin.readline()
n, t0 = 0, time.time()
while time.time() - t0 < duration:
    service.handle([RequestItem.from_body("r", body)])
    n += 1
print(json.dumps([n, t0, time.time()]), flush=True)
"""


def forward_ceiling(checkpoint: Path, duration: float) -> float:
    """Forward passes a second: WORKERS processes running the raw forward at batch 1 in a loop (the
    kernel set mmsctl chose, one thread each): what no server or handler can exceed here."""
    from mmsctl.engine.spec import ServiceSpec
    from mmsctl.engine.worker.spawn import worker_env

    env = worker_env(1, spec=ServiceSpec(checkpoint, "m", None))
    return forward(checkpoint, env, copies=WORKERS, seconds=duration).rate


def handler_ceiling(root: Path, handler: Optional[str], duration: float) -> float:
    """req/s of the handler alone: WORKERS processes calling it in a loop (worker environment)."""
    from mmsctl.engine.spec import ServiceSpec
    from mmsctl.engine.worker.spawn import worker_env

    env = worker_env(1, spec=ServiceSpec(root, "m", handler))
    name = next(root.glob("*-symbol.json")).name[: -len("-symbol.json")]
    spans = run_together([sys.executable, "-c", CEILING, str(root), handler or "", str(KITTEN_JPG), str(duration),
                          name], env, WORKERS, timeout=120)
    return sum(n for n, _, _ in spans) / (max(e for _, _, e in spans) - min(s for _, s, _ in spans))


# -- the run -------------------------------------------------------------------------------------


def _median_scenario(runs: list[Scenario]) -> Scenario:
    """One scenario from its rounds: the median of each figure (the top-1 of the first)."""
    med = statistics.median
    first = runs[0]
    return Scenario(first.server, first.handler, start_s=med(r.start_s for r in runs), rps=med(r.rps for r in runs),
                    p99_ms=med(r.p99_ms for r in runs), non200=sum(r.non200 for r in runs),
                    worker_mb=med(r.worker_mb for r in runs), frontend_mb=med(r.frontend_mb for r in runs),
                    top1=first.top1, load=med(r.load for r in runs))


def bench_model(name: str, work: Path, duration: float, skip_mms: bool, rounds: int) -> ModelRun:
    """Every ceiling and server of *name*, *rounds* times in a rotating order (so each sees the machine
    early and late alike); the medians."""
    from mmsctl.engine.kernels import choose_kernels
    from tests.support.mms import running_mms
    from tests.support.mmsctl_server import running_mmsctl_server

    run = ModelRun(name)
    checkpoint = _checkpoint(name, work)
    example = _example_folder(checkpoint, work / f"{name}-example-src")
    store = work / f"{name}-store"
    store.mkdir()
    archives = _archives(name, checkpoint, example, store)
    # Measured once here, remembered for the servers: per handler (the built-in one runs the network as
    # mmsctl.engine.graph rewrites it, MMS's example binds it as saved: each has its own choice).
    choice = choose_kernels(checkpoint, threads=1)
    theirs = choose_kernels(example, threads=1, handler=EXAMPLE_HANDLER)
    run.kernels = f"built-in handler {choice.label}: {choice.reason}; example handler {theirs.label}: {theirs.reason}"
    ceilings: dict[str, Callable[[], float]] = {
        "example": lambda: handler_ceiling(example, EXAMPLE_HANDLER, duration),
        "builtin": lambda: handler_ceiling(checkpoint, None, duration),
        "forward": lambda: forward_ceiling(checkpoint, duration),
    }
    plans = [(server, handler) for handler in ("example", "builtin") for server in ("mms", "mmsctl")
             if server == "mmsctl" or not skip_mms]
    tasks: list[tuple[str, str]] = [("ceiling", key) for key in ceilings] + plans
    measured: dict[tuple[str, str], list[Any]] = {task: [] for task in tasks}
    for r in range(rounds):
        for server, handler in tasks[r % len(tasks):] + tasks[:r % len(tasks)]:
            if server == "ceiling":
                measured[(server, handler)].append(ceilings[handler]())
                continue
            models, folder = {name: archives[handler]}, work / f"{name}-{server}-{handler}-{r}"
            if server == "mms":
                def start() -> AbstractContextManager[Any]:
                    return running_mms(folder, model_store=store, models=models, workers=WORKERS)
            else:
                def start() -> AbstractContextManager[Any]:
                    return running_mmsctl_server(folder, model_store=store, models=models, workers=WORKERS)
            measured[(server, handler)].append(_run_server(Scenario(server, handler), start, name, duration))
            print(f"  round {r + 1} {name} {server}/{handler}: {measured[(server, handler)][-1].rps:.1f} req/s",
                  flush=True)
    run.ceilings = {key: statistics.median(measured[("ceiling", key)]) for key in ceilings}
    run.scenarios = [_median_scenario(measured[plan]) for plan in plans]
    return run


def _ratio(a: Optional[float], b: Optional[float]) -> str:
    return f"{a / b:.2f}x" if a and b else "-"


def report(run: ModelRun) -> None:
    print(f"\n{run.name}: 2 workers, 1 thread each, {CLIENTS} clients; kernels: {run.kernels}")
    print(f"  ceilings (2 processes in a loop): example handler {run.ceilings['example']:.1f} req/s, "
          f"built-in handler {run.ceilings['builtin']:.1f} req/s, raw forward {run.ceilings['forward']:.1f}/s")
    print(f"  {'server/handler':16} {'req/s':>7} {'p99 ms':>7} {'non200':>6} {'start s':>7} {'worker MB':>9} "
          f"{'front MB':>8}  top-1  (load)")
    for s in run.scenarios:
        print(f"  {s.label:16} {s.rps:7.1f} {s.p99_ms:7.1f} {s.non200:6d} {s.start_s:7.2f} {s.worker_mb:9.1f} "
              f"{s.frontend_mb:8.1f}  {s.top1[:24]}  ({s.load:.2f})")
    print("  targets (each mmsctl run against MMS with the same archive):")
    for s in run.scenarios:
        if s.server != "mmsctl":
            continue
        mms = run.get("mms", s.handler)
        ceiling = run.ceilings[s.handler]
        print(f"    {s.label}: {_ratio(s.rps, ceiling)} of its handler's ceiling (>= 0.95x)"
              + (f"; {_ratio(s.rps, mms.rps)} MMS's req/s (>= 1x); p99 {_ratio(s.p99_ms, mms.p99_ms)} MMS's "
                 f"(<= 1x); worker memory {_ratio(s.worker_mb, mms.worker_mb)} MMS's (<= 0.9x); "
                 f"start -> first prediction {_ratio(s.start_s, mms.start_s)} MMS's (<= 0.5x); "
                 f"front end {_ratio(s.frontend_mb, mms.frontend_mb)} the JVM (<= 0.5x)" if mms else ""))
    builtin, mms_example = run.get("mmsctl", "builtin"), run.get("mms", "example")
    if mms_example and builtin:
        print(f"    switching (mmsctl/builtin vs mms/example): {_ratio(builtin.rps, mms_example.rps)} throughput "
              f"(squeezenet target >= 2.5x), p99 {_ratio(builtin.p99_ms, mms_example.p99_ms)} (<= 1x), "
              f"same top-1: {builtin.top1 == mms_example.top1}; the most any server or handler could give "
              f"here: {_ratio(run.ceilings['forward'], mms_example.rps)} (raw forward ceiling / MMS)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["squeezenet", "resnet-18"], choices=["squeezenet", "resnet-18"])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of load per server and per ceiling")
    parser.add_argument("--skip-mms", action="store_true")
    parser.add_argument("--rounds", type=int, default=3, help="rounds in a rotating order; medians are reported")
    parser.add_argument("--loadgen", choices=("mmsctl", "hey"), default="mmsctl",
                        help="load generator: mmsctl bench's (default) or hey")
    args = parser.parse_args()
    if not SQUEEZENET_DIR.exists():
        print(f"needs ../shared: {SQUEEZENET_DIR} is missing")
        return 1
    global LOADGEN
    LOADGEN = args.loadgen
    if LOADGEN == "hey" and _loadgen.HEY is None:
        print("needs hey (apt-get install hey), or --loadgen mmsctl")
        return 1
    from tests.support.mms import mms_skip_reason

    reason = None if not args.skip_mms else "--skip-mms"
    reason = reason or mms_skip_reason()
    if reason:
        print(f"MMS skipped: {reason}")
    work = Path(tempfile.mkdtemp(prefix="bench-models-"))
    # A private cache (the kernel choice is measured in this run) and one OpenMP thread for everyone.
    for key in [k for k in os.environ if k.startswith("MMSCTL_") and k != "MMSCTL_SHARED_DIR"]:
        del os.environ[key]
    os.environ.update(MMSCTL_CACHE_DIR=str(work / "cache"), MMSCTL_CONFIG_DIR=str(work / "config"),
                      MMSCTL_STATE_DIR=str(work / "state"), MMSCTL_OFFLINE="1",
                      OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    # Worker processes import mxnet without its operator docs, from their own compiled-code cache:
    # fill it once here, as any earlier server start on the machine would have.
    subprocess.run([sys.executable, "-c", "from mmsctl.engine import mxnet_compat as c; "
                    "c.leave_out_operator_docs(); c.import_mxnet()"], check=True, capture_output=True, timeout=300)
    print(f"bench/models.py: {', '.join(args.models)}; {args.duration:g} s of load each by {LOADGEN}, "
          f"{args.rounds} round(s), medians; "
          f"1-min load average at start {_loadavg():.2f}")
    try:
        for name in args.models:
            report(bench_model(name, work, args.duration, bool(reason), max(1, args.rounds)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n1-min load average at the end {_loadavg():.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
