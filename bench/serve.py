"""Benchmark: the mmsctl server against real MMS 1.1.11, side by side in one run.

    .venv/bin/python bench/serve.py                 # full run (run it on a quiet machine)
    .venv/bin/python bench/serve.py --duration 2 --clients 100 --skip-squeezenet   # smoke
    .venv/bin/python bench/serve.py --only-squeezenet --runs 3   # the squeezenet scenario, medians
    .venv/bin/python bench/serve.py --only-squeezenet --batch-size 8   # with server-side batching

For each server: start → first prediction, a no-op model with 2 workers under
100/200/500 concurrent keep-alive clients (requests/s, p50/p99 latency, non-200
count), squeezenet (real, from ../shared) at 10 clients, and resident memory of
the front end plus workers. The load generator is an asyncio aiohttp client in
its own process. Prints a table with the mmsctl/MMS ratio and writes JSON to
bench/out/serve.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.mms import build_noop_mar, mms_skip_reason, running_mms  # noqa: E402
from tests.support.mmsctl_server import running_mmsctl_server  # noqa: E402
from tests.support.paths import KITTEN_JPG, SQUEEZENET_DIR  # noqa: E402


async def _load(url: str, body: bytes, clients: int, duration: float) -> dict[str, Any]:
    import aiohttp

    latencies: list[float] = []
    errors = 0
    stop_at = time.monotonic() + duration
    connector = aiohttp.TCPConnector(limit=clients)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def client() -> None:
            nonlocal errors
            while time.monotonic() < stop_at:
                t0 = time.monotonic()
                try:
                    async with session.post(url, data=body) as resp:
                        await resp.read()
                        if resp.status != 200:
                            errors += 1
                except aiohttp.ClientError:
                    errors += 1
                latencies.append(time.monotonic() - t0)

        started = time.monotonic()
        await asyncio.gather(*(client() for _ in range(clients)))
        elapsed = time.monotonic() - started
    latencies.sort()
    n = len(latencies)
    return {
        "clients": clients, "requests": n, "errors": errors, "rps": n / elapsed if elapsed else 0.0,
        "p50_ms": 1000 * latencies[n // 2] if n else None,
        "p99_ms": 1000 * latencies[min(n - 1, int(n * 0.99))] if n else None,
    }


def _memory(pid: int) -> int:
    import psutil

    try:
        proc = psutil.Process(pid)
        procs = [proc] + proc.children(recursive=True)
        return sum(p.memory_info().rss for p in procs if p.is_running())
    except psutil.Error:
        return 0


def _first_prediction(url: str, body: bytes, timeout: float = 180) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.post(url, content=body, timeout=30).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"no prediction from {url}")


def _register(management: str, url: str, name: str, workers: int, batch_size: int = 1,
              max_batch_delay: int = 100) -> None:
    import httpx

    params = {"url": url, "model_name": name, "initial_workers": str(workers)}
    if batch_size > 1:
        params.update(batch_size=str(batch_size), max_batch_delay=str(max_batch_delay))
    resp = httpx.post(f"{management}/models", params=params, timeout=300)
    if resp.status_code != 200:
        raise RuntimeError(f"register {name}: {resp.status_code} {resp.text}")


def _run_server(label: str, start: Callable[[], Any], store: Path, args: argparse.Namespace,
                squeezenet: Optional[str]) -> dict[str, Any]:
    result: dict[str, Any] = {"server": label}
    t0 = time.monotonic()
    with start() as srv:
        if not args.only_squeezenet:
            _register(srv.management_url, "noop.mar", "noop", 2)
            _first_prediction(f"{srv.inference_url}/predictions/noop", b"x")
            result["start_to_first_prediction_s"] = time.monotonic() - t0
            url = f"{srv.inference_url}/predictions/noop"
            asyncio.run(_load(url, b"warm", 10, 0.5))
            result["noop"] = [asyncio.run(_load(url, b"hello", c, args.duration)) for c in args.clients]
            result["memory_noop_2_workers_mb"] = _memory(srv.pid) / 2**20
        if squeezenet:
            _register(srv.management_url, squeezenet, "squeezenet", 2, args.batch_size)
            image = KITTEN_JPG.read_bytes()
            surl = f"{srv.inference_url}/predictions/squeezenet"
            _first_prediction(surl, image)
            asyncio.run(_load(surl, image, 10, 2.0))  # warm-up: every worker, every batch shape
            result["squeezenet"] = asyncio.run(_load(surl, image, 10, args.duration))
            result["memory_with_squeezenet_mb"] = _memory(srv.pid) / 2**20
    return result


def _ratio(a: Optional[float], b: Optional[float]) -> str:
    return f"{a / b:.2f}x" if a and b else "-"


def _squeezenet_runs(args: argparse.Namespace) -> int:
    """Only the squeezenet scenario, mmsctl and MMS alternately *runs* times; medians and load."""
    if not SQUEEZENET_DIR.exists():
        print(f"needs ../shared: {SQUEEZENET_DIR} is missing")
        return 1
    from mmsctl.archive import create_archive

    work = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    store = work / "store"
    store.mkdir(parents=True)
    create_archive(SQUEEZENET_DIR, model_name="squeezenet", export_path=store, force=True)
    reason = None if not args.skip_mms else "--skip-mms"
    reason = reason or mms_skip_reason()
    rps: dict[str, list[float]] = {"mmsctl": [], "mms": []}
    p50: dict[str, list[float]] = {"mmsctl": [], "mms": []}
    loads = []
    for i in range(args.runs):
        loads.append(os.getloadavg()[0])
        r = _run_server("mmsctl", lambda: running_mmsctl_server(work / f"ours{i}", model_store=store),
                        store, args, "squeezenet.mar")["squeezenet"]
        rps["mmsctl"].append(r["rps"])
        p50["mmsctl"].append(r["p50_ms"])
        if not reason:
            r = _run_server("mms", lambda: running_mms(work / f"mms{i}", model_store=store),
                            store, args, "squeezenet.mar")["squeezenet"]
            rps["mms"].append(r["rps"])
            p50["mms"].append(r["p50_ms"])
    print(f"squeezenet, 2 workers, batch_size {args.batch_size}, 10 clients, {args.duration:g} s per run, "
          f"median of {args.runs} (1-min load average at the runs: {', '.join(f'{x:.2f}' for x in loads)})")
    if reason:
        print(f"MMS skipped: {reason}")
    for name in ("mmsctl", "mms"):
        if rps[name]:
            print(f"  {name:7} {statistics.median(rps[name]):7.1f} req/s  p50 {statistics.median(p50[name]):6.1f} ms"
                  f"  (runs: {', '.join(f'{x:.1f}' for x in rps[name])})")
    if rps["mms"]:
        print(f"  ratio mmsctl/MMS {statistics.median(rps['mmsctl']) / statistics.median(rps['mms']):.2f}x req/s")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per load level")
    parser.add_argument("--clients", type=int, nargs="+", default=[100, 200, 500])
    parser.add_argument("--skip-squeezenet", action="store_true")
    parser.add_argument("--skip-mms", action="store_true")
    parser.add_argument("--only-squeezenet", action="store_true", help="only the squeezenet scenario")
    parser.add_argument("--batch-size", type=int, default=1, help="squeezenet's batch_size on both servers")
    parser.add_argument("--runs", type=int, default=1,
                        help="squeezenet: repeat mmsctl/MMS alternately, report medians")
    args = parser.parse_args()
    if args.only_squeezenet:
        return _squeezenet_runs(args)

    work = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    store = work / "store"
    build_noop_mar(store, "noop")  # MMS's own model-archiver, so both servers load the same file
    squeezenet = None
    if not args.skip_squeezenet and SQUEEZENET_DIR.exists():
        from mmsctl.archive import create_archive

        create_archive(SQUEEZENET_DIR, model_name="squeezenet", export_path=store, force=True)
        squeezenet = "squeezenet.mar"

    results = [_run_server("mmsctl", lambda: running_mmsctl_server(work / "ours", model_store=store),
                           store, args, squeezenet)]
    reason = mms_skip_reason()
    if not args.skip_mms and not reason:
        results.append(_run_server("mms-1.1.11", lambda: running_mms(work / "mms", model_store=store),
                                   store, args, squeezenet))
    elif reason:
        print(f"MMS skipped: {reason}")

    ours = results[0]
    ref = results[1] if len(results) > 1 else {}
    print(f"{'metric':42} {'mmsctl':>12} {'mms':>12} {'ratio':>8}")

    def row(name: str, a: Optional[float], b: Optional[float], fmt: str = "{:.1f}") -> None:
        print(f"{name:42} {fmt.format(a) if a is not None else '-':>12} "
              f"{fmt.format(b) if b is not None else '-':>12} {_ratio(a, b):>8}")

    row("start -> first prediction (s)", ours.get("start_to_first_prediction_s"),
        ref.get("start_to_first_prediction_s"), "{:.2f}")
    for i, level in enumerate(ours["noop"]):
        other = ref.get("noop", [{}] * len(ours["noop"]))[i]
        c = level["clients"]
        row(f"noop {c} clients: req/s", level["rps"], other.get("rps"))
        row(f"noop {c} clients: p50 ms", level["p50_ms"], other.get("p50_ms"))
        row(f"noop {c} clients: p99 ms", level["p99_ms"], other.get("p99_ms"))
        row(f"noop {c} clients: non-200", level["errors"], other.get("errors"), "{:.0f}")
    if "squeezenet" in ours:
        s, o = ours["squeezenet"], ref.get("squeezenet", {})
        row("squeezenet 10 clients: req/s", s["rps"], o.get("rps"))
        row("squeezenet 10 clients: p50 ms", s["p50_ms"], o.get("p50_ms"))
        row("squeezenet 10 clients: non-200", s["errors"], o.get("errors"), "{:.0f}")
    row("memory, noop x2 workers (MB)", ours.get("memory_noop_2_workers_mb"), ref.get("memory_noop_2_workers_mb"))
    row("memory, + squeezenet x2 (MB)", ours.get("memory_with_squeezenet_mb"), ref.get("memory_with_squeezenet_mb"))
    out = REPO / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "serve.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
