"""`mmsctl --help`, `--version` and help pages must not import heavy libraries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("mxnet", "numpy", "PIL", "textual", "boto3", "botocore", "httpx", "aiohttp")

PROBE = """
import sys, json
from mmsctl.cli.main import run
try:
    run(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(m for m, module in sys.modules.items() if module is not None and m.split('.')[0] in %r)),
      file=sys.stderr)  # (None: an import blocked on purpose, as httpx._main is)
""" % (HEAVY,)

#: Many command lines in one process: it imports the console entry (checked light first), then runs each line
#: in a child forked from it, which reports what it loaded. A fork is ~0.2 CPU s cheaper than a fresh
#: interpreter importing the entry again, and each line still starts from the same light state.
FORKING_PROBE = """
import json, os, sys
heavy = %r
def loaded():
    return sorted(m for m, module in sys.modules.items() if module is not None and m.split('.')[0] in heavy)
from mmsctl.cli.main import run
before = loaded()
answers = []
for args in json.loads(sys.argv[1]):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        quiet = os.open(os.devnull, os.O_WRONLY)
        os.dup2(quiet, 1)
        os.dup2(quiet, 2)
        code = 1
        try:
            try:
                run(args)
            except SystemExit:
                pass
            os.write(write, json.dumps(loaded()).encode())
            code = 0
        finally:
            os._exit(code)  # never back into the loop, whatever run() raised
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        answer = pipe.read()
    _, status = os.waitpid(pid, 0)
    answers.append(json.loads(answer) if status == 0 and answer else ["(the child failed: %%d)" %% status])
print(json.dumps({"entry": before, "answers": answers}))
""" % (HEAVY,)


def _help_pages() -> list[list[str]]:
    from mmsctl.cli.main import app
    import typer.main

    group = typer.main.get_command(app)
    names = list(group.commands)  # type: ignore[attr-defined]
    assert names, "no commands registered"
    return [[name, "--help"] for name in names]


ROOT = [["--help"], ["--version"]]
FLEET = [["fleet", "--help"], ["fleet", "create", "--help"], ["fleet", "cost", "--help"], ["context", "add", "--help"]]
LAMBDA = [["lambda", command, "--help"] for command in ("build", "deploy", "invoke", "logs", "list", "describe",
                                                         "destroy", "run-local", "cost")]
LAMBDA_COST = ["lambda", "cost", "--duration-ms", "100"]
SAGEMAKER = [["sagemaker", command, "--help"] for command in ("deploy", "update", "invoke", "describe", "list",
                                                               "destroy", "run-local", "cost")]
SAGEMAKER_COST = ["sagemaker", "cost", "--duration-ms", "45"]


@pytest.fixture(scope="module")
def heavy_by_line() -> dict[tuple[str, ...], list[str]]:
    """What each command line of this module loads of HEAVY, all lines run by one FORKING_PROBE."""
    lines = ROOT + _help_pages() + FLEET + LAMBDA + [LAMBDA_COST] + SAGEMAKER + [SAGEMAKER_COST]
    proc = subprocess.run([sys.executable, "-c", FORKING_PROBE, json.dumps(lines)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert doc["entry"] == [], doc["entry"]  # the console entry itself is light, so each line starts light
    assert len(doc["answers"]) == len(lines)
    return {tuple(line): answer for line, answer in zip(lines, doc["answers"])}


def test_the_forking_probe_sees_what_a_line_imports() -> None:
    """The probe is not blind: a line that loads a heavy module is reported with it (boto3, for the AWS call
    `lambda list` makes before it can fail), next to a light one."""
    env = {**os.environ, "AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_ACCESS_KEY_ID": "x",
           "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1", "AWS_MAX_ATTEMPTS": "1",
           "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}
    proc = subprocess.run([sys.executable, "-c", FORKING_PROBE, json.dumps([["lambda", "list"], ["--version"]])],
                          capture_output=True, text=True, timeout=120, env=env)
    heavy, light = json.loads(proc.stdout.strip().splitlines()[-1])["answers"]
    assert "boto3" in heavy and light == []


@pytest.mark.parametrize("args", ROOT, ids=" ".join)
def test_root_is_light(args: list[str], heavy_by_line: dict[tuple[str, ...], list[str]]) -> None:
    assert heavy_by_line[tuple(args)] == []


def test_every_help_page_is_light(heavy_by_line: dict[tuple[str, ...], list[str]]) -> None:
    pages = _help_pages()
    assert len(pages) > 10
    for page in pages:
        assert heavy_by_line[tuple(page)] == [], page


def test_version_prints_version() -> None:
    from mmsctl import __version__

    proc = subprocess.run(
        [sys.executable, "-m", "mmsctl", "--version"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"mmsctl {__version__}"


@pytest.mark.parametrize("args", FLEET, ids=" ".join)
def test_fleet_help_does_not_import_boto3(args: list[str], heavy_by_line: dict[tuple[str, ...], list[str]]) -> None:
    assert heavy_by_line[tuple(args)] == []


@pytest.mark.parametrize("args", LAMBDA, ids=" ".join)
def test_lambda_help_pages_are_light(args: list[str], heavy_by_line: dict[tuple[str, ...], list[str]]) -> None:
    assert heavy_by_line[tuple(args)] == []


def test_lambda_cost_needs_no_boto3_or_mxnet(heavy_by_line: dict[tuple[str, ...], list[str]]) -> None:
    assert heavy_by_line[tuple(LAMBDA_COST)] == []


@pytest.mark.parametrize("args", [*SAGEMAKER, SAGEMAKER_COST], ids=" ".join)
def test_sagemaker_help_pages_and_cost_are_light(args: list[str],
                                                 heavy_by_line: dict[tuple[str, ...], list[str]]) -> None:
    assert heavy_by_line[tuple(args)] == []


LEAN_PROBE = """
import json, sys
from mmsctl.cli.lean import run_lean
code = run_lean(sys.argv[1:])
print(json.dumps([code, sorted(m for m in sys.modules if m.split('.')[0] in %r)]), file=sys.stderr)
""" % (HEAVY + ("typer", "click", "rich", "psutil", "dataclasses", "inspect"),)


def test_the_lean_predict_entry_is_light(tmp_path: Path) -> None:
    """The console entry looks at a `predict` line before typer and rich load (no server here: the full CLI's turn).
    tests/predict/test_warm_lean.py checks the same with a server that answers."""
    (tmp_path / "a.jpg").write_bytes(b"x")
    proc = subprocess.run([sys.executable, "-c", LEAN_PROBE, "predict", str(tmp_path / "m.mar"), str(tmp_path / "a.jpg")],
                          capture_output=True, text=True, timeout=60)
    assert json.loads(proc.stderr.strip().splitlines()[-1]) == [None, []], proc.stderr


def test_a_command_that_parses_options_stays_off_pydantic(tmp_path: Path) -> None:
    """typer 0.29 validates every option value through pydantic (importing it and building its adapters costs
    ~0.18 s of each command here); pyproject keeps typer below it, and this notices if that changes."""
    probe = PROBE.replace("%r" % (HEAVY,), "%r" % (("pydantic",),))
    proc = subprocess.run([sys.executable, "-c", probe, "serve", "status", "-o", "json"], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "MMSCTL_STATE_DIR": str(tmp_path)})
    assert json.loads(proc.stderr.strip().splitlines()[-1]) == []


HTTP_PROBE = """
import sys, json
from mmsctl.cli.main import run
try:
    run(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
import httpx
print(json.dumps([code, callable(httpx.main), sorted(m for m, module in sys.modules.items() if module is not None
      and (m.split('.')[0] in ('click', 'pygments') or m == 'httpx._main' or m.startswith('rich.syntax')))]),
      file=sys.stderr)
"""


def test_a_command_that_talks_http_leaves_httpx_own_cli_unloaded(tmp_path: Path) -> None:
    """httpx imports its command-line client (click, pygments, rich.syntax: ~80 ms) unless told not to; the
    command still runs, through httpx, to its one-line error."""
    import socket

    with socket.socket() as sock:  # a port nothing listens on: connection refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "MMSCTL_CONFIG_DIR": str(tmp_path), "MMSCTL_MANAGEMENT_URL": f"http://127.0.0.1:{port}"}
    proc = subprocess.run([sys.executable, "-c", HTTP_PROBE, "models", "list"],
                          capture_output=True, text=True, timeout=60, env=env)
    code, stub, loaded = json.loads(proc.stderr.strip().splitlines()[-1])
    assert code not in (0, None) and "error: " in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert stub and loaded == [], proc.stderr
