"""`mmsctl bench` against a real mmsctl server (token auth on, one worker, the echo model `noop`).

Every command runs through the real entry point in-process, except the Ctrl-C test,
which sends a real SIGINT to `python -m mmsctl bench` in a subprocess.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from tests.support.cli import CliResult, run_mmsctl
from tests.support.mmsctl_server import ServerInfo, free_port, make_noop_archive, running_mmsctl_server
from tests.support.waiting import wait_until
from tests.support.signals import popen

pytestmark = [pytest.mark.xdist_group("bench-cli")]

TOKEN = "bench-s3cret"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    store = tmp_path_factory.mktemp("bench-store")
    make_noop_archive(store / "noop")
    with running_mmsctl_server(tmp_path_factory.mktemp("bench-srv"), model_store=store, models={"noop": "noop"},
                               workers=1, token=TOKEN) as srv:
        yield srv


@pytest.fixture
def srv(server: ServerInfo, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> ServerInfo:
    """Contexts `srv` and `srv2` (both the module's server), and `badtoken` (a wrong token).

    The CLI sees the server's instance registry, as on a machine where `mmsctl serve` runs.
    """
    monkeypatch.setenv("MMSCTL_STATE_DIR", str(server.state_dir))
    good, bad = tmp_path / "token", tmp_path / "bad-token"
    good.write_text(TOKEN + "\n")
    bad.write_text("not-the-token\n")
    for name, token in (("srv", good), ("srv2", good), ("badtoken", bad)):
        r = run_mmsctl(capsys, "context", "add", name, "--inference", server.inference_url, "--management",
                       server.management_url, "--metrics", server.metrics_url, "--token-file", str(token))
        assert r.code == 0, r.stderr
    return server


def bench(capsys: pytest.CaptureFixture[str], *args: str) -> CliResult:
    return run_mmsctl(capsys, "--context", "srv", "bench", *args)


def _json(r: CliResult) -> dict[str, Any]:
    assert r.code == 0, r.stderr
    return json.loads(r.stdout)


def _models(server: ServerInfo) -> list[str]:
    reply = httpx.get(server.management_url + "/models", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    return sorted(m["modelName"] for m in reply.json()["models"])


@pytest.fixture
def body(tmp_path: Path) -> Path:
    path = tmp_path / "hello.txt"
    path.write_text("hello")
    return path


def one_error_line(r: CliResult) -> str:
    """The one ``error:`` line (status lines before it are fine; no traceback)."""
    assert "Traceback" not in r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, r.stderr
    return errors[0]


def _check_level(level: dict[str, Any]) -> None:
    assert level["sent"] == level["ok"] + sum(level["errors"].values())
    lat = level["latency_ms"]
    assert [lat[k] for k in ("p50", "p90", "p99", "p99.9", "max")] == sorted(lat.values())


def test_closed_sweep_figures_are_consistent(srv: ServerInfo, body: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _json(bench(capsys, "noop", str(body), "-c", "1,3", "--requests", "40", "--warmup", "0", "-o", "json"))
    assert run["format"] == "mmsctl-bench" and run["complete"] is True
    (sweep,) = run["sweeps"]
    assert (sweep["target"], sweep["model"], sweep["server_kind"], sweep["mode"]) == ("srv", "noop", "mmsctl", "closed")
    assert [lvl["concurrency"] for lvl in sweep["levels"]] == [1, 3]
    for level in sweep["levels"]:
        _check_level(level)
        assert (level["sent"], level["ok"], level["errors"]) == (40, 40, {})  # the token went with every request
        assert level["duration_s"] > 0
        # the server's own view, from its metrics: it saw these requests queue and run
        assert level["server"]["inference_ms"] > 0 and level["server"]["queue_ms"] >= 0


def test_table_csv_save_and_show(srv: ServerInfo, body: Path, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "run.json"
    r = bench(capsys, "noop", str(body), "-c", "1,2", "--requests", "20", "--warmup", "0", "-o", "csv", "--save", str(saved))
    assert r.code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("target,model,level,concurrency,rate,duration_s,sent,ok,success_pct,goodput")
    assert [line.split(",")[2] for line in lines[1:]] == ["1", "2"]
    assert f"saved to {saved}" in r.stderr
    shown = run_mmsctl(capsys, "bench", "show", str(saved))
    assert shown.code == 0, shown.stderr
    assert "P99.9" in shown.stdout and "goodput (ok req/s)" in shown.stdout and "success rate (%)" in shown.stdout
    twice = _json(run_mmsctl(capsys, "bench", "show", str(saved), str(saved), "-o", "json"))
    assert [s["target"] for s in twice["sweeps"]] == ["srv (run.json)", "srv (run.json)"]


def test_noop_registers_measures_and_leaves_nothing_behind(srv: ServerInfo, capsys: pytest.CaptureFixture[str]) -> None:
    before = _models(srv)
    run = _json(bench(capsys, "--noop", "-c", "2", "--requests", "30", "--warmup", "0", "-o", "json"))
    (name,) = run["settings"]["noop_models"].values()
    assert name.startswith("bench-noop-") and name not in before
    (level,) = run["sweeps"][0]["levels"]
    _check_level(level)
    assert level["ok"] == 30 and run["sweeps"][0]["model"] == name
    assert _models(srv) == before


def test_compare_interleaves_and_aligns_levels(srv: ServerInfo, body: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _json(bench(capsys, "noop", str(body), "--compare", "srv2", "-c", "1,2,4", "--requests", "15", "--warmup", "0",
                      "-o", "json"))
    a, b = run["sweeps"]
    assert (a["target"], b["target"]) == ("srv", "srv2")
    assert [lvl["concurrency"] for lvl in a["levels"]] == [lvl["concurrency"] for lvl in b["levels"]] == [1, 2, 4]
    table = bench(capsys, "noop", str(body), "--compare", "srv2", "-c", "1,2", "--requests", "10", "--warmup", "0")
    assert table.code == 0, table.stderr
    assert "B/A: srv2 against srv" in table.stdout
    assert "█ srv   ░ srv2" in table.stdout


def test_open_loop_reports_latency_from_the_scheduled_time(srv: ServerInfo, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    slow = tmp_path / "slow.txt"
    slow.write_text("sleep:0.2")  # the echo handler sleeps 0.2 s; one worker serves 5 requests/s
    run = _json(bench(capsys, "noop", str(slow), "--rate", "10", "--requests", "10", "--warmup", "0", "-o", "json"))
    (level,) = run["sweeps"][0]["levels"]
    _check_level(level)
    assert run["sweeps"][0]["mode"] == "open" and level["rate"] == 10 and level["ok"] == 10
    # Request n is scheduled at 0.1*n s and cannot finish before 0.2*(n+1) s: its latency from the
    # schedule is at least 0.1*n + 0.2 s, so the median is >= 0.6 s and the worst >= 1.1 s, where the
    # time from sending on an idle connection would say ~0.2 s for each.
    assert level["latency_ms"]["p50"] >= 600
    assert level["latency_ms"]["max"] >= 1100
    # and the server says where that time went: its queue (request n waits >= 0.1*n s)
    assert level["server"]["queue_ms"] >= 300


def test_unknown_model_is_exit_3(srv: ServerInfo, body: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = bench(capsys, "nosuchmodel", str(body), "--requests", "5")
    assert r.code == 3
    assert "nosuchmodel not found" in one_error_line(r)


def test_unreachable_server_is_exit_5(body: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    r = run_mmsctl(capsys, "context", "add", "dead", "--inference", f"http://127.0.0.1:{port}",
                   "--management", f"http://127.0.0.1:{port}")
    assert r.code == 0
    r = run_mmsctl(capsys, "--context", "dead", "bench", "noop", str(body), "--requests", "5")
    assert r.code == 5
    assert "connection refused" in one_error_line(r)


def test_refused_token_is_exit_6(srv: ServerInfo, body: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = run_mmsctl(capsys, "--context", "badtoken", "bench", "noop", str(body), "--requests", "5")
    assert r.code == 6
    assert "authentication failed" in one_error_line(r)
    r = run_mmsctl(capsys, "--context", "badtoken", "bench", "--noop", "--requests", "5")
    assert r.code == 6


@pytest.mark.parametrize("args, message, flag", [
    (["-c", "1,x"], "bad concurrency value 'x'", "(--concurrency)"),
    (["-c", "0"], "must be above 0", "(--concurrency)"),
    (["--rate", "-5"], "bad rate value", "(--rate)"),
    (["--duration", "ten"], "bad duration 'ten'", "(--duration)"),
    (["--warmup", "2d"], "bad warmup '2d'", "(--warmup)"),
    (["--requests", "0"], "requests must be", "(--requests)"),
    (["-o", "xml"], "unknown output format 'xml'", ""),
])
def test_bad_flags_are_exit_2(args: list[str], message: str, flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    r = run_mmsctl(capsys, "bench", "--noop", *args)
    assert r.code == 2
    line = one_error_line(r)
    assert message in line and line.endswith(flag)  # the core's words, then the flag the CLI names


def test_ctrl_c_prints_and_saves_partial_results_and_removes_the_noop_model(
        srv: ServerInfo, tmp_path: Path) -> None:
    saved = tmp_path / "cut.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    before = _models(srv)
    proc = popen(
        [sys.executable, "-m", "mmsctl", "--context", "srv", "bench", "--noop", "-c", "1,2", "-d", "120s",
         "--warmup", "0", "--save", str(saved)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        def loaded() -> bool:
            names = [m for m in _models(srv) if m.startswith("bench-noop-")]
            if not names:
                return False
            metrics = httpx.get(srv.metrics_url + "/metrics", timeout=10).text
            return any(line.startswith("mmsctl_requests_total") and f'model="{names[0]}"' in line
                       and 'api="inference"' in line and float(line.rsplit(" ", 1)[1]) > 20
                       for line in metrics.splitlines())

        try:
            wait_until(loaded, timeout=60, what="the sweep's load on the server",
                       alive=lambda: None if proc.poll() is None else f"the sweep exited {proc.returncode}")
        except (TimeoutError, RuntimeError) as exc:
            raise AssertionError(f"the sweep did not start ({exc})") from None
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    # Says where it stopped and what the (cut) row is, instead of "after 0 of 2 level(s)" above a row.
    assert "error: interrupted in level 1 (1 of 2): 0 level(s) complete; the row marked (cut) covers " \
           "the time its level ran" in err
    assert "LEVEL" in out and "(cut)" in out  # the partial table
    from mmsctl.loadtest.results import load_run

    run = load_run(saved)
    assert not run.complete
    (level,) = run.sweeps[0].levels
    assert not level.complete and level.ok > 0 and level.sent == level.ok + sum(level.errors.values())
    assert _models(srv) == before  # the no-op model is gone


def test_help_pages_stay_light() -> None:
    probe = ("import sys, json\nfrom mmsctl.cli.main import run\ntry:\n    run(sys.argv[1:])\nexcept SystemExit:\n"
             "    pass\nprint(json.dumps(sorted(m for m, mod in sys.modules.items() if mod is not None and m.split('.')[0] in "
             "('mxnet', 'numpy', 'PIL', 'boto3', 'botocore', 'textual', 'httpx', 'aiohttp', 'httptools'))), "
             "file=sys.stderr)\n")
    for args in (["bench", "--help"], ["bench", "run", "--help"], ["bench", "show", "--help"]):
        proc = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
        assert json.loads(proc.stderr.strip().splitlines()[-1]) == [], args
        assert "Usage" in proc.stdout
