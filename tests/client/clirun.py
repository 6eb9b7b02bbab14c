"""Run the real ``mmsctl`` entry point in-process (the shared runner, under the name these tests use)."""

from __future__ import annotations

from tests.support.cli import CliResult, run_mmsctl as invoke

__all__ = ["CliResult", "invoke"]
