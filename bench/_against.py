"""bench/serve.py ``--against REV``: this checkout's server and REV's, side by side on the same machine.

REV (a commit, a branch) is checked out in a git worktree under the run's folder and run with
``PYTHONPATH`` pointing there; this checkout's server runs as usual. Both get the same model store and start-up
models: ``noop`` (echoes its body) and ``size`` (answers its body's length: a large body costs the front end
only its reading and its trip to the worker). Each round runs every workload on both servers, the order
alternating per round, with ``mmsctl bench``'s load generator (this checkout's, for both):

* no-op, MMS API: ``POST /predictions/noop``, 5 bytes;
* no-op, v2: ``POST /v2/models/noop/infer`` (binary tensor data, as ``mmsctl bench --protocol v2`` sends);
* a 3 MB photo: ``POST /predictions/size`` with a 12 MP JPEG made from ../shared's kitten
  (tests/support/photos.py: upscaled, seeded grain, quality 92), fewer clients.

Per workload and server: successful req/s, p99, and the front-end process's CPU per request (utime + stime of
``python -m mmsctl.server``, workers excluded); then medians, each round's own new/old ratio (its two runs back to
back), and the load average. Writes bench/out/serve_against.json.
"""

from __future__ import annotations

import io
import os
import shutil
import statistics
import subprocess
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable, Optional

__all__ = ["against"]

REPO = Path(__file__).resolve().parents[1]
#: A handler that answers how many bytes it got (nothing of the body comes back).
SIZE_HANDLER = '''
def handle(data, context):
    if data is None:
        return None
    return [str(len(row.get("body") or row.get("data") or b"")) for row in data]
'''


def photo_jpeg() -> bytes:
    """A 12 MP JPEG as a phone writes it (about 3 MB), made from ../shared's kitten."""
    from tests.support.photos import QUALITY, make_master

    out = io.BytesIO()
    make_master().save(out, "JPEG", quality=QUALITY)
    return out.getvalue()


def _worktree(rev: str, where: Path) -> Path:
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(where), rev], check=True,
                   capture_output=True, timeout=120)
    return where


def _drop_worktree(where: Path) -> None:
    subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(where)], capture_output=True,
                   timeout=120)
    shutil.rmtree(where, ignore_errors=True)


def _store(folder: Path) -> Path:
    from tests.support.mmsctl_server import make_handler_archive, make_noop_archive

    make_noop_archive(folder / "noop")
    make_handler_archive(folder / "size", SIZE_HANDLER, name="size")
    return folder


def against(rev: str, args: Any, work: Path, measure: Callable[..., dict[str, Any]], target: Callable[..., Any],
            body: bytes) -> dict[str, Any]:
    """Every workload on this checkout's server and on *rev*'s, alternating per round; the summary."""
    from tests.support.mmsctl_server import running_mmsctl_server

    store = _store(work / "store-against")
    photo = photo_jpeg()
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    with ExitStack() as stack:
        tree = _worktree(rev, work / "against")
        stack.callback(_drop_worktree, tree)
        models = {"noop": "noop", "size": "size"}
        servers = {
            "new": stack.enter_context(running_mmsctl_server(work / "srv-new", model_store=store, models=models,
                                                             workers=args.workers)),
            "old": stack.enter_context(running_mmsctl_server(work / "srv-old", model_store=store, models=models,
                                                             workers=args.workers,
                                                             environ={"PYTHONPATH": str(tree)})),
        }
        workloads = [("no-op, MMS API", "/predictions/noop", body, args.v2_clients),
                     ("no-op, v2", "/v2/models/noop/infer", body, args.v2_clients),
                     ("3 MB photo", "/predictions/size", photo, args.photo_clients)]
        print(f"\n{rev} (old) against this checkout (new), {args.rounds} round(s) of {args.duration:g} s, "
              f"load generator mmsctl, {os.cpu_count()} CPUs; photo {len(photo):,} bytes")
        for name, path, payload, clients in workloads:
            for srv in servers.values():  # warm
                measure(target(name, srv.inference_url + path, srv.pid), 10, 1.0, "mmsctl", work, payload)
            for round_ in range(args.rounds):
                for side in (("old", "new") if round_ % 2 == 0 else ("new", "old")):
                    srv = servers[side]
                    r = measure(target(name, srv.inference_url + path, srv.pid), clients, args.duration, "mmsctl",
                                work, payload)
                    runs.setdefault(name, {}).setdefault(side, []).append(r)
                    print(f"  round {round_ + 1} {name:15} {side} {r['rps']:8.0f} ok/s  p99 {r['p99_ms'] or 0:7.1f} ms"
                          f"  non-200 {r['non_200']:5}  server cpu {r['cpu_us'] or 0:8.1f} us/req  load "
                          f"{r['load']:.2f}", flush=True)
    return _summary(rev, runs)


def _median(values: list[Optional[float]]) -> Optional[float]:
    found = [v for v in values if v is not None]
    return statistics.median(found) if found else None


def _summary(rev: str, runs: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    summary: dict[str, Any] = {"rev": rev, "load_average_end": os.getloadavg(), "workloads": {}}
    print(f"\nmedians; new/old: the median of each round's own ratio; load average now {os.getloadavg()[0]:.2f}")
    print(f"{'workload':15} {'old ok/s':>9} {'new ok/s':>9} {'new/old':>8}   {'old cpu us':>10} {'new cpu us':>10} "
          f"{'new/old':>8}   {'old p99':>8} {'new p99':>8}")
    for name, sides in runs.items():
        old, new = sides["old"], sides["new"]
        rps = [n["rps"] / o["rps"] for o, n in zip(old, new) if o["rps"]]
        cpu = [n["cpu_us"] / o["cpu_us"] for o, n in zip(old, new) if o["cpu_us"] and n["cpu_us"]]
        row = {side: {key: _median([r[key] for r in sides[side]]) for key in ("rps", "cpu_us", "p99_ms")}
               for side in ("old", "new")}
        row.update(rps_ratio=_median(list(rps)), cpu_ratio=_median(list(cpu)), rps_ratios=rps, cpu_ratios=cpu,
                   non_200=sum(r["non_200"] for side in sides.values() for r in side), runs=sides)
        summary["workloads"][name] = row
        print(f"{name:15} {row['old']['rps'] or 0:9.0f} {row['new']['rps'] or 0:9.0f} {row['rps_ratio'] or 0:8.2f}   "
              f"{row['old']['cpu_us'] or 0:10.1f} {row['new']['cpu_us'] or 0:10.1f} {row['cpu_ratio'] or 0:8.2f}   "
              f"{row['old']['p99_ms'] or 0:8.1f} {row['new']['p99_ms'] or 0:8.1f}")
    return summary
