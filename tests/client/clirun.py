"""Run the real ``mmsctl`` entry point in-process and capture what it printed and its exit code."""

from __future__ import annotations

from dataclasses import dataclass

import pytest


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str


def invoke(capsys: pytest.CaptureFixture[str], *args: str) -> CliResult:
    from mmsctl.cli.main import run

    capsys.readouterr()
    code = 0
    try:
        run(list(args))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out, err = capsys.readouterr()
    return CliResult(code, out, err)
