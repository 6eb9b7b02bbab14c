"""Run the real ``mmsctl`` entry point in-process, and read what it said, for CLI tests.

    code, out, err = run_mmsctl(capsys, "zoo", "list", "-o", "json")
    assert one_error_line(run_mmsctl(capsys, "predict", "nope")) == "error: …"
    run_mmsctl(capsys, "predict", "model", "-", stdin=png)   # "-" reads these bytes

In-process is fast (no interpreter start) and exercises exactly what the console
script runs: ``mmsctl.cli.main.run``, including its error-to-exit-code mapping.
:func:`run_here` is the same for code written against ``subprocess.run``: it takes an
environment and a folder and returns a ``CompletedProcess``.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple, Optional, Protocol
from unittest import mock

import pytest

__all__ = ["CliResult", "one_error_line", "run_here", "run_mmsctl"]


class CliResult(NamedTuple):
    """Exit code and captured output; unpacks as ``code, out, err``."""

    code: int
    stdout: str
    stderr: str


class _HasStderr(Protocol):
    stderr: str


def run_mmsctl(capsys: pytest.CaptureFixture[str], *args: str, stdin: Optional[bytes] = None) -> CliResult:
    """Run ``mmsctl ARGS…`` (with *stdin* as its standard input when given); output printed
    before the call is dropped, not mixed in."""
    from mmsctl.cli.main import run

    capsys.readouterr()
    code = 0
    saved_stdin = sys.stdin
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
    try:
        run(list(args))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.stdin = saved_stdin
    out, err = capsys.readouterr()
    return CliResult(code, out, err)


def run_here(*args: str, env: Optional[dict[str, str]] = None, only_env: bool = False,
             cwd: Optional[Path] = None) -> "subprocess.CompletedProcess[str]":
    """``mmsctl ARGS`` as ``subprocess.run([python, "-m", "mmsctl", *args], env=…, cwd=…)`` would run it, in this
    process: *env* added to this process's environment (*only_env*: instead of it), in *cwd*, both restored after.
    A new interpreter costs 0.2–0.5 CPU s, one that then imports boto3 or mxnet a second or more."""
    from mmsctl.cli.main import run

    out, err, code = io.StringIO(), io.StringIO(), 0
    here = os.getcwd()
    with mock.patch.dict(os.environ, env or {}, clear=only_env), \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        if cwd is not None:
            os.chdir(cwd)
        try:
            run(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            os.chdir(here)
    return subprocess.CompletedProcess(["mmsctl", *args], code, out.getvalue(), err.getvalue())


def one_error_line(result: _HasStderr) -> str:
    """The ``error: …`` line of a failed run, after checking stderr holds only it and ``hint:`` lines."""
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert lines and lines[0].startswith("error: ") and all(x.startswith("hint: ") for x in lines[1:]), result.stderr
    return lines[0]
