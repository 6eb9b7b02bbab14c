"""The lean `mmsctl predict` (mmsctl/cli/lean.py): a warm server's answers without typer, rich or httpx,
printed exactly as the full CLI prints them, and the full CLI wherever the lean path is not sure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator, Optional

import pytest

from mmsctl.archive import create_archive
from tests.support.cli import run_here
from tests.support.mmsctl_server import NOOP_HANDLER, ServerInfo, make_handler_archive, running_mmsctl_server

LEAN_LINE = "(lean path)"
SERVER_LINE = "predict: sent to the local server"
LOCAL_LINE = "predict: in-process"
CLASSES = [{"class": "n02124075 Egyptian cat", "probability": 0.4694}, {"class": "n02127052 lynx", "probability": 0.3992}]


#: The echo handler, and an exception for the input "fail".
HANDLER = NOOP_HANDLER.replace('        if body == "crash":', '        if body == "fail":\n            raise ValueError("this input fails")\n'
                               '        if body == "crash":')


def _mar(tmp: Path, extra: str = "") -> Path:
    folder = make_handler_archive(tmp / "noop-src", HANDLER, name="noop")
    if extra:
        (folder / "extra.txt").write_text(extra)  # another file: another archive
    create_archive(folder, model_name="noop", handler="noop_service:handle", export_path=tmp, force=True)
    return tmp / "noop.mar"


def mmsctl(*args: str, lean: bool = True, env: Optional[dict[str, str]] = None) -> subprocess.CompletedProcess[str]:
    """The console entry in a fresh process (``python -m mmsctl`` runs it as the ``mmsctl`` script does); with
    *lean* False, the full CLI that the entry hands over to, run in this process (no interpreter to start)."""
    if not lean:
        return run_here(*args, env={**(env or {}), "MMSCTL_NO_LEAN": "1"})
    return subprocess.run([sys.executable, "-m", "mmsctl", *args], capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})), timeout=120)


@pytest.fixture()
def images(tmp_path: Path) -> Path:
    """A folder of "images" the echo handler answers as they are: two class lists."""
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "a.jpg").write_text(json.dumps(CLASSES))
    (folder / "b.png").write_text(json.dumps(CLASSES[::-1]))
    (folder / "notes.txt").write_text("not an image: a folder argument leaves it out")
    return folder


@pytest.fixture()
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
           request: pytest.FixtureRequest) -> Iterator[tuple[ServerInfo, Path]]:
    mar = _mar(tmp_path)
    with running_mmsctl_server(tmp_path / "srv", models={"echo": str(mar)}, workers=2,
                               token=getattr(request, "param", None)) as srv:
        monkeypatch.setenv("MMSCTL_STATE_DIR", str(srv.state_dir))
        yield srv, mar


PROBE = """
import json, sys
from mmsctl.cli.lean import run_lean
code = run_lean(sys.argv[1:])
print(json.dumps([code, sorted(m for m in sys.modules if m.split('.')[0] in
      ("typer", "click", "rich", "httpx", "mxnet", "numpy", "PIL", "psutil", "yaml",
       "dataclasses", "inspect"))]), file=sys.stderr)
"""
# dataclasses (with inspect, ~20 ms of import) would be an eighth of a warm one-image run: the modules on
# this path keep their records in NamedTuples.


@pytest.mark.slow
def test_the_lean_path_prints_what_the_full_path_and_local_print(served: tuple[ServerInfo, Path], images: Path) -> None:
    _, mar = served
    first = mmsctl("predict", str(mar), str(images / "a.jpg"), "-v")  # works MODEL out, remembers it
    assert first.returncode == 0 and SERVER_LINE in first.stderr and LEAN_LINE not in first.stderr, first.stderr
    one, several = [str(images / "a.jpg")], [str(images), str(images / "notes.txt")]
    cases = [(one, fmt) for fmt in ("table", "wide", "json", "jsonl", "yaml")]
    cases += [(several, fmt) for fmt in ("wide", "json", "jsonl", "yaml")] + [([str(images / "b.png"), "-k", "1"], "table")]
    for inputs, fmt in cases:
        args = ["predict", str(mar), *inputs, "-o", fmt, "-v"]
        lean, full = mmsctl(*args), mmsctl(*args, lean=False)
        assert LEAN_LINE in lean.stderr and SERVER_LINE in full.stderr and LEAN_LINE not in full.stderr, \
            (lean.stderr, full.stderr)
        assert (lean.returncode, lean.stdout) == (full.returncode, full.stdout) == (0, full.stdout), (fmt, inputs)
        assert full.stdout.strip()
    local = mmsctl("predict", str(mar), *several, "-o", "wide", "--local", "-v")
    assert LOCAL_LINE in local.stderr and local.stdout == mmsctl("predict", str(mar), *several, "-o", "wide").stdout
    table = mmsctl("predict", str(mar), *several).stdout.splitlines()
    assert table[0].split() == ["INPUT", "RESULT"] and len(table) == 1 + 3
    assert "notes.txt" in table[-1] and "not an image" in table[-1]  # not a class list: answers one line each
    probe = subprocess.run([sys.executable, "-c", PROBE, "predict", str(mar), *several, "-o", "jsonl"],
                           capture_output=True, text=True, timeout=60)
    code, heavy = json.loads(probe.stderr.strip().splitlines()[-1])
    assert (code, heavy) == (0, []) and probe.stdout == mmsctl("predict", str(mar), *several, "-o", "jsonl").stdout
    # What the lean path does not serve goes to the full path, which says why.
    assert LEAN_LINE not in mmsctl("predict", str(mar), str(images / "a.jpg"), "--local", "-v").stderr
    handler = mmsctl("predict", str(mar), str(images / "a.jpg"), "--handler", "noop_service:handle", "-v")
    assert handler.returncode == 0 and LOCAL_LINE in handler.stderr
    missing = mmsctl("predict", str(mar), str(images / "a.jpg"), str(images / "gone.jpg"), "-o", "jsonl")
    assert missing.returncode == 4 and "gone.jpg: no such file" in missing.stderr
    assert missing.stdout.count("\n") == 2
    (images / "fail.jpg").write_text("fail")  # the server answers an error: the full path reports it, as always
    failing = [str(mar), str(images / "a.jpg"), str(images / "fail.jpg"), "-o", "jsonl"]
    lean, full = mmsctl("predict", *failing), mmsctl("predict", *failing, lean=False)
    assert (lean.returncode, lean.stdout, lean.stderr) == (full.returncode, full.stdout, full.stderr)
    assert lean.returncode == 4 and "fail.jpg" in lean.stderr, lean.stderr


def test_another_archive_and_a_stopped_server_run_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           images: Path) -> None:
    mar = _mar(tmp_path)
    other = _mar(tmp_path / "other", extra="not the served one")
    with running_mmsctl_server(tmp_path / "srv", models={"echo": str(mar)}) as srv:
        monkeypatch.setenv("MMSCTL_STATE_DIR", str(srv.state_dir))
        for model in (mar, other):
            mmsctl("predict", str(model), str(images / "a.jpg"), lean=False)  # both worked out and remembered
        assert LEAN_LINE in mmsctl("predict", str(mar), str(images / "a.jpg"), "-v").stderr
        done = mmsctl("predict", str(other), str(images / "a.jpg"), "-o", "json", "-v")
        assert done.returncode == 0 and LOCAL_LINE in done.stderr and json.loads(done.stdout) == CLASSES
    gone = mmsctl("predict", str(mar), str(images / "a.jpg"), "-o", "json", "-v")
    assert gone.returncode == 0 and LOCAL_LINE in gone.stderr and json.loads(gone.stdout) == CLASSES


@pytest.mark.parametrize("served", ["s3cret-token"], indirect=True)
def test_a_server_with_a_token_is_used_with_its_token(served: tuple[ServerInfo, Path], tmp_path: Path) -> None:
    srv, mar = served
    (tmp_path / "pid.jpg").write_text("pid")
    mmsctl("predict", str(mar), str(tmp_path / "pid.jpg"), lean=False)
    done = mmsctl("predict", str(mar), str(tmp_path / "pid.jpg"), "-o", "json", "-v")
    assert done.returncode == 0 and LEAN_LINE in done.stderr, done.stderr
    workers = json.loads(subprocess.run(
        [sys.executable, "-c", "import httpx, sys; print(httpx.get(sys.argv[1], headers={'Authorization': "
         "'Bearer s3cret-token'}, timeout=10).text)", f"{srv.management_url}/models/echo"],
        capture_output=True, text=True, timeout=60).stdout)
    workers = workers[0] if isinstance(workers, list) else workers
    assert done.stdout.strip() in {str(w["pid"]) for w in workers["workers"]}  # the server's worker answered


def test_a_batching_model_gets_enough_images_in_flight_to_fill_its_batches(served: tuple[ServerInfo, Path]) -> None:
    """`predict DIR` keeps two batches per worker in flight (one running, one filling): four images for two
    workers that take one at a time, eight for one worker that batches four; what the management API says
    is bounded, and without it the count comes from this machine's cores."""
    import httpx

    from mmsctl.local_servers import running_instances
    from mmsctl.predict.warm import WarmTarget
    from mmsctl.predict.warm_client import _MAX_IN_FLIGHT, _in_flight

    srv, mar = served
    state = running_instances()[0]  # the fixture points MMSCTL_STATE_DIR at the server's
    assert _in_flight(WarmTarget(state, "echo"), 10) == 2 * 2
    registered = httpx.post(f"{srv.management_url}/models", params={
        "url": str(mar), "model_name": "batched", "batch_size": 4, "max_batch_delay": 5, "initial_workers": 1,
        "synchronous": "true"}, timeout=60)
    assert registered.status_code == 200, registered.text
    assert _in_flight(WarmTarget(state, "batched"), 10) == 1 * 2 * 4
    assert _in_flight(WarmTarget(state, "ghost"), 10) == min(2 * (os.cpu_count() or 1), _MAX_IN_FLIGHT)  # 404
    big = httpx.post(f"{srv.management_url}/models", params={
        "url": str(mar), "model_name": "big", "batch_size": 40, "initial_workers": 1, "synchronous": "true"},
        timeout=60)  # 1 worker x 2 x 40 = 80 would be wanted: the ceiling holds
    assert big.status_code == 200, big.text
    assert _in_flight(WarmTarget(state, "big"), 10) == _MAX_IN_FLIGHT == 64
