"""Benchmark: mmsctl serve's front end against real MMS 1.1.11 and a bare echo server, in one run.

    .venv/bin/python bench/serve.py                                   # 100/200/500 clients, 10 s, 3 rounds
    .venv/bin/python bench/serve.py --clients 100 --duration 5 --rounds 1   # quick
    .venv/bin/python bench/serve.py --loadgen hey                     # hey instead of mmsctl bench
    .venv/bin/python bench/serve.py --against main --rounds 6 --duration 5  # this checkout against main's server

The no-op scenario of issue 12: the echo model (one ``.mar`` built by MMS's own
model-archiver, so both servers load the same file) with 2 workers, N keep-alive
clients POSTing a 5-byte body on loopback. Three targets run side by side: mmsctl
(``python -m mmsctl.server``, as ``mmsctl serve start`` runs it), MMS 1.1.11, and
the physical ceiling, bench/echo_server.py (httptools + uvloop, reads the body and
answers "OK", no worker behind it). Each round runs every client level against every
target in turn (the order rotates per round); figures are medians over the rounds.

Per target and level: successful (200) requests/s, p50/p99 latency, non-200 answers
(errors included), and the front end's own CPU per successful request: the utime +
stime (/proc/PID/stat) of the front-end process only (mmsctl's server process, MMS's
Java process, the echo server), not the workers', over the requests of that run. Then
the ratios: mmsctl/MMS and mmsctl/echo for req/s, mmsctl/MMS for p99.

Then the Open Inference Protocol beside the MMS API on the same mmsctl server: the no-op model and
squeezenet (where $MMSCTL_SHARED_DIR has it; the kitten as body) through ``POST /predictions/MODEL`` and
through ``POST /v2/models/MODEL/infer`` (the file as one BYTES element, binary tensor data extension, as
``mmsctl bench`` on a ``--protocol v2`` context sends it), alternating per round; the v2/API req/s ratio
(target >= 0.9x), the median of each round's own ratio (its two runs back to back: steadier on a shared
machine) and the server process's CPU per request on each path. ``--v2-only`` runs just that part,
``--skip-v2`` leaves it out.

``--against REV``: this checkout's server against REV's (a git worktree), alternating per round: the no-op
model through the MMS API and v2, and a 3 MB photo's front-end CPU (bench/_against.py).

``--invocations-only``: SageMaker's ``POST /invocations`` (the model named by ``X-Model-Name``) against
``POST /predictions/MODEL`` on the same server, the same two models and bodies, alternating per round (target:
/invocations no slower; it takes the same lean path); then the front end's own time per request on that path
for each route, in process (bench/_lean_path.py: steady to a tenth of a microsecond, where the end-to-end runs
swing with the load).

Targets (100 clients): req/s >= 3x MMS, p99 <= 0.5x MMS, front-end CPU <= 100 us per
request; at 200 and 500 clients every answer is a 200.

The load generator is mmsctl's own (``mmsctl bench noop``: closed loop, N keep-alive
clients, like ``hey -c N``), or ``hey`` with ``--loadgen hey`` (``apt-get install hey``).
Both share the machine with the servers, and mmsctl's costs a tenth of hey's CPU per
request (bench/loadgen_vs_hey.py), which leaves the servers more of a small machine:
give the generator beside the figures, and the load average. Writes bench/out/serve.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support._proc import any_free_port  # noqa: E402
from tests.support.mms import build_noop_mar, mms_skip_reason, running_mms  # noqa: E402
from tests.support.mmsctl_server import running_mmsctl_server  # noqa: E402
from tests.support.waiting import wait_until  # noqa: E402

import _loadgen  # noqa: E402 - bench/ is this script's folder
from _lean_path import lean_path_us  # noqa: E402

BODY = b"hello"
TARGET_RPS_RATIO = 3.0
TARGET_P99_RATIO = 0.5
TARGET_CPU_US = 100.0
TARGET_V2_RATIO = 0.9


@dataclass
class Target:
    name: str
    url: str
    #: The front-end process whose CPU is counted (None: unknown).
    pid: Optional[int]


def _cpu_seconds(pid: Optional[int]) -> Optional[float]:
    """utime + stime of one process (not its children), from /proc/PID/stat."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _java_pid(launcher: int) -> Optional[int]:
    """MMS's front end: the Java process under its launcher."""
    import psutil

    try:
        for child in psutil.Process(launcher).children(recursive=True):
            if "java" in child.name():
                return child.pid
    except psutil.Error:
        pass
    return None


def _measure(target: Target, clients: int, duration: float, loadgen: str, work: Path,
             payload: bytes = BODY) -> dict[str, Any]:
    body = work / "body.bin"
    body.write_bytes(payload)
    cpu0 = _cpu_seconds(target.pid)
    if loadgen == "hey":
        load = _loadgen.hey(target.url, clients, duration, body=body, content_type="application/octet-stream")
    else:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MMSCTL_")}
        env.update(MMSCTL_CONFIG_DIR=str(work / "config"), MMSCTL_STATE_DIR=str(work / "state"))
        load = _loadgen.mmsctl_bench(target.url, clients, duration, body=body, env=env)
    cpu1 = _cpu_seconds(target.pid)
    result: dict[str, Any] = {"ok": load.ok, "non_200": load.failed, "seconds": load.seconds,
                              "p50_ms": load.p50_ms, "p99_ms": load.p99_ms, "rps": load.rps}
    result["cpu_us"] = 1e6 * (cpu1 - cpu0) / result["ok"] if cpu0 is not None and cpu1 is not None \
        and result["ok"] else None
    result["load"] = os.getloadavg()[0]
    return result


# -- servers ------------------------------------------------------------------------------------
@contextmanager
def _echo(work: Path) -> Iterator[Target]:
    port = any_free_port()
    proc = subprocess.Popen([sys.executable, str(REPO / "bench" / "echo_server.py"), str(port)],
                            stdin=subprocess.DEVNULL)
    try:
        import httpx

        def answers() -> bool:
            try:
                httpx.post(f"http://127.0.0.1:{port}/", content=b"x", timeout=2)
                return True
            except httpx.HTTPError:
                return False

        try:
            wait_until(answers, timeout=30, what="the echo server", interval=0.05,
                       alive=lambda: None if proc.poll() is None else "exited")
        except (TimeoutError, RuntimeError):
            raise RuntimeError("the echo server did not start") from None
        yield Target("echo", f"http://127.0.0.1:{port}/predictions/noop", proc.pid)
    finally:
        proc.terminate()
        proc.wait(10)


def _register(management: str, workers: int, model: str = "noop") -> None:
    import httpx

    resp = httpx.post(f"{management}/models", params={"url": f"{model}.mar", "model_name": model,
                                                       "initial_workers": str(workers), "synchronous": "true"},
                      timeout=300)
    if resp.status_code != 200:
        raise RuntimeError(f"register {model}: {resp.status_code} {resp.text}")


def _warm(target: Target, loadgen: str, work: Path) -> None:
    _measure(target, 10, 1.0, loadgen, work)


# -- the Open Inference Protocol (v2) beside the MMS API, on the same mmsctl server ---------------
def _v2_pairs(srv: Any, store: Path, workers: int) -> list[tuple[str, Target, Target, bytes]]:
    """(model, MMS-API target, v2 target, body): the no-op model, and squeezenet where its files are."""
    from tests.support.paths import KITTEN_JPG, SQUEEZENET_DIR

    pairs = [("noop", BODY)]
    if SQUEEZENET_DIR.is_dir() and KITTEN_JPG.is_file():
        from mmsctl.archive import create_archive

        create_archive(SQUEEZENET_DIR, model_name="squeezenet", export_path=store)
        _register(srv.management_url, workers, "squeezenet")
        pairs.append(("squeezenet", KITTEN_JPG.read_bytes()))
    return [(model, Target(f"{model}-api", f"{srv.inference_url}/predictions/{model}", srv.pid),
             Target(f"{model}-v2", f"{srv.inference_url}/v2/models/{model}/infer", srv.pid), body)
            for model, body in pairs]


def _v2_section(srv: Any, store: Path, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Each model through the MMS API and through v2 (binary), alternating per round; medians and the ratio."""
    pairs = _v2_pairs(srv, store, args.workers)
    runs: dict[str, list[dict[str, Any]]] = {}
    print(f"\nv2 (Open Inference Protocol, binary tensor data) against the MMS API, same server, "
          f"{args.v2_clients} clients, load generator mmsctl")
    for _model, api, v2, body in pairs:
        for target in (api, v2):
            _measure(target, 10, 1.0, "mmsctl", work, body)  # warm
        for round_ in range(args.rounds):
            for target in ((api, v2) if round_ % 2 == 0 else (v2, api)):
                r = _measure(target, args.v2_clients, args.duration, "mmsctl", work, body)
                runs.setdefault(target.name, []).append(r)
                print(f"  round {round_ + 1} {target.name:15} {r['rps']:8.0f} ok/s  p99 {r['p99_ms'] or 0:7.1f} ms  "
                      f"non-200 {r['non_200']:5}  server cpu {r['cpu_us'] or 0:6.1f} us/req  load {r['load']:.2f}",
                      flush=True)
    summary: dict[str, Any] = {}
    for model, api, v2, _body in pairs:
        a, b = (_median(runs[t.name], "rps") for t in (api, v2))
        pa, pb = (_median(runs[t.name], "p99_ms") for t in (api, v2))
        ratio = _ratio(b, a)
        # each round's own ratio (its two runs back to back): steadier than the ratio of medians on a shared machine
        each = [x for x in (_ratio(rv["rps"], ra["rps"]) for ra, rv in zip(runs[api.name], runs[v2.name])) if x]
        cpu = {t.name: _median(runs[t.name], "cpu_us") for t in (api, v2)}
        summary[model] = {"api_rps": a, "v2_rps": b, "api_p99_ms": pa, "v2_p99_ms": pb, "v2_vs_api": ratio,
                          "round_ratios": each, "round_median": statistics.median(each) if each else None,
                          "api_cpu_us": cpu[api.name], "v2_cpu_us": cpu[v2.name],
                          "non_200": sum(r["non_200"] for t in (api, v2) for r in runs[t.name])}
        verdict = "not measured" if ratio is None else "PASS" if ratio >= TARGET_V2_RATIO else "FAIL"
        print(f"  {model:11} MMS API {a or 0:8.0f} ok/s (p99 {pa or 0:.1f} ms)  v2 {b or 0:8.0f} ok/s "
              f"(p99 {pb or 0:.1f} ms)  v2/API {ratio or 0:.2f}x  (target >= {TARGET_V2_RATIO}x: {verdict})")
        if each:
            print(f"  {'':11} per-round v2/API: median {statistics.median(each):.2f}x (min {min(each):.2f}, "
                  f"max {max(each):.2f}); server CPU {cpu[api.name] or 0:.0f} us/req (API), {cpu[v2.name] or 0:.0f} (v2)")
    return {"clients": args.v2_clients, "models": summary, "runs": runs}


# -- SageMaker's /invocations beside /predictions, on the same mmsctl server --------------------------
def _invocation_run(model: str, base: str, clients: int, duration: float, body: bytes, work: Path,
                    pid: Optional[int], invocations: bool) -> dict[str, Any]:
    """One run of POST /predictions/MODEL or POST /invocations (the model named by X-Model-Name: the server
    holds two), the same body and content type, mmsctl's load generator."""
    file = work / "invocation.bin"
    file.write_bytes(body)
    headers = {"Content-Type": "image/jpeg" if body[:2] == b"\xff\xd8" else "application/octet-stream"}
    if invocations:
        headers["X-Model-Name"] = model
    cpu0 = _cpu_seconds(pid)
    load = _loadgen.mmsctl_post(base, "/invocations" if invocations else f"/predictions/{model}", clients, duration,
                                body=file, headers=headers)
    cpu1 = _cpu_seconds(pid)
    cpu = 1e6 * (cpu1 - cpu0) / load.ok if cpu0 is not None and cpu1 is not None and load.ok else None
    return {"ok": load.ok, "non_200": load.failed, "seconds": load.seconds, "p50_ms": load.p50_ms,
            "p99_ms": load.p99_ms, "rps": load.rps, "cpu_us": cpu, "load": os.getloadavg()[0]}


def _invocations_section(srv: Any, store: Path, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Each model through /predictions and /invocations, alternating per round; medians and the ratio."""
    pairs = [(model, body) for model, api, _v2, body in _v2_pairs(srv, store, args.workers)]
    print(f"\nSageMaker's /invocations against /predictions, same server, {args.v2_clients} clients, "
          f"load generator mmsctl")
    summary: dict[str, Any] = {}
    for model, body in pairs:
        runs: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
        for invocations in (False, True):  # warm
            _invocation_run(model, srv.inference_url, 10, 1.0, body, work, srv.pid, invocations)
        for round_ in range(args.rounds):
            for invocations in ((False, True) if round_ % 2 == 0 else (True, False)):
                r = _invocation_run(model, srv.inference_url, args.v2_clients, args.duration, body, work, srv.pid,
                                    invocations)
                runs[invocations].append(r)
                print(f"  round {round_ + 1} {model:11} {'/invocations' if invocations else '/predictions':13} "
                      f"{r['rps']:8.0f} ok/s  p99 {r['p99_ms'] or 0:7.1f} ms  non-200 {r['non_200']:5}  "
                      f"server cpu {r['cpu_us'] or 0:6.1f} us/req  load {r['load']:.2f}", flush=True)
        each = [x for x in (_ratio(i["rps"], p["rps"]) for p, i in zip(runs[False], runs[True])) if x]
        summary[model] = {"predictions_rps": _median(runs[False], "rps"), "invocations_rps": _median(runs[True], "rps"),
                          "predictions_p99_ms": _median(runs[False], "p99_ms"),
                          "invocations_p99_ms": _median(runs[True], "p99_ms"),
                          "predictions_cpu_us": _median(runs[False], "cpu_us"),
                          "invocations_cpu_us": _median(runs[True], "cpu_us"),
                          "round_ratios": each, "round_median": statistics.median(each) if each else None,
                          "non_200": sum(r["non_200"] for v in runs.values() for r in v), "runs": runs}
        m = summary[model]
        print(f"  {model:11} /predictions {m['predictions_rps'] or 0:8.0f} ok/s (p99 {m['predictions_p99_ms'] or 0:.1f} "
              f"ms)  /invocations {m['invocations_rps'] or 0:8.0f} ok/s (p99 {m['invocations_p99_ms'] or 0:.1f} ms)  "
              f"per-round invocations/predictions: median {m['round_median'] or 0:.2f}x")
    lean = lean_path_us()
    print("  the front end's own time per request on the lean path, in process (best of 7 x 50,000):")
    for route, us in lean.items():
        print(f"    {route:34} {us:5.2f} us")
    return {"clients": args.v2_clients, "models": summary, "lean_path_us": lean}


def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a / b if a and b else None


def _median(runs: list[dict[str, Any]], key: str) -> Optional[float]:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per run")
    parser.add_argument("--clients", type=int, nargs="+", default=[100, 200, 500])
    parser.add_argument("--rounds", type=int, default=3, help="runs per target and level (medians)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--loadgen", choices=("hey", "mmsctl"), default="mmsctl",
                        help="load generator (default: mmsctl bench)")
    parser.add_argument("--skip-mms", action="store_true")
    parser.add_argument("--skip-echo", action="store_true")
    parser.add_argument("--v2-clients", type=int, default=100,
                        help="clients for the v2-against-MMS-API runs (no-op and squeezenet)")
    parser.add_argument("--skip-v2", action="store_true", help="leave out the v2 runs")
    parser.add_argument("--v2-only", action="store_true", help="only the v2 runs (no MMS, echo or levels)")
    parser.add_argument("--invocations-only", action="store_true",
                        help="only SageMaker's /invocations against /predictions (no-op and squeezenet)")
    parser.add_argument("--against", metavar="REV",
                        help="only this checkout against REV (a commit or branch, run from a git worktree): no-op "
                             "through the MMS API and v2, and a 3 MB photo, alternating per round")
    parser.add_argument("--photo-clients", type=int, default=10, help="clients for --against's photo runs")
    args = parser.parse_args()
    loadgen = args.loadgen
    if loadgen == "hey" and _loadgen.HEY is None:
        print("hey is not installed (apt-get install hey); use --loadgen mmsctl")
        return 1

    work = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    if args.against:
        from _against import against

        try:
            summary = against(args.against, args, work, _measure, Target, BODY)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        _write({"against": summary}, "serve_against.json")
        return 0
    store = work / "store"
    build_noop_mar(store, "noop")
    reason = "--skip-mms" if args.skip_mms else mms_skip_reason()
    results: dict[str, dict[int, list[dict[str, Any]]]] = {}
    v2: Optional[dict[str, Any]] = None
    with ExitStack() as stack:
        targets: list[Target] = []
        srv = stack.enter_context(running_mmsctl_server(work / "mmsctl", model_store=store))
        _register(srv.management_url, args.workers)
        if args.v2_only:
            v2 = _v2_section(srv, store, work, args)
            _write({"v2": v2}, "serve_v2.json")
            return 0
        if args.invocations_only:
            _write({"invocations": _invocations_section(srv, store, work, args)}, "serve_invocations.json")
            return 0
        targets.append(Target("mmsctl", f"{srv.inference_url}/predictions/noop", srv.pid))
        if not reason:
            mms = stack.enter_context(running_mms(work / "mms", model_store=store))
            _register(mms.management_url, args.workers)
            targets.append(Target("mms", f"{mms.inference_url}/predictions/noop", _java_pid(mms.pid)))
        if not args.skip_echo:
            targets.append(stack.enter_context(_echo(work)))
        for target in targets:
            _warm(target, loadgen, work)
        print(f"no-op model, {args.workers} workers, {args.duration:g} s per run, {args.rounds} round(s), "
              f"load generator {loadgen}, {os.cpu_count()} CPUs shared by servers and load generator")
        if reason:
            print(f"MMS skipped: {reason}")
        for round_ in range(args.rounds):
            for clients in args.clients:
                order = targets[round_ % len(targets):] + targets[:round_ % len(targets)]
                for target in order:
                    r = _measure(target, clients, args.duration, loadgen, work)
                    results.setdefault(target.name, {}).setdefault(clients, []).append(r)
                    print(f"  round {round_ + 1} {clients:4} clients {target.name:7} {r['rps']:8.0f} ok/s  "
                          f"p99 {r['p99_ms'] or 0:7.1f} ms  non-200 {r['non_200']:5}  "
                          f"cpu {r['cpu_us'] or 0:6.1f} us/req  load {r['load']:.2f}", flush=True)
        if not args.skip_v2:
            v2 = _v2_section(srv, store, work, args)
    shutil.rmtree(work, ignore_errors=True)

    print(f"\nmedians ({args.rounds} round(s)); 1-min load average now {os.getloadavg()[0]:.2f}")
    names = list(results)
    print(f"{'clients':>7} {'target':7} {'ok/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'non-200':>8} {'cpu us/req':>11}")
    summary: dict[str, Any] = {"loadgen": loadgen, "duration_s": args.duration, "rounds": args.rounds,
                               "workers": args.workers, "levels": {}}
    for clients in args.clients:
        level: dict[str, Any] = {}
        for name in names:
            runs = results[name][clients]
            m = {key: _median(runs, key) for key in ("rps", "p50_ms", "p99_ms", "cpu_us")}
            m["non_200"] = sum(r["non_200"] for r in runs)
            level[name] = m
            print(f"{clients:7} {name:7} {m['rps'] or 0:9.0f} {m['p50_ms'] or 0:8.1f} {m['p99_ms'] or 0:8.1f} "
                  f"{m['non_200']:8} {m['cpu_us'] if m['cpu_us'] is not None else float('nan'):11.1f}")
        ours, mms, echo = level.get("mmsctl", {}), level.get("mms", {}), level.get("echo", {})
        ratios = {"rps_vs_mms": _ratio(ours.get("rps"), mms.get("rps")),
                  "p99_vs_mms": _ratio(ours.get("p99_ms"), mms.get("p99_ms")),
                  "rps_vs_echo": _ratio(ours.get("rps"), echo.get("rps")),
                  "cpu_vs_echo": _ratio(ours.get("cpu_us"), echo.get("cpu_us"))}
        shown = "  ".join(f"{k} {v:.2f}x" for k, v in ratios.items() if v is not None)
        print(f"{'':7} ratios: {shown}")
        level["ratios"] = ratios
        summary["levels"][clients] = level
    first = summary["levels"].get(100)
    if first:
        r, ours = first["ratios"], first["mmsctl"]
        checks = [("req/s >= 3x MMS", None if r["rps_vs_mms"] is None else r["rps_vs_mms"] >= TARGET_RPS_RATIO),
                  ("p99 <= 0.5x MMS", None if r["p99_vs_mms"] is None else r["p99_vs_mms"] <= TARGET_P99_RATIO),
                  ("front-end CPU <= 100 us/req", None if ours["cpu_us"] is None else ours["cpu_us"] <= TARGET_CPU_US)]
        verdict = {True: "PASS", False: "FAIL", None: "not measured"}
        print("targets at 100 clients: " + ", ".join(f"{name} {verdict[ok]}" for name, ok in checks))
    for clients in (200, 500):
        level = summary["levels"].get(clients)
        if level:
            print(f"{clients} clients: every answer a 200: {'PASS' if level['mmsctl']['non_200'] == 0 else 'FAIL'}")
    _write({"summary": summary, "runs": results, "v2": v2}, "serve.json")
    return 0


def _write(data: dict[str, Any], name: str) -> None:
    out = REPO / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / name).write_text(json.dumps(data, indent=2))


if __name__ == "__main__":
    sys.exit(main())
