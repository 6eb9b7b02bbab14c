"""`mmsctl ec2 cost`: the published ResNet-152 table, single estimates, and live prices through the Pricing API."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest

from mmsctl.cloud.aws.prices import cost_per_100k, estimate, parse_price_list, table
from mmsctl.errors import UsageError
from tests.support.cli import CliResult, run_mmsctl


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> CliResult:
    """``mmsctl ec2 cost ARGS`` in this process (the console script's ``run()``), in this process's environment."""
    return run_mmsctl(capsys, "ec2", "cost", *args)


def test_resnet152_table_reproduces_the_published_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    proc = _cli(capsys, "--table", "resnet152")
    assert proc.code == 0, proc.stderr
    lines = [line.split() for line in proc.stdout.strip().splitlines()[1:]]
    assert [(" ".join(line[:-4]), line[-4], line[-3], line[-1]) for line in lines] == [
        ("m5.large", "$0.096/h", "4.50", "$0.59"),
        ("m5.large + eia1.medium", "$0.226/h", "19.08", "$0.33"),
        ("c5.xlarge", "$0.170/h", "9.95", "$0.47"),
        ("p3.2xlarge", "$3.060/h", "41.42", "$2.05"),
    ]


def test_single_estimate_json(capsys: pytest.CaptureFixture[str]) -> None:
    proc = _cli(capsys, "--instance-type", "m5.large", "--eia", "medium", "--throughput", "19.08", "-o", "json")
    assert proc.code == 0, proc.stderr
    [row] = json.loads(proc.stdout)
    assert row["instance_type"] == "m5.large" and row["accelerator"] == "eia1.medium"
    assert row["hourly_price"] == pytest.approx(0.226)
    assert round(row["cost_per_100k"], 2) == 0.33


def test_formula_and_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert cost_per_100k(3.6, 1.0) == pytest.approx(100.0)  # $3.60/h at 1 req/s: 100k requests take 100k s
    assert estimate("x.large", 10.0, price=0.36).cost_per_100k == pytest.approx(1.0)
    with pytest.raises(UsageError, match="positive"):
        cost_per_100k(1.0, 0)
    with pytest.raises(UsageError, match="no bundled price for z9.huge"):
        estimate("z9.huge", 1.0)
    assert [r.label for r in table("resnet152")[1]][1] == "m5.large + eia1.medium"
    proc = _cli(capsys, "--instance-type", "m5.large")  # names only what is missing, not the flag that was given
    assert proc.code == 2 and proc.stderr.startswith("error: missing --throughput: ")
    proc = _cli(capsys, "--throughput", "19.08")
    assert proc.code == 2 and proc.stderr.startswith("error: missing --instance-type: ")


def _product(usd: str, unit: str = "Hrs") -> str:
    """One PriceList entry, shaped like the Pricing API's (a JSON document inside a string)."""
    return json.dumps({
        "product": {"productFamily": "Compute Instance", "attributes": {"instanceType": "m5.large"}},
        "serviceCode": "AmazonEC2",
        "terms": {"OnDemand": {"ABC.JRTCKXETXF": {"priceDimensions": {"ABC.JRTCKXETXF.6YS6EN2CT7": {
            "unit": unit, "pricePerUnit": {"USD": usd}, "description": f"${usd} per On Demand Linux m5.large Instance Hour",
        }}, "sku": "ABC", "effectiveDate": "2024-04-01T00:00:00Z"}}},
    })


def test_parse_price_list() -> None:
    assert parse_price_list([_product("0.0000000000"), _product("0.0960000000")]) == pytest.approx(0.096)


class _Pricing(BaseHTTPRequestHandler):
    """The Pricing API's GetProducts (JSON 1.1 protocol), recording what it was asked."""

    requests: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        type(self).requests.append({"target": self.headers.get("X-Amz-Target"), "body": body})
        payload = json.dumps({"FormatVersion": "aws_v1", "PriceList": [_product("0.1010000000")]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-amz-json-1.1")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def pricing_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Pricing)
    # shutdown() waits out one poll: 0.5 s by default, in every test that starts this server
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_live_price_asks_the_pricing_api(pricing_url: str, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from tests.cloud.conftest import FAKE_AWS

    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    for key, value in {**FAKE_AWS, "AWS_ENDPOINT_URL_PRICING": pricing_url, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}.items():
        monkeypatch.setenv(key, value)
    _Pricing.requests.clear()
    proc = _cli(capsys, "--instance-type", "m5.large", "--throughput", "4.5", "--live", "--region", "eu-west-1",
                "-o", "json")
    assert proc.code == 0, proc.stderr
    [row] = json.loads(proc.stdout)
    assert row["hourly_price"] == pytest.approx(0.101)
    assert row["price_source"].startswith("AWS Pricing API (eu-west-1)")
    [req] = _Pricing.requests
    assert req["target"] == "AWSPriceListService.GetProducts"
    filters = {f["Field"]: f["Value"] for f in req["body"]["Filters"]}
    assert filters["instanceType"] == "m5.large" and filters["location"] == "EU (Ireland)"
    assert filters["operatingSystem"] == "Linux" and filters["tenancy"] == "Shared"


@pytest.mark.parametrize("command", [["ec2", "cost"], ["fleet", "cost", "--count", "2"]])
def test_a_bundled_price_shown_for_another_region_says_so(command: list[str], capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The table's price is us-east-1's: asked for eu-west-1 (flag or environment), one warning line says it;
    for us-east-1, or with a price given, nothing."""
    args = [*command, "--instance-type", "c5.xlarge", "--throughput", "10"]
    r = run_mmsctl(capsys, *args, "--region", "eu-west-1")
    assert r.code == 0 and "warning: the price is the bundled us-east-1 one, not eu-west-1's" in r.stderr, r.stderr
    assert ("--live asks the AWS Pricing API" in r.stderr) == (command[0] == "ec2")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")
    assert "not ap-south-1's" in run_mmsctl(capsys, *args).stderr
    assert "bundled" not in run_mmsctl(capsys, *args, "--region", "us-east-1").stderr
    assert "bundled" not in run_mmsctl(capsys, *args, "--price", "0.2").stderr
