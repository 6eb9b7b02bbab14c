"""`mmsctl predict MODEL INPUT --context NAME`: inputs go to a real mmsctl server's /predictions/MODEL.

The server runs the no-op echo handler (no mxnet, starts in about a second), so
these tests are about the command: inputs, output formats and exit codes. The
real SqueezeNet over the wire is in tests/interop/test_client_mmsctl.py.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from tests.support.cli import run_mmsctl
from tests.support.cli import one_error_line
from tests.support.mmsctl_server import ServerInfo, free_port, make_noop_archive, running_mmsctl_server

pytestmark = [pytest.mark.xdist_group("predict-remote")]  # one server for the module

TOKEN = "predict-token"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    root = tmp_path_factory.mktemp("predict-remote")
    echo = make_noop_archive(root / "echo", "echo")
    crashy = make_noop_archive(root / "crashy", "crashy")
    with running_mmsctl_server(root, models={"echo": str(echo), "crashy": str(crashy)}, token=TOKEN) as srv:
        yield srv


@pytest.fixture
def srv(server: ServerInfo, tmp_path: Path, capsys) -> ServerInfo:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    r = run_mmsctl(capsys, "context", "add", "srv", "--inference", server.inference_url,
                   "--management", server.management_url, "--token-file", str(token))
    assert r.code == 0, r.stderr
    return server


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    """``a.json`` and ``b.txt``, and ``pics/`` (two "images" the echo handler sends back, and a note)."""
    folder = tmp_path / "inputs"
    (folder / "pics").mkdir(parents=True)
    (folder / "b.txt").write_text("bravo")
    (folder / "a.json").write_text('{"answer": 42}')
    (folder / "pics" / "2.png").write_bytes(b"second")
    (folder / "pics" / "1.jpg").write_bytes(b"first")
    (folder / "pics" / "notes.txt").write_text("not an image: skipped")
    return folder


def test_one_input_every_output_format(srv: ServerInfo, inputs: Path, capsys) -> None:
    doc = str(inputs / "a.json")
    r = run_mmsctl(capsys, "predict", "echo", doc, "--context", "srv", "-o", "json")
    # sent as application/json, so the handler got it parsed and answered a dict (MMS then indents it)
    assert (r.code, r.stderr, json.loads(r.stdout)) == (0, "", {"answer": 42})
    r = run_mmsctl(capsys, "predict", "echo", doc, "--context", "srv", "-o", "yaml")
    assert r.code == 0 and yaml.safe_load(r.stdout) == {"answer": 42}
    r = run_mmsctl(capsys, "predict", "echo", doc, "--context", "srv", "-o", "jsonl")
    assert r.code == 0 and json.loads(r.stdout) == {"input": doc, "status": 200, "result": {"answer": 42}}
    r = run_mmsctl(capsys, "predict", "echo", str(inputs / "b.txt"), "--context", "srv")
    lines = r.stdout.splitlines()
    # not a classification: the answer as it is, not under RANK/CLASS/PROBABILITY
    assert r.code == 0 and lines[0].split() == ["INPUT", "RESULT"]
    assert lines[1].split() == [str(inputs / "b.txt"), "bravo"]
    # the root flag names the server as well as the command's own
    r = run_mmsctl(capsys, "--context", "srv", "predict", "echo", str(inputs / "b.txt"), "-o", "json",
                   "--model-version", "1.0")
    assert (r.code, r.stdout) == (0, "bravo\n"), r.stderr


def test_timeout_bounds_each_remote_answer(srv: ServerInfo, tmp_path: Path, capsys) -> None:
    slow = tmp_path / "slow.txt"
    slow.write_text("sleep:1.5")
    r = run_mmsctl(capsys, "predict", "echo", str(slow), "--context", "srv", "--timeout", "0.3")
    assert r.code == 7, r.stderr
    assert "0.3" in one_error_line(r) or "timed out" in one_error_line(r)
    r = run_mmsctl(capsys, "predict", "echo", str(slow), "--context", "srv", "--timeout", "10", "-o", "json")
    assert (r.code, r.stdout) == (0, "sleep:1.5\n"), r.stderr


def test_folders_and_stdin(srv: ServerInfo, inputs: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    pics = inputs / "pics"
    r = run_mmsctl(capsys, "predict", "echo", str(pics), str(inputs / "b.txt"), "--context", "srv", "-o", "json")
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout) == [  # a folder's images, sorted, then the next argument
        {"input": str(pics / "1.jpg"), "status": 200, "result": "first"},
        {"input": str(pics / "2.png"), "status": 200, "result": "second"},
        {"input": str(inputs / "b.txt"), "status": 200, "result": "bravo"},
    ]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"from stdin")))
    r = run_mmsctl(capsys, "predict", "echo", "-", "--context", "srv", "-o", "json")
    assert (r.code, r.stdout) == (0, "from stdin\n"), r.stderr


def test_exit_codes(srv: ServerInfo, inputs: Path, capsys, tmp_path: Path) -> None:
    host = srv.inference_url.removeprefix("http://")
    doc = str(inputs / "a.json")
    r = run_mmsctl(capsys, "predict", "ghost", doc, "--context", "srv")
    assert (r.code, r.stdout) == (3, "") and one_error_line(r) == f"error: model ghost not found on {host}"
    r = run_mmsctl(capsys, "predict", "echo", str(tmp_path / "nope.jpg"), "--context", "srv")
    assert r.code == 3 and "nope.jpg" in one_error_line(r)

    r = run_mmsctl(capsys, "predict", "echo", doc, str(tmp_path / "nope.jpg"), "--context", "srv", "-o", "json")
    assert r.code == 4 and r.stderr.splitlines()[-1] == "error: 1 of 2 inputs failed"
    ok, failed = json.loads(r.stdout)
    assert (ok["status"], ok["result"], failed["input"]) == (200, {"answer": 42}, str(tmp_path / "nope.jpg"))

    dead = f"http://127.0.0.1:{free_port()}"
    run_mmsctl(capsys, "context", "add", "dead", "--inference", dead, "--management", dead)
    r = run_mmsctl(capsys, "predict", "echo", doc, "--context", "dead")
    assert r.code == 5 and "cannot connect to" in one_error_line(r)

    wrong = tmp_path / "wrong-token"
    wrong.write_text("nope")
    run_mmsctl(capsys, "context", "add", "wrong", "--inference", srv.inference_url,
               "--management", srv.management_url, "--token-file", str(wrong))
    r = run_mmsctl(capsys, "predict", "echo", doc, str(inputs / "b.txt"), "--context", "wrong")
    assert (r.code, r.stdout) == (6, "") and one_error_line(r).startswith(f"error: authentication failed on {host}")

    r = run_mmsctl(capsys, "predict", "crashy", str(_write(tmp_path / "crash.txt", "crash")), "--context", "srv")
    assert r.code == 8 and r.stdout == "" and host in one_error_line(r)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
