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


def _heavy_modules(*args: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60
    )
    return json.loads(proc.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize("args", [["--help"], ["--version"]])
def test_root_is_light(args: list[str]) -> None:
    assert _heavy_modules(*args) == []


def test_every_help_page_is_light() -> None:
    from mmsctl.cli.main import app
    import typer.main

    group = typer.main.get_command(app)
    names = list(group.commands)  # type: ignore[attr-defined]
    assert names, "no commands registered"
    for name in names:
        assert _heavy_modules(name, "--help") == [], name


def test_version_prints_version() -> None:
    from mmsctl import __version__

    proc = subprocess.run(
        [sys.executable, "-m", "mmsctl", "--version"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"mmsctl {__version__}"


@pytest.mark.parametrize("args", [["fleet", "--help"], ["fleet", "create", "--help"], ["fleet", "cost", "--help"],
                                  ["context", "add", "--help"]])
def test_fleet_help_does_not_import_boto3(args: list[str]) -> None:
    assert _heavy_modules(*args) == []


@pytest.mark.parametrize("command", ["build", "deploy", "invoke", "logs", "list", "describe", "destroy",
                                     "run-local", "cost"])
def test_lambda_help_pages_are_light(command: str) -> None:
    assert _heavy_modules("lambda", command, "--help") == []


def test_lambda_cost_needs_no_boto3_or_mxnet() -> None:
    assert _heavy_modules("lambda", "cost", "--duration-ms", "100") == []


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
