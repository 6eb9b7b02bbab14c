"""`mmsctl fleet cost` without AWS: instance prices × counts + the balancer, and throughput from
`--throughput` or a saved `mmsctl bench` run (mmsctl.loadtest.results)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmsctl.loadtest.results import BenchRun, Level, Sweep, save_run
from mmsctl.cloud.aws.prices import balancer_price, bundled_prices, fleet_estimate
from mmsctl.errors import UsageError
from tests.support.cli import run_mmsctl
from tests.support.cli import one_error_line


def _run(path: Path, *sweeps: Sweep) -> Path:
    save_run(BenchRun(sweeps=list(sweeps)), path)
    return path


def _sweep(target: str, *oks: int) -> Sweep:
    return Sweep(target, f"http://{target}:8080", "squeezenet",
                 levels=[Level(concurrency=2 ** i, duration_s=20.0, sent=ok + 5, ok=ok) for i, ok in enumerate(oks)])


def test_fleet_estimate_scales_instances_not_the_balancer() -> None:
    rows = fleet_estimate("m5.large", 19.08, [4, 1, 4], accelerator="eia1.medium")
    assert [r.instances for r in rows] == [1, 4]
    one = bundled_prices()["instances"]["m5.large"] + bundled_prices()["accelerators"]["eia1.medium"]
    assert balancer_price() == 0.0225
    assert rows[1].hourly_price == pytest.approx(4 * one + 0.0225)
    assert rows[1].throughput == pytest.approx(4 * 19.08)
    assert rows[1].cost_per_100k == pytest.approx((4 * one + 0.0225) / (4 * 19.08 * 3600) * 1e5)
    # The balancer's fixed price weighs less as the fleet grows.
    assert rows[1].cost_per_100k < rows[0].cost_per_100k
    with pytest.raises(UsageError, match="instance counts must be 1 to 1000, not 0"):
        fleet_estimate("m5.large", 1.0, [0])
    with pytest.raises(UsageError, match="no bundled price for z9.huge"):
        fleet_estimate("z9.huge", 1.0, [1])


def test_cost_from_throughput_and_from_a_bench_run(capsys, tmp_path: Path) -> None:
    r = run_mmsctl(capsys, "fleet", "cost", "--instance-type", "c5.xlarge", "--count", "1", "--count", "10",
                   "--throughput", "20", "-o", "json")
    assert r.code == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [(x["instances"], x["throughput"]) for x in rows] == [(1, 20.0), (10, 200.0)]
    assert [x["monthly_price"] for x in rows] == pytest.approx([(0.17 + 0.0225) * 730, (1.7 + 0.0225) * 730], abs=0.01)
    # A --compare run: the peak of the sweep asked for (25 ok in 20 s = 1.25 req/s; 60 → 3).
    run = _run(tmp_path / "run.json", _sweep("ours", 10, 25), _sweep("mms", 60, 40))
    r = run_mmsctl(capsys, "fleet", "cost", "--instance-type", "c5.xlarge", "--count", "2", "--from-bench", str(run),
                   "--bench-target", "ours", "-o", "json")
    assert r.code == 0 and json.loads(r.stdout)[0]["throughput_per_instance"] == 1.25
    r = run_mmsctl(capsys, "fleet", "cost", "--instance-type", "c5.xlarge", "--count", "2", "--from-bench", str(run))
    assert r.code == 0
    lines = r.stdout.splitlines()
    assert lines[0].split()[:2] == ["INSTANCES", "SETUP"] and lines[1].split()[:2] == ["2", "c5.xlarge"]
    assert "3.00 req/s per instance" in r.stderr and "$0.0225/h for the load balancer" in r.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--instance-type", "c5.xlarge", "--count", "2"], "pass --from-bench FILE or --throughput RPS"),
        (["--instance-type", "c5.xlarge", "--throughput", "1", "--from-bench", "x.json"],
         "pass --from-bench FILE or --throughput RPS"),
        (["--throughput", "5"], "pass a fleet NAME, or --instance-type and --count"),
        (["--instance-type", "c5.xlarge", "--throughput", "-1"], "throughput must be a positive number of requests per second (--throughput)"),
    ],
)
def test_cost_errors_are_one_line(capsys, args: list[str], message: str) -> None:
    r = run_mmsctl(capsys, "fleet", "cost", *args)
    assert r.code == 2
    assert message in one_error_line(r)


def test_a_bench_run_with_nothing_served_is_refused(capsys, tmp_path: Path) -> None:
    run = _run(tmp_path / "zero.json", _sweep("ours", 0))
    r = run_mmsctl(capsys, "fleet", "cost", "--instance-type", "c5.xlarge", "--from-bench", str(run))
    assert r.code == 2 and "no successful requests" in one_error_line(r)
    other = tmp_path / "other.json"
    other.write_text('{"format": "something-else"}')
    r = run_mmsctl(capsys, "fleet", "cost", "--instance-type", "c5.xlarge", "--from-bench", str(other))
    assert r.code == 2 and "not a saved mmsctl bench run" in one_error_line(r)


def test_user_data_listens_for_management_on_the_private_address(capsys, monkeypatch) -> None:
    from mmsctl.cloud.instance import userdata

    specs = []
    render = userdata.render_user_data
    monkeypatch.setattr(userdata, "render_user_data", lambda spec: specs.append(spec) or render(spec))
    r = run_mmsctl(capsys, "fleet", "user-data", "-m", "squeezenet")
    assert r.code == 0
    # what the launch template carries: the boot completes its group's launch hook
    hook = specs[0].lifecycle_hook
    assert (hook.group, hook.name) == ("mmsctl-fleet-<name>", "mmsctl-server-ready")
    assert "--management-address http://0.0.0.0:8081" in r.stdout
    assert "--models squeezenet=/opt/mmsctl/assets/models/squeezenet.mar" in r.stdout  # from the asset bucket
    ec2 = run_mmsctl(capsys, "ec2", "user-data", "-m", "squeezenet")
    assert "--management-address http://127.0.0.1:8081" in ec2.stdout  # a single instance keeps it on loopback
    assert specs[-1].lifecycle_hook is None  # and is no group's member
