"""A warm `predict`: a running local server that serves the very same archive answers instead of mxnet in-process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from mmsctl.archive import create_archive
from tests.support.cli import run_mmsctl
from tests.support.mmsctl_server import ServerInfo, make_noop_archive, running_mmsctl_server

SERVER_LINE = "predict: sent to the local server"
LOCAL_LINE = "predict: in-process"


def _mar(tmp: Path, name: str, extra: str = "") -> Path:
    folder = make_noop_archive(tmp / f"{name}-src", name=name)
    if extra:
        (folder / "extra.txt").write_text(extra)  # another file: another archive, another sha256
    create_archive(folder, model_name=name, handler="noop_service:handle", export_path=tmp, force=True)
    return tmp / f"{name}.mar"


@pytest.fixture()
def inputs(tmp_path: Path) -> dict[str, Path]:
    found = {}
    for word in ("hello", "pid", "world"):
        (tmp_path / f"{word}.txt").write_text(word)
        found[word] = tmp_path / f"{word}.txt"
    return found


@pytest.fixture()
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[tuple[ServerInfo, Path]]:
    token = getattr(request, "param", None)
    mar = _mar(tmp_path, "noop")
    with running_mmsctl_server(tmp_path / "srv", models={"echo": str(mar)}, token=token) as srv:
        monkeypatch.setenv("MMSCTL_STATE_DIR", str(srv.state_dir))  # where predict looks for local servers
        yield srv, mar


def _server_pid(srv: ServerInfo, token: str | None = None) -> str:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    body = httpx.get(f"{srv.management_url}/models/echo", headers=headers, timeout=10).json()
    body = body[0] if isinstance(body, list) else body
    return str(body["workers"][0]["pid"])


def test_the_same_archive_goes_to_the_server_with_the_same_output(
    capsys: pytest.CaptureFixture[str], served: tuple[ServerInfo, Path], inputs: dict[str, Path]
) -> None:
    srv, mar = served
    state = json.loads((srv.instance_dir / "state.json").read_text())
    assert state["served"]["echo"]["archive"] and state["served"]["echo"]["handler"] == "noop_service:handle"
    code, out, err = run_mmsctl(capsys, "predict", str(mar), str(inputs["pid"]), "-o", "json", "-v")
    assert code == 0 and SERVER_LINE in err, err
    assert out.strip() == _server_pid(srv)  # the server's worker answered
    for fmt in ("json", "jsonl", "table", "wide", "yaml"):
        args = ["predict", str(mar), str(inputs["hello"]), str(inputs["world"]), "-o", fmt]
        warm = run_mmsctl(capsys, *args, "-v")
        local = run_mmsctl(capsys, *args, "--local", "-v")
        assert SERVER_LINE in warm.stderr and LOCAL_LINE in local.stderr, (warm.stderr, local.stderr)
        assert f"{LOCAL_LINE} (--local)" in local.stderr  # the reason, not "no server serves it": one does
        assert (warm.code, warm.stdout) == (local.code, local.stdout), fmt
    missing = str(inputs["hello"].with_name("missing.txt"))
    warm = run_mmsctl(capsys, "predict", str(mar), str(inputs["hello"]), missing, "-o", "jsonl")
    local = run_mmsctl(capsys, "predict", str(mar), str(inputs["hello"]), missing, "-o", "jsonl", "--local")
    assert warm.code == local.code != 0 and warm.stdout == local.stdout and warm.stderr == local.stderr


def test_another_archive_runs_in_process(
    capsys: pytest.CaptureFixture[str], served: tuple[ServerInfo, Path], inputs: dict[str, Path], tmp_path: Path
) -> None:
    srv, _ = served
    other = _mar(tmp_path / "other", "noop", extra="not the served one")
    code, out, err = run_mmsctl(capsys, "predict", str(other), str(inputs["pid"]), "-o", "json", "-v")
    assert code == 0 and f"{LOCAL_LINE} (no running local server serves this archive)" in err, err
    assert out.strip() != _server_pid(srv)
    topk = run_mmsctl(capsys, "predict", str(other), str(inputs["pid"]), "-k", "6", "-v")
    assert f"{LOCAL_LINE} (--top-k 6: a server answers at most 5 classes)" in topk.stderr, topk.stderr


@pytest.mark.parametrize("served", ["s3cret-token"], indirect=True)
def test_a_server_with_a_token_is_used_with_its_token(
    capsys: pytest.CaptureFixture[str], served: tuple[ServerInfo, Path], inputs: dict[str, Path]
) -> None:
    srv, mar = served
    assert httpx.post(f"{srv.inference_url}/predictions/echo", content=b"x", timeout=10).status_code == 401
    code, out, err = run_mmsctl(capsys, "predict", str(mar), str(inputs["pid"]), "-o", "json", "-v")
    assert code == 0 and SERVER_LINE in err, err
    assert out.strip() == _server_pid(srv, "s3cret-token")


PROBE = """
import sys, json
from mmsctl.cli.main import run
try:
    run(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ("mxnet", "numpy", "PIL"))), file=sys.stderr)
"""


def test_the_warm_path_imports_no_mxnet_or_numpy(served: tuple[ServerInfo, Path], inputs: dict[str, Path]) -> None:
    import os

    srv, mar = served
    proc = subprocess.run([sys.executable, "-c", PROBE, "predict", str(mar), str(inputs["hello"]), "-v"],
                          capture_output=True, text=True, timeout=60, env=dict(os.environ))
    assert SERVER_LINE in proc.stderr, proc.stderr
    assert json.loads(proc.stderr.strip().splitlines()[-1]) == []


def test_a_run_that_would_choose_other_kernels_than_the_servers_workers_runs_in_process(
    capsys: pytest.CaptureFixture[str], served: tuple[ServerInfo, Path], inputs: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    srv, mar = served
    monkeypatch.setenv("MMSCTL_MKLDNN", "0")  # this run would switch MKL-DNN off; the server's workers have it on
    code, out, err = run_mmsctl(capsys, "predict", str(mar), str(inputs["pid"]), "-o", "json", "-v")
    assert code == 0 and SERVER_LINE not in err, err
    assert f"{LOCAL_LINE} (the local server {srv.instance_dir.name} serves this archive as echo with another " \
           "kernel set than this process would choose (MKL-DNN off here))" in err, err
    assert out.strip() != _server_pid(srv)
