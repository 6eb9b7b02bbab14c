"""`mmsctl top` cost while idle: CPU% of one core and RSS, in a real terminal (tmux).

Run from the repo root: ``.venv/bin/python bench/top.py [--models 50] [--seconds 30] [--interval 1] [--members 1]``.

Starts a real mmsctl server on loopback, registers a no-op model ``--models`` times
(``--workers`` each, 0 by default so 50 models do not start 50 processes), runs
``mmsctl top`` inside a detached tmux session (a real pty, real rendering), waits
until all models are on screen, then samples the process's CPU time over
``--seconds``. Targets (issue 5): at most 5 % of one core at a 1 s interval with
50 models, RSS under 100 MB. Prints measured vs target and the ratio; exits 1 if
a target is missed. Needs tmux (apt-get install tmux).

``--members N`` (N > 1) starts N such servers and watches them as one fleet
(a ``--members`` context; every member polled each interval, each model combined
across them), with the same targets.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.mmsctl_server import make_noop_archive, running_mmsctl_server  # noqa: E402
from tests.support.waiting import wait_until  # noqa: E402

CPU_TARGET = 5.0  # percent of one core
RSS_TARGET = 100 * 1024 * 1024


def _tmux(sock: str, *args: str) -> str:
    return subprocess.run(["tmux", "-L", sock, *args], capture_output=True, text=True, timeout=20).stdout


def _top_process(pane_pid: int):  # type: ignore[no-untyped-def]
    import psutil

    root = psutil.Process(pane_pid)
    for proc in [root, *root.children(recursive=True)]:
        try:
            cmd = proc.cmdline()
        except psutil.Error:
            continue
        if "mmsctl" in " ".join(cmd) and "top" in cmd:
            return proc
    raise SystemExit("could not find the mmsctl top process in the tmux pane")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=50)
    parser.add_argument("--workers", type=int, default=0, help="workers per model (default 0)")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--members", type=int, default=1, help="servers; more than 1 is watched as a fleet")
    parser.add_argument("--show", action="store_true", help="print the last screen")
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        sys.exit("tmux is not installed (apt-get install tmux)")
    import httpx

    with tempfile.TemporaryDirectory(prefix="mmsctl-bench-top-") as tmp_name:
        tmp = Path(tmp_name)
        store = tmp / "store"
        make_noop_archive(store / "noop")
        with ExitStack() as servers:
            started = [servers.enter_context(running_mmsctl_server(tmp / f"member{n}", model_store=store))
                       for n in range(max(1, args.members))]
            with httpx.Client(timeout=60) as client:
                for srv in started:
                    for i in range(args.models):
                        r = client.post(f"{srv.management_url}/models",
                                        params={"url": "noop", "model_name": f"noop{i:02d}",
                                                "initial_workers": args.workers, "synchronous": "true"})
                        r.raise_for_status()
            env = {"TERM": "xterm-256color", "MMSCTL_CONFIG_DIR": str(tmp / "config")}
            srv = started[0]
            if args.members > 1:
                members = ",".join(f"{s.inference_url}={s.management_url}={s.metrics_url}" for s in started)
                subprocess.run([sys.executable, "-m", "mmsctl", "context", "add", "bench", "--members", members],
                               env={**os.environ, **env}, check=True, capture_output=True, timeout=60)
                env["MMSCTL_CONTEXT"] = "bench"
            else:
                env.update(MMSCTL_INFERENCE_URL=srv.inference_url, MMSCTL_MANAGEMENT_URL=srv.management_url,
                           MMSCTL_METRICS_URL=srv.metrics_url)
            command = "exec env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + \
                f" {shlex.quote(sys.executable)} -m mmsctl top --interval {args.interval:g}"
            sock = f"mmsctl-bench-{uuid.uuid4().hex[:8]}"
            _tmux(sock, "new-session", "-d", "-s", "top", "-x", "160", "-y", "60", command)
            try:
                ready = [f"models {args.models}"] + ([f"members {args.members}/{args.members} up"]
                                                     if args.members > 1 else [])
                try:
                    wait_until(lambda: all(w in _tmux(sock, "capture-pane", "-p", "-t", "top") for w in ready),
                               timeout=60, what="mmsctl top showing all models")
                except TimeoutError:
                    sys.exit("mmsctl top never showed all models:\n" + _tmux(sock, "capture-pane", "-p"))
                proc = _top_process(int(_tmux(sock, "display", "-p", "-t", "top", "#{pane_pid}").strip()))
                time.sleep(args.warmup)
                before = proc.cpu_times()
                t0 = time.monotonic()
                time.sleep(args.seconds)
                after = proc.cpu_times()
                elapsed = time.monotonic() - t0
                rss = proc.memory_info().rss
                screen = _tmux(sock, "capture-pane", "-p", "-t", "top")
            finally:
                _tmux(sock, "kill-server")
    used = (after.user - before.user) + (after.system - before.system)
    cpu = 100.0 * used / elapsed
    result = {
        "models": args.models, "members": args.members, "interval_s": args.interval, "seconds": round(elapsed, 1),
        "cpu_percent": round(cpu, 2), "cpu_target": CPU_TARGET, "cpu_ratio": round(cpu / CPU_TARGET, 2),
        "rss_mb": round(rss / 2**20, 1), "rss_target_mb": RSS_TARGET / 2**20,
        "rss_ratio": round(rss / RSS_TARGET, 2),
    }
    fleet = f" on each of a fleet of {args.members} members" if args.members > 1 else ""
    print(f"mmsctl top idle, {args.models} models{fleet}, {args.interval:g} s interval, {elapsed:.0f} s in tmux")
    print(f"  CPU  {cpu:6.2f} % of one core   target <= {CPU_TARGET:g} %   ratio {cpu / CPU_TARGET:.2f}")
    print(f"  RSS  {rss / 2**20:6.1f} MB               target <  {RSS_TARGET / 2**20:g} MB  ratio {rss / RSS_TARGET:.2f}")
    print(json.dumps(result))
    if args.show:
        print(screen)
    if cpu > CPU_TARGET or rss >= RSS_TARGET:
        sys.exit(1)


if __name__ == "__main__":
    main()
