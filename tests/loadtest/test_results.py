"""The saved-run format: round trip, peak goodput, and clear errors for files that are not runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmsctl.loadtest.results import BenchRun, Level, Sweep, load_run, save_run
from mmsctl.errors import InputNotFoundError, UsageError


def _run() -> BenchRun:
    levels = [Level(concurrency=1, duration_s=2.0, sent=100, ok=100), Level(concurrency=10, duration_s=2.0, sent=500, ok=450,
                                                                             errors={"503": 50})]
    return BenchRun(sweeps=[Sweep(target="local", url="http://127.0.0.1:8080", model="noop", levels=levels),
                            Sweep(target="old", url="http://127.0.0.1:9080", model="noop",
                                  levels=[Level(concurrency=1, duration_s=1.0, sent=30, ok=30)])])


def test_round_trip_keeps_every_figure(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    save_run(_run(), path)
    again = load_run(path)
    assert again == _run()
    assert again.sweeps[0].levels[1].success_rate == pytest.approx(0.9)


def test_peak_goodput_overall_and_per_target() -> None:
    run = _run()
    assert run.peak_goodput() == pytest.approx(225.0)
    assert run.peak_goodput("old") == pytest.approx(30.0)
    with pytest.raises(UsageError, match="no sweep for 'nope'"):
        run.peak_goodput("nope")


@pytest.mark.parametrize("content, message", [
    ("{not json", "cannot read bench file"),
    (json.dumps({"format": "other"}), "not a saved mmsctl bench run"),
    (json.dumps({"format": "mmsctl-bench", "version": 99}), "version 99"),
    (json.dumps({"format": "mmsctl-bench", "version": 1, "sweeps": [{"nope": 1}]}), "malformed"),
])
def test_files_that_are_not_runs_are_refused(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(content)
    with pytest.raises(UsageError, match=message):
        load_run(path)


def test_missing_file_is_not_found(tmp_path: Path) -> None:
    """Exit 3, as every missing input file (docs/cli.md)."""
    with pytest.raises(InputNotFoundError, match="not found"):
        load_run(tmp_path / "absent.json")
