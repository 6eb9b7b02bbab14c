"""Two ``serve start`` (or a start and a stop) at the same moment, as separate processes: one claim wins.

Starting is one atomic claim per name and per port (``mmsctl/local_servers.py``: the registry's ``flock``, the
``starting`` state written before it is let go): exactly one server runs, the other command is refused at
once with who holds what, and ``serve status`` names the server that really runs. A ``serve stop`` at the
same moment either stops the start that claimed, or finds nothing to stop and the start goes on. Every
assertion is on observed state: exit codes, what each command said, the state files, the processes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from mmsctl.local_servers import Instance, pid_alive
from tests.support._proc import port_block
from tests.support.cli import run_mmsctl
from tests.support.mmsctl_server import make_handler_archive, make_noop_archive
from tests.support.waiting import wait_until

SLOW_LOAD = '''
import time

def handle(data, context):
    if data is None:
        time.sleep(30)  # a model that takes its time to load: the start stays "starting"
        return None
    return ["ok"] * len(data)
'''


def _launch(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "mmsctl", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ))


def _together(*commands: list[str]) -> list[tuple[int, str]]:
    """Start every command before waiting for any; (exit code, stderr) of each."""
    procs = [_launch(*command) for command in commands]
    results = []
    for proc in procs:
        _out, err = proc.communicate(timeout=120)
        results.append((proc.returncode, err))
    return results


def _status(capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    return json.loads(run_mmsctl(capsys, "serve", "status", "-o", "json").stdout)


@pytest.fixture
def noop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Iterator[Path]:
    yield make_noop_archive(tmp_path / "noop")
    run_mmsctl(capsys, "serve", "stop", "--all", "--timeout", "5")


def _one_won(results: list[tuple[int, str]]) -> tuple[int, str]:
    """The winner's pid; asserts the other was refused by the claim (not by a bind, not after a timeout)."""
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    won = next(err for code, err in results if code == 0)
    lost = next(err for code, err in results if code != 0)
    pid = int(re.search(r"ready \(pid (\d+);", won).group(1))  # type: ignore[union-attr]
    return pid, lost


def test_two_starts_of_one_name_at_once_run_one_server_and_status_names_it(
        noop: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = port_block()
    start = ["serve", "start", "--models", f"noop={noop}", "-n", "race", "-p", str(port), "--timeout", "60"]
    pid, lost = _one_won(_together(start, start))
    assert re.match(rf"error: server race is already (starting|running) \(pid {pid}; context local:race\)", lost), lost
    assert "hint: stop it with `mmsctl serve stop`, or start this one with another --name and --port" in lost
    rows = _status(capsys)
    assert [(r["name"], r["status"], r["pid"]) for r in rows] == [("race", "ready", pid)]
    assert httpx.post(f"http://127.0.0.1:{port}/predictions/noop", content=b"hi", timeout=10).text == "hi"


def test_two_starts_on_one_port_at_once_and_the_loser_names_the_winner(
        noop: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = port_block()
    first, second = ([*["serve", "start", "--models", f"noop={noop}", "-p", str(port), "--timeout", "60"], "-n", n]
                     for n in ("left", "right"))
    results = _together(first, second)
    pid, lost = _one_won(results)
    winner = "left" if results[0][0] == 0 else "right"
    assert re.match(rf"error: port {port} is taken by the mmsctl server local:{winner} on {port} "
                    rf"\(pid {pid}, (starting|running)\)", lost), lost
    rows = {r["name"]: r for r in _status(capsys)}
    assert list(rows) == [winner] and (rows[winner]["status"], rows[winner]["pid"]) == ("ready", pid)


def test_a_stop_during_a_start_stops_it_and_both_commands_and_status_say_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    make_handler_archive(store / "slow", SLOW_LOAD, name="slow")
    start = _launch("serve", "start", "--models", f"slow={store / 'slow'}", "-n", "slow", "-p", str(port_block()),
                    "--timeout", "60")
    try:
        claim = wait_until(lambda: Instance("slow").running_state(), timeout=60, what="the start's claim",
                           interval=0.02)
        assert claim.status == "starting"
        stopped = run_mmsctl(capsys, "serve", "stop", "-n", "slow", "--timeout", "5")
        _out, err = start.communicate(timeout=60)
    finally:
        if start.poll() is None:
            start.kill()
    assert stopped.code == 0 and stopped.stderr.strip() == "server slow stopped", stopped.stderr
    assert start.returncode == 1 and "error: server slow was stopped during its start-up" in err, err
    assert not pid_alive(claim.pid)
    assert [(r["name"], r["status"], r["pid"]) for r in _status(capsys)] == [("slow", "stopped", None)]


def test_a_stop_at_the_same_moment_as_a_start_leaves_the_truth(noop: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Whichever decides first: stopped (the start says so), or nothing to stop (the server then runs)."""
    port = port_block()
    (started, start_err), (stopped, stop_err) = _together(
        ["serve", "start", "--models", f"noop={noop}", "-n", "both", "-p", str(port), "--timeout", "60"],
        ["serve", "stop", "-n", "both", "--timeout", "5"])
    rows = _status(capsys)
    if started == 0:  # the stop came first: nothing of that name ran yet
        assert stopped in (0, 3) and ("nothing to stop" in stop_err or "no mmsctl server instance" in stop_err)
        assert [(r["name"], r["status"]) for r in rows] == [("both", "ready")] and pid_alive(int(rows[0]["pid"]))
    else:
        assert (started, stopped) == (1, 0) and "was stopped during its start-up" in start_err, (start_err, stop_err)
        assert stop_err.strip() == "server both stopped"
        assert [(r["name"], r["status"], r["pid"]) for r in rows] == [("both", "stopped", None)]


def test_stop_with_nothing_running_is_a_note_and_exit_0_but_an_unknown_name_is_not(
        noop: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nothing = run_mmsctl(capsys, "serve", "stop")
    assert (nothing.code, nothing.stderr.strip()) == (0, "no mmsctl server is running; nothing to stop")
    started = run_mmsctl(capsys, "serve", "start", "--models", f"noop={noop}", "-n", "tour", "-p",
                         str(port_block()))
    assert started.code == 0, started.stderr
    assert run_mmsctl(capsys, "serve", "stop", "-n", "tour").code == 0
    again = run_mmsctl(capsys, "serve", "stop", "-n", "tour")
    assert (again.code, again.stderr.strip()) == (0, "server tour is not running; nothing to stop")
    typo = run_mmsctl(capsys, "serve", "stop", "-n", "toor")
    assert typo.code == 3 and typo.stderr.splitlines()[0] == \
        "error: no mmsctl server instance named 'toor'; did you mean 'tour'?"
