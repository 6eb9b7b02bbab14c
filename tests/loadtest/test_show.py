"""Saved runs: `bench show` (one run, two runs), CSV, the chart, the --compare ratios, `ec2 cost --from-bench`."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from mmsctl.loadtest.chart import render_chart
from mmsctl.loadtest.report import compare_rows, level_rows, to_csv
from mmsctl.loadtest.results import BenchRun, Level, Sweep, save_run
from tests.support.cli import run_mmsctl


def _levels(scale: float, cut: bool = False) -> list[Level]:
    lat = {"p50": 2.0, "p90": 3.0, "p99": 5.0, "p99.9": 9.0, "max": 12.0}
    return [
        Level(concurrency=1, duration_s=10.0, sent=int(1000 * scale), ok=int(1000 * scale), latency_ms=lat),
        Level(concurrency=10, duration_s=10.0, sent=int(4000 * scale), ok=int(3900 * scale),
              errors={"503": int(80 * scale), "timeout": int(20 * scale)}, latency_ms={k: v * 4 for k, v in lat.items()},
              server={"queue_ms": 6.5, "inference_ms": 1.25}, complete=not cut),
    ]


def _run(target: str = "old", scale: float = 1.0, cut: bool = False) -> BenchRun:
    return BenchRun(sweeps=[Sweep(target=target, url="http://127.0.0.1:8080", model="noop", server_kind="mms",
                                  levels=_levels(scale, cut))], started="2026-01-01T00:00:00+00:00",
                    complete=not cut)


def test_rows_csv_and_ratios() -> None:
    run = _run()
    rows = level_rows(run)
    assert [r["level"] for r in rows] == ["1", "10"]
    assert rows[1]["success_pct"] == 97.5 and rows[1]["goodput"] == 390.0 and rows[1]["errors"] == "503:80 timeout:20"
    parsed = list(csv.DictReader(io.StringIO(to_csv(rows))))
    assert parsed[1]["server_queue_ms"] == "6.5" and parsed[0]["server_queue_ms"] == ""
    ratios = compare_rows(run.sweeps[0], _run("new", scale=2.0).sweeps[0])
    assert [(r["level"], r["goodput_ratio"], r["p99_ratio"]) for r in ratios] == [("1", 2.0, 1.0), ("10", 2.0, 1.0)]


def test_chart_has_a_bar_per_level_scaled_to_the_largest() -> None:
    text = render_chart(_run().sweeps, width=90)
    lines = text.splitlines()
    assert "goodput (ok req/s)" in lines[0] and "p99 latency (ms)" in lines[0] and lines[0].lstrip().startswith("clients")
    one, ten = lines[1], lines[2]
    assert one.lstrip().startswith("1 ") and ten.lstrip().startswith("10 ")
    # level 10 has the best goodput (390/s) and the worst p99 (20 ms): full bars; level 1's p99 is a quarter
    assert ten.count("█") > one.count("█")
    assert "390.0" in ten and "20.0" in ten and "97.5" in ten
    two = render_chart(_run().sweeps + _run("new", 2.0).sweeps, width=90)
    assert "░" in two and "█ old   ░ new" in two
    assert render_chart([]) == ""


def test_show_one_and_two_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    save_run(_run(), first)
    save_run(_run("new", scale=2.0), second)
    r = run_mmsctl(capsys, "bench", "show", str(first))
    assert r.code == 0, r.stderr
    assert "SRV QUEUE" in r.stdout and "6.50 ms" in r.stdout and "503:80 timeout:20" in r.stdout
    r = run_mmsctl(capsys, "bench", "show", str(first), str(second))
    assert r.code == 0 and "B/A: new against old" in r.stdout and "2.00x" in r.stdout
    data = json.loads(run_mmsctl(capsys, "bench", "show", str(first), str(second), "-o", "json").stdout)
    assert [s["target"] for s in data["sweeps"]] == ["old", "new"]


def test_show_warns_about_a_cut_run_and_refuses_other_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cut = tmp_path / "cut.json"
    save_run(_run(cut=True), cut)
    r = run_mmsctl(capsys, "bench", "show", str(cut))
    assert r.code == 0 and "cut short" in r.stderr and "10 (cut)" in r.stdout
    other = tmp_path / "other.json"
    other.write_text("{}")
    r = run_mmsctl(capsys, "bench", "show", str(other))
    assert r.code == 2 and "not a saved mmsctl bench run" in r.stderr


def test_ec2_cost_takes_the_peak_goodput_from_a_saved_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "run.json"
    run = _run()
    run.sweeps += _run("new", scale=2.0).sweeps
    save_run(run, path)
    r = run_mmsctl(capsys, "ec2", "cost", "--instance-type", "m5.large", "--from-bench", str(path), "-o", "json")
    assert r.code == 0, r.stderr
    (row,) = json.loads(r.stdout)
    assert row["throughput"] == pytest.approx(780.0)
    r = run_mmsctl(capsys, "ec2", "cost", "--instance-type", "m5.large", "--from-bench", str(path),
                   "--bench-target", "old", "-o", "json")
    assert json.loads(r.stdout)[0]["throughput"] == pytest.approx(390.0)
    r = run_mmsctl(capsys, "ec2", "cost", "--instance-type", "m5.large", "--from-bench", str(path),
                   "--throughput", "5")
    assert r.code == 2 and "not both" in r.stderr


def test_noop_archive_is_written_and_names_the_next_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import zipfile

    r = run_mmsctl(capsys, "bench", "noop-archive", str(tmp_path))
    assert r.code == 0, r.stderr
    path = Path(r.stdout.strip())
    assert path == tmp_path / "mmsctl-noop.mar"
    with zipfile.ZipFile(path) as zf:
        manifest = json.loads(zf.read("MAR-INF/MANIFEST.json"))
        assert manifest["model"]["handler"] == "noop_service:handle"
        assert "def handle(data, context)" in zf.read("noop_service.py").decode()
    assert "--noop-url mmsctl-noop.mar" in r.stderr
