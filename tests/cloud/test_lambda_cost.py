"""`mmsctl lambda cost`: Lambda's price per 100k requests, beside the EC2/EI table."""

from __future__ import annotations

import json

import pytest

from mmsctl.cloud.aws.prices import lambda_estimate
from mmsctl.errors import UsageError
from tests.support.cli import CliResult, run_mmsctl


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> CliResult:
    """``mmsctl lambda cost ARGS`` in this process (the console script's ``run()``), in this process's environment."""
    return run_mmsctl(capsys, "lambda", "cost", *args)


def test_gb_seconds_and_requests() -> None:
    # 1024 MB for 1180 ms (the source article's latency): 1.18 GB-s at $0.0000166667 + $0.20 per million
    row = lambda_estimate(1024, 1180)
    assert row.gb_seconds_per_request == pytest.approx(1.18)
    assert row.cost_per_request == pytest.approx(1.18 * 0.0000166667 + 0.0000002)
    assert round(row.cost_per_100k, 2) == 1.99
    # billed duration is rounded up to the millisecond; memory scales linearly
    assert lambda_estimate(2048, 100.2).gb_seconds_per_request == pytest.approx(2 * 0.101)
    assert lambda_estimate(128, 1, requests=1_000_000).total == pytest.approx(0.125 * 0.001 * 0.0000166667 * 1e6 + 0.2)
    for bad in ({"memory_mb": 64, "duration_ms": 10}, {"memory_mb": 1024, "duration_ms": 0},
                {"memory_mb": 1024, "duration_ms": 900_001}, {"memory_mb": 1024, "duration_ms": 10, "requests": 0}):
        with pytest.raises(UsageError):
            lambda_estimate(**bad)  # type: ignore[arg-type]


def test_lambda_sits_in_the_ec2_table(capsys: pytest.CaptureFixture[str]) -> None:
    proc = _cli(capsys, "--memory", "1024", "--duration-ms", "1180", "--table", "resnet152")
    assert proc.code == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.strip().splitlines()[1:]]
    assert [r[-1] for r in rows] == ["$0.59", "$0.33", "$0.47", "$2.05", "$1.99"]  # the published four, then Lambda
    assert rows[-1][:4] == ["lambda", "1024", "MB,", "1180"]

    data = json.loads(_cli(capsys, "--memory", "512", "--duration-ms", "40", "--requests", "1000000", "-o", "json").stdout)
    assert data == [{"setup": "lambda 512 MB, 40 ms", "memory_mb": 512, "duration_ms": 40.0, "requests": 1_000_000,
                     "gb_seconds_per_request": 0.02, "per_gb_second": 0.0000166667, "per_million_requests": 0.2,
                     "total": round(0.02 * 0.0000166667 * 1e6 + 0.2, 4),
                     "cost_per_100k": round((0.02 * 0.0000166667 + 0.0000002) * 1e5, 4),
                     "price_source": "bundled us-east-1 x86 (2024-04)"}]
    bad = _cli(capsys, "--memory", "20000", "--duration-ms", "10")
    assert bad.code == 2 and bad.stderr.startswith("error: memory 20000: Lambda allows 128-10240 MB (--memory)")
