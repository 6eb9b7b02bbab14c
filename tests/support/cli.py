"""Run the real ``mmsctl`` entry point in-process, and read what it said, for CLI tests.

    code, out, err = run_mmsctl(capsys, "zoo", "list", "-o", "json")
    assert one_error_line(run_mmsctl(capsys, "predict", "nope")) == "error: …"
    run_mmsctl(capsys, "predict", "model", "-", stdin=png)   # "-" reads these bytes

In-process is fast (no interpreter start) and exercises exactly what the console
script runs: ``mmsctl.cli.main.run``, including its error-to-exit-code mapping.
"""

from __future__ import annotations

import io
import sys
from typing import NamedTuple, Optional, Protocol

import pytest

__all__ = ["CliResult", "one_error_line", "run_mmsctl"]


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


def one_error_line(result: _HasStderr) -> str:
    """The ``error: …`` line of a failed run, after checking stderr holds only it and ``hint:`` lines."""
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert lines and lines[0].startswith("error: ") and all(x.startswith("hint: ") for x in lines[1:]), result.stderr
    return lines[0]
