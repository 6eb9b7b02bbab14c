"""`mmsctl serve start|status|stop|logs` as a user runs them: real background servers."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from mmsctl.local_servers import Instance, InstanceState, pid_alive
from tests.support.cli import run_mmsctl
from tests.support._proc import port_block
from tests.support.mmsctl_server import free_port, make_noop_archive
from tests.support.signals import popen
from tests.support.waiting import wait_until


def _mmsctl_process(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``mmsctl ARGS…`` as its own process, where that process is the point (it exits; what it started lives on)."""
    return subprocess.run([sys.executable, "-m", "mmsctl", *args], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ))


def _addresses() -> tuple[list[str], int, int]:
    ports = [free_port() for _ in range(3)]
    flags = ["--inference-address", f"127.0.0.1:{ports[0]}", "--management-address",
             f"127.0.0.1:{ports[1]}", "--metrics-address", f"127.0.0.1:{ports[2]}"]
    return flags, ports[0], ports[1]


@pytest.fixture
def noop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Iterator[Path]:
    yield make_noop_archive(tmp_path / "noop")
    run_mmsctl(capsys, "serve", "stop", "--all", "--timeout", "5")


def test_start_returns_ready_then_status_then_stop(noop: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flags, inference, management = _addresses()
    # the CLI's own process: it exits once the server is ready, and the server it detached serves on
    started = _mmsctl_process("serve", "start", "--models", f"noop={noop}", *flags)
    assert started.returncode == 0, started.stderr
    # start returned, so a prediction must work right away
    resp = httpx.post(f"http://127.0.0.1:{inference}/predictions/noop", content=b"now", timeout=10)
    assert resp.status_code == 200 and resp.text == "now"

    status = run_mmsctl(capsys, "serve", "status", "-o", "json")
    rows = json.loads(status.stdout)
    assert len(rows) == 1
    assert rows[0]["status"] == "ready" and rows[0]["name"] == str(inference)
    assert rows[0]["management_url"] == f"http://127.0.0.1:{management}"
    pid = rows[0]["pid"]

    again = run_mmsctl(capsys, "serve", "start", "--models", f"noop={noop}", *flags)
    assert again.code != 0 and "already running" in again.stderr
    assert "hint: stop it with `mmsctl serve stop`, or start this one with another --name and --port" in again.stderr

    logs = run_mmsctl(capsys, "serve", "logs", "--tail", "50")
    assert "READY" in logs.stdout

    stopped = run_mmsctl(capsys, "serve", "stop")
    assert stopped.code == 0, stopped.stderr
    assert not pid_alive(pid)
    assert json.loads(run_mmsctl(capsys, "serve", "status", "-o", "json").stdout)[0]["status"] == "stopped"


def _wait_for_queue(management: int, model: str, pending: int, timeout: float = 30) -> None:
    """Poll describe until *pending* requests wait in the model's queue (bounded)."""
    def queued() -> int:
        described = httpx.get(f"http://127.0.0.1:{management}/models/{model}", timeout=10).json()
        return int(described["queueStatus"]["pendingRequests"])

    wait_until(lambda: queued() >= pending, timeout=timeout, what=f"{model}: {pending} requests queued",
               interval=0.02)


@pytest.mark.slow
def test_stop_drains_in_flight_and_queued_requests(noop: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flags, inference, management = _addresses()
    assert run_mmsctl(capsys, "serve", "start", "--models", f"noop={noop}", *flags).code == 0
    results: list[int] = []

    def call() -> None:
        try:
            r = httpx.post(f"http://127.0.0.1:{inference}/predictions/noop", content=b"sleep:0.6", timeout=30)
            results.append(r.status_code)
        except httpx.HTTPError as exc:  # a dropped request is a failure of the test
            results.append(-1)
            print(exc)

    threads = [threading.Thread(target=call) for _ in range(5)]
    for t in threads:
        t.start()
    _wait_for_queue(management, "noop", 4)  # one in flight, the rest queued on the single worker
    stopped = run_mmsctl(capsys, "serve", "stop", "--timeout", "20")
    for t in threads:
        t.join(30)
    assert stopped.code == 0, stopped.stderr
    assert results == [200] * 5, stopped.stdout  # (where a dropped request printed its error, during the stop)


@pytest.mark.slow
def test_two_servers_side_by_side_each_its_own_context(noop: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Several local servers: `local` is ambiguous everywhere it is used, each is local:NAME,
    `serve stop` says which exist, `--port N` gives N/N+1/N+2, `stop --all` and `prune` tidy up."""
    a_flags, a_port, _ = _addresses()
    b_port = port_block()
    assert run_mmsctl(capsys, "serve", "start", "--models", f"noop={noop}", *a_flags).code == 0
    second = run_mmsctl(capsys, "serve", "start", "--models", f"noop={noop}", "--port", str(b_port), "--name", "second")
    assert second.code == 0, second.stderr
    assert "context local:second" in second.stderr
    for port in (a_port, b_port):
        assert httpx.post(f"http://127.0.0.1:{port}/predictions/noop", content=b"x").text == "x"
    assert httpx.get(f"http://127.0.0.1:{b_port + 1}/models/noop").status_code == 200
    assert httpx.get(f"http://127.0.0.1:{b_port + 2}/metrics").status_code == 200

    running = f"2 mmsctl servers are running here: {a_port} (http://127.0.0.1:{a_port}), " \
              f"second (http://127.0.0.1:{b_port})"
    ambiguous = run_mmsctl(capsys, "serve", "stop")
    assert ambiguous.code == 2
    assert ambiguous.stderr.splitlines() == [f"error: {running}",
                                             f"hint: say which with -n {a_port} or -n second, or stop them all with --all"]
    b_pid = json.loads(run_mmsctl(capsys, "serve", "status", "-n", "second", "-o", "json").stdout)[0]["pid"]
    again = run_mmsctl(capsys, "serve", "start", "--models", f"noop={noop}", "--port", str(b_port), "--name", "second")
    assert again.code == 2 and again.stderr.splitlines() == [  # several run: "stop it" says which
        f"error: server second is already running (pid {b_pid}; context local:second)",
        "hint: stop it with `mmsctl serve stop -n second`, or start this one with another --name and --port"]
    taken = run_mmsctl(capsys, "serve", "start", "--models", f"noop={noop}", "--port", str(b_port), "--name", "third")
    assert taken.code == 2 and taken.stderr.splitlines()[1] == \
        "hint: stop it with `mmsctl serve stop -n second`, or start this one with another --port"
    assert f"error: port {b_port} is taken by the mmsctl server local:second on {b_port} (pid " in taken.stderr
    listed = run_mmsctl(capsys, "models", "list")  # the `local` context: the same rule, the same names
    assert listed.code == 2
    assert listed.stderr.splitlines() == [
        f"error: {running}",
        f"hint: say which: --context local:{a_port} or --context local:second "
        f"(`mmsctl context use local:{a_port}` keeps it)"]
    names = [c["name"] for c in json.loads(run_mmsctl(capsys, "context", "list", "-o", "json").stdout)]
    assert names == ["local", f"local:{a_port}", "local:second"]
    on_second = run_mmsctl(capsys, "--context", "local:second", "context", "current", "-o", "json")
    assert json.loads(on_second.stdout)["management_url"] == f"http://127.0.0.1:{b_port + 1}"

    assert run_mmsctl(capsys, "serve", "stop", "--name", "second").code == 0
    assert httpx.get(f"http://127.0.0.1:{a_port}/ping").status_code == 200
    one = run_mmsctl(capsys, "models", "list", "-o", "json")  # one server left: `local` is it
    assert one.code == 0 and [m["modelName"] for m in json.loads(one.stdout)] == ["noop"]

    assert run_mmsctl(capsys, "serve", "stop", "--all").code == 0
    nothing = run_mmsctl(capsys, "serve", "stop", "--all")
    assert nothing.code == 0 and "no mmsctl server is running" in nothing.stderr
    assert len(json.loads(run_mmsctl(capsys, "serve", "status", "-o", "json").stdout)) == 2  # stopped, still listed
    pruned = run_mmsctl(capsys, "serve", "prune")
    assert pruned.code == 0 and pruned.stderr.strip() == f"removed 2 stopped instances: {a_port}, second"
    assert json.loads(run_mmsctl(capsys, "serve", "status", "-o", "json").stdout) == []


def test_port_taken_is_a_clear_error(noop: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flags, inference, _ = _addresses()
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", inference))
        blocker.listen()
        result = run_mmsctl(capsys, "serve", "start", "--models", f"noop={noop}", *flags)
    assert result.code == 1
    assert "error:" in result.stderr and str(inference) in result.stderr
    assert result.stderr.splitlines()[0].endswith("(--inference-address)")  # the flag to change
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("address, first_line", [
    ("foo", "error: inference_address: bad address 'foo': must be a URL like http://127.0.0.1:8080 "
            "(--inference-address)"),
    ("http://192.0.2.1:{port}", "error: cannot listen on 192.0.2.1:{port} (inference API): Cannot assign requested "
                                "address (--inference-address)"),
])
def test_an_address_that_is_no_url_of_this_machine_is_a_usage_error(
        address: str, first_line: str, noop: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A word, or an IP of another machine (TEST-NET-1: nothing is sent): exit 2 naming the flag and the form
    a value takes, never "another program listens there"; nothing is started."""
    port = free_port()
    result = run_mmsctl(capsys, "serve", "start", "--models", f"noop={noop}",
                        "--inference-address", address.format(port=port))
    assert result.code == 2 and result.stderr.splitlines()[0] == first_line.format(port=port), result.stderr
    assert "another program" not in result.stderr
    assert json.loads(run_mmsctl(capsys, "serve", "status", "-o", "json").stdout) == []


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _ipv6_loopback(), reason="this machine has no IPv6 loopback")
def test_an_ipv6_address_is_checked_as_ipv6(noop: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``http://[::1]:PORT`` is an address of this machine: its port is checked on an IPv6 socket (a port that
    another program holds there is named as such, exit 1), not refused as no address of this machine."""
    port = free_port()
    with socket.socket(socket.AF_INET6) as blocker:
        blocker.bind(("::1", port))
        blocker.listen()
        result = run_mmsctl(capsys, "serve", "start", "--models", f"noop={noop}",
                            "--inference-address", f"http://[::1]:{port}")
    assert result.code == 1, result.stderr
    assert result.stderr.splitlines()[0] == (f"error: cannot listen on ::1:{port} (inference API): Address already in "
                                             "use (--inference-address)")


def test_a_port_taken_by_another_program_names_no_flag_the_user_did_not_type(
        tmp_path: Path, noop: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The addresses come from config.properties (or MMS's defaults): the error says what to type, --port."""
    _, inference, management = _addresses()
    config = tmp_path / "config.properties"
    config.write_text(f"inference_address=http://127.0.0.1:{inference}\nmanagement_address=http://127.0.0.1:"
                      f"{management}\nmetrics_address=http://127.0.0.1:{free_port()}\n")
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", inference))
        blocker.listen()
        result = run_mmsctl(capsys, "serve", "start", "--models", f"noop={noop}", "--config", str(config))
    assert result.code == 1 and result.stderr.splitlines() == [
        f"error: cannot listen on 127.0.0.1:{inference} (inference API): Address already in use",
        "hint: another program listens there: start this one with --port N (N, N+1 and N+2 free)"]


def test_serve_logs_of_a_foreground_server_says_where_its_log_goes(noop: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    port = port_block()
    proc = popen([sys.executable, "-m", "mmsctl", "serve", "start", "--foreground", "--models",
                  f"noop={noop}", "-p", str(port), "-n", "fg"], stdout=subprocess.DEVNULL,
                 stderr=subprocess.PIPE, env=dict(os.environ))
    try:
        wait_until(lambda: (Instance("fg").read_state() or InstanceState("", 0)).status == "ready", timeout=60,
                   what="the foreground server ready", interval=0.05)
        logs = run_mmsctl(capsys, "serve", "logs", "-n", "fg")
        assert logs.code == 3 and logs.stderr.splitlines()[0] == (
            f"error: server fg runs in the foreground (pid {proc.pid}): its log goes to the terminal it was "
            "started in, not to a file"), logs.stderr
        assert json.loads(run_mmsctl(capsys, "serve", "status", "-o", "json").stdout)[0]["status"] == "ready"
    finally:
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    assert b"mmsctl server ready" in err  # the log went to its terminal (here, its stderr)
    assert "ran in the foreground" in run_mmsctl(capsys, "serve", "logs", "-n", "fg").stderr



def test_bad_archive_fails_start_with_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = make_noop_archive(tmp_path / "broken", name="broken", failing=True)
    flags, inference, _ = _addresses()
    result = run_mmsctl(capsys, "serve", "start", "--models", f"broken={broken}", *flags)
    assert result.code == 1
    assert "broken" in result.stderr and "missing weights" in result.stderr
    assert "Traceback" not in result.stderr
    # nothing is left listening
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{inference}/ping", timeout=2)


def test_bad_config_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    props = tmp_path / "config.properties"
    props.write_text("inference_address=http://127.0.0.1:8080\ndefault_workers_per_model=lots\n")
    result = run_mmsctl(capsys, "serve", "start", "--config", str(props))
    assert result.code == 2
    assert "default_workers_per_model" in result.stderr
    missing = run_mmsctl(capsys, "serve", "start", "--models", "nothing-here.mar",
                         "--model-store", str(tmp_path / "nope"))
    assert missing.code == 2 and "model_store" in missing.stderr


@pytest.mark.parametrize("text, reason", [
    (None, "not found"),
    ("", "is empty"),
    ('{"inference": {"key": "only-inference"}}', "no 'management' key"),
    ('{"management": {"key": ""}, "inference": {"key": "k"}}', "management key is empty"),
    ("null", "expected a token or a JSON object"),
    ("two words", "characters a Bearer token cannot have"),
])
def test_a_token_file_without_both_keys_refuses_to_start(tmp_path: Path, text: str | None, reason: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A server never starts half-protected: one error line, exit 2 (3 for a file that is not there: a missing
    input file, docs/cli.md), nothing listening."""
    token = tmp_path / "token"
    if text is not None:
        token.write_text(text)
    flags, inference, _ = _addresses()
    result = run_mmsctl(capsys, "serve", "start", "--token-file", str(token), *flags, "--timeout", "30")
    assert result.code == (3 if text is None else 2), result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith(f"error: token file {token}") and reason in lines[0], lines
    assert all(line.startswith("hint: ") for line in lines[1:]) and "Traceback" not in result.stderr
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{inference}/ping", timeout=2)


def test_config_properties_are_used(tmp_path: Path, noop: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flags, inference, management = _addresses()
    props = tmp_path / "config.properties"
    props.write_text(
        "# an MMS config\n"
        f"inference_address=http://127.0.0.1:{inference}\n"
        f"management_address=http://127.0.0.1:{management}\n"
        f"metrics_address={flags[-1]}\n"
        f"model_store={tmp_path}\n"
        "load_models=noop\n"
        "default_workers_per_model=2\n"
        "job_queue_size=7\n"
    )
    result = run_mmsctl(capsys, "serve", "start", "--config", str(props))
    assert result.code == 0, result.stderr
    d = httpx.get(f"http://127.0.0.1:{management}/models/noop").json()
    assert len(d["workers"]) == 2 and d["queueStatus"]["capacity"] == 7
    assert run_mmsctl(capsys, "serve", "stop", "--name", str(inference)).code == 0


def test_not_an_archive_names_the_model_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The error used to read "model 'bad=/x/bad.jpg' failed to start: /x/bad.jpg: …"."""
    junk = tmp_path / "bad.jpg"
    junk.write_text("hello")
    flags, _, _ = _addresses()
    result = run_mmsctl(capsys, "serve", "start", "--models", f"bad={junk}", *flags, "--timeout", "60")
    assert result.code == 1
    error = next(line for line in result.stderr.splitlines() if line.startswith("error:"))
    assert error == (f"error: server failed to start: start-up model 'bad': {junk}: not a model archive "
                     "(expected a .mar/.model zip, a .tar.gz or a folder)")


def test_load_models_all_skips_a_taken_or_invalid_name_with_a_warning_as_mms_does(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``load_models=ALL`` over a store where two archives' manifests say ``resnet`` and two say a name no URL can
    reach (``a/b``, one with a newline), and a ``.mar`` that is no archive: the server starts with the first
    ``resnet``; each other one is a warning in server.log naming it (and the archive that holds the name), on one
    line. MMS 1.1.11's
    ``ModelServer.initModelStore`` logs "Failed to load model" for each and carries on."""
    store = tmp_path / "store"
    for folder, name in (("resnet-v1", "resnet"), ("resnet-v2", "resnet"), ("slash", "a/b"), ("newline", "x\ny")):
        make_noop_archive(store / folder, name)
    (store / "junk.mar").write_text("not a zip")
    flags, inference, management = _addresses()
    props = tmp_path / "config.properties"
    props.write_text(f"model_store={store}\nload_models=ALL\ndefault_workers_per_model=0\n")
    started = run_mmsctl(capsys, "serve", "start", "--config", str(props), *flags)
    try:
        assert started.code == 0, started.stderr
        listed = httpx.get(f"http://127.0.0.1:{management}/models", timeout=10).json()["models"]
        assert listed == [{"modelName": "resnet", "modelUrl": "resnet-v1"}]
        log = run_mmsctl(capsys, "serve", "logs", "-n", str(inference)).stdout
        warnings = [line for line in log.splitlines() if "Failed to load model" in line]
        assert len(warnings) == 4 and all("[WARNING]" in line for line in warnings), log
        assert any("junk.mar" in line and "not a model archive" in line for line in warnings)
        assert any("resnet-v2" in line and "resnet-v1" in line for line in warnings)
        assert any("slash" in line and "'a/b'" in line for line in warnings)
        assert any("newline" in line and "'x\\ny'" in line for line in warnings)
    finally:
        run_mmsctl(capsys, "serve", "stop", "-n", str(inference), "--timeout", "5")


@pytest.mark.parametrize("models, said", [
    (["{v1}", "{v2}"], "start-up model '{v2}': Model resnet is already registered (from {v1})."),
    (["{slash}"], "start-up model '{slash}': Invalid model name 'a/b': 1 to 255 characters, no '/' or control "
                  "characters."),
    (["{newline}"], "start-up model '{newline}': Invalid model name 'x\\ny': 1 to 255 characters, no '/' or control "
                    "characters."),
])
def test_a_named_start_up_model_whose_name_is_taken_or_invalid_fails_the_start(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], models: list[str], said: str) -> None:
    """``--models`` (``load_models=a,b``) names each start-up model: one whose name is taken, or whose manifest's
    ``modelName`` no register would accept, fails the start with one line naming it (the name's own
    ``NAME=`` is checked by the CLI already)."""
    paths = {"v1": make_noop_archive(tmp_path / "resnet-v1", "resnet"),
             "v2": make_noop_archive(tmp_path / "resnet-v2", "resnet"),
             "slash": make_noop_archive(tmp_path / "slash", "a/b"),
             "newline": make_noop_archive(tmp_path / "newline", "x\ny")}
    flags, inference, _ = _addresses()
    words = [word for spec in models for word in ("--models", spec.format(**paths))]
    result = run_mmsctl(capsys, "serve", "start", *words, "--workers", "0", *flags)
    assert result.code == 1, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: server failed to start: {said.format(**paths)}"], result.stderr
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{inference}/ping", timeout=2)
