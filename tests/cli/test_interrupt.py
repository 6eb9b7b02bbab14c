"""Ctrl+C anywhere: no traceback, no message, exit 130, and nothing left running.

Real processes and real SIGINT: a terminal sends it to the whole foreground process group,
a process manager (or ``kill -INT``) to the one pid; both are tried. The tests wait on what
they can observe (worker processes up, a log line printed), never on a bare sleep.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.support.waiting import wait_until
from tests.support.mmsctl_server import make_noop_archive
from tests.support.signals import popen

pytestmark = pytest.mark.slow


def _start(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return popen([sys.executable, "-m", "mmsctl", *args], cwd=cwd, stdout=subprocess.PIPE,
                 stderr=subprocess.PIPE, text=True, start_new_session=True, env=dict(os.environ))


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return all(p.status() == psutil.STATUS_ZOMBIE for p in psutil.process_iter() if _in_group(p, pgid))


def _in_group(proc: psutil.Process, pgid: int) -> bool:
    try:
        return os.getpgid(proc.pid) == pgid
    except (ProcessLookupError, psutil.Error):
        return False


def _workers(pid: int) -> list[psutil.Process]:
    try:
        return [c for c in psutil.Process(pid).children(recursive=True) if "mmsctl.engine.worker" in " ".join(c.cmdline())]
    except psutil.Error:
        return []


@pytest.mark.parametrize("to_group, when", [(True, "starting"), (True, "working"), (False, "working")],
                         ids=["terminal-while-workers-start", "terminal-mid-run", "kill-pid-mid-run"])
def test_ctrl_c_during_a_multi_worker_predict(tmp_path: Path, to_group: bool, when: str) -> None:
    model = make_noop_archive(tmp_path / "noop")
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for i in range(30):
        (inputs / f"{i:02d}.txt").write_text("sleep:0.4")
    proc = _start("predict", str(model), *sorted(str(p) for p in inputs.iterdir()), "--workers", "2",
                  "--batch-size", "1", "-o", "jsonl", cwd=tmp_path)
    try:
        wait_until(lambda: len(_workers(proc.pid)) == 2, timeout=60, what="two predict workers",
                   alive=lambda: None if proc.poll() is None else f"predict exited {proc.returncode}")
        workers = _workers(proc.pid)
        if when == "working":
            assert proc.stdout is not None
            assert proc.stdout.readline().startswith("{")  # answers are streaming: workers mid-run
        if to_group:
            os.killpg(proc.pid, signal.SIGINT)
        else:
            os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130
    assert "Traceback" not in err and "KeyboardInterrupt" not in err and "error:" not in err, err
    wait_until(lambda: not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers),
               timeout=30, what="the workers to be gone")
    wait_until(lambda: _group_gone(proc.pid), timeout=30, what="nothing left in the process group")


def test_ctrl_c_ends_serve_logs_follow_quietly(tmp_path: Path) -> None:
    from mmsctl.local_servers import Instance, InstanceState, process_start_time

    instance = Instance("following")
    instance.dir.mkdir(parents=True)
    instance.log_file.write_text("first line\n")
    instance.write_state(InstanceState(name="following", pid=os.getpid(), status="ready",
                                           process_start=process_start_time(os.getpid()),
                                       inference_url="http://127.0.0.1:1", management_url="http://127.0.0.1:2",
                                       log_file=str(instance.log_file)))
    proc = _start("serve", "logs", "-f", cwd=tmp_path)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "first line\n"  # following now
        with instance.log_file.open("a") as log:
            log.write("second line\n")
        assert proc.stdout.readline() == "second line\n"
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130
    assert err.strip() == "" and out == ""
