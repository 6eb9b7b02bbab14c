"""`mmsctl sagemaker describe / list / invoke / destroy / cost` and `top --context sagemaker:NAME` against moto.

moto's CloudWatch keeps metric data put into it and computes Sum, Average and the like from it (not percentiles:
p50/p99 read as n/a against moto); its sagemaker-runtime answers every invocation with a canned result, set
through moto's own API here (the real container is met in tests/sagemaker/test_contract.py).
"""

from __future__ import annotations

import datetime as dt
import json
import shlex
import urllib.request
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.cloud.conftest import Moto
from tests.recipes.doc_examples import block_at
from tests.cloud.lambda_support import pushed_image
from tests.cloud.sagemaker_support import ACCOUNT, IMAGE, NAME, cli, deploy, mar  # noqa: F401 - fixtures
from tests.support.paths import REPO

DIMENSIONS = [{"Name": "EndpointName", "Value": NAME}, {"Name": "VariantName", "Value": "AllTraffic"}]


@pytest.fixture
def deployed(moto: Moto, cli: Any, mar: Path) -> dict[str, Any]:  # noqa: F811
    pushed_image(NAME)
    return deploy(cli, "--model", str(mar), "--image", IMAGE, "--count", "2", "--max", "3")


def _traffic(invocations: list[float], latency_us: list[float], errors_5xx: float = 0.0) -> None:
    """What SageMaker publishes each minute, put into moto's CloudWatch for the last few minutes."""
    now = dt.datetime.now(dt.timezone.utc)
    data = []
    for minutes_ago, (count, latency) in enumerate(zip(invocations, latency_us), start=1):
        stamp = now - dt.timedelta(minutes=minutes_ago)
        data += [{"MetricName": "Invocations", "Dimensions": DIMENSIONS, "Timestamp": stamp, "Value": count},
                 {"MetricName": "ModelLatency", "Dimensions": DIMENSIONS, "Timestamp": stamp, "Value": latency,
                  "Unit": "Microseconds"}]
    data.append({"MetricName": "Invocation5XXErrors", "Dimensions": DIMENSIONS, "Timestamp": now -
                 dt.timedelta(minutes=1), "Value": errors_5xx})
    boto3.client("cloudwatch").put_metric_data(Namespace="AWS/SageMaker", MetricData=data)


def test_describe_joins_the_endpoint_its_scaling_and_the_last_hour(deployed: dict[str, Any], cli: Any) -> None:
    _traffic([120, 60, 60], [20_000, 40_000, 30_000], errors_5xx=2)
    proc = cli("sagemaker", "describe", NAME, "-o", "json")
    assert proc.code == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["status"] == "InService" and info["config"] == deployed["config"] and info["mmsctl"] is True
    assert info["variants"] == [{"variant": "AllTraffic", "model": deployed["model"], "instance_type": "ml.m5.large",
                                 "instances": 2, "desired_instances": 2, "weight": 1.0, "serverless_memory": None,
                                 "max_concurrency": None}]
    assert info["image"] == deployed["image"] and info["model_data"] == deployed["model_data"]
    assert info["scaling"] == {"min": 2, "max": 3, "policy": f"mmsctl-sagemaker-{NAME}-invocations",
                               "target_invocations_per_minute": 600.0}
    load = info["last_hour"]
    assert (load["invocations"], load["errors_5xx"]) == (240.0, 2.0)
    assert load["per_second"] == round(240 / 3600, 4) and load["latency_avg_ms"] == 30.0
    assert load["latency_p99_ms"] is None  # moto computes no percentiles
    table = cli("sagemaker", "describe", NAME)
    assert "240 invocations" in table.stdout and "p99 n/a" in table.stdout


def test_list_shows_only_mmsctls_endpoints(deployed: dict[str, Any], cli: Any) -> None:
    sm = boto3.client("sagemaker")
    sm.create_endpoint(EndpointName="theirs", EndpointConfigName=deployed["config"])
    proc = cli("sagemaker", "list", "-o", "json")
    assert [e["name"] for e in json.loads(proc.stdout)] == [NAME]


def test_top_once_shows_instances_and_cloudwatchs_load(deployed: dict[str, Any], cli: Any) -> None:
    _traffic([300, 300], [25_000, 25_000])
    proc = cli("top", "--context", f"sagemaker:{NAME}", "--once", "--interval", "0.1", "-o", "json")
    assert proc.code == 0, proc.stderr
    snapshot = json.loads(proc.stdout)
    assert snapshot["server"]["kind"] == "sagemaker" and snapshot["server"]["healthy"] is True
    row = snapshot["models"][0]
    assert (row["name"], row["workers_ready"], row["workers_total"], row["min_workers"], row["max_workers"]) == (
        deployed["model"], 2, 2, 2, 3)
    assert row["requests_per_s"] == pytest.approx(600 / 300) and row["mean_ms"] == 25.0 and row["p99_ms"] is None
    assert cli("top", "--context", "sagemaker:nothing-here", "--once").code == 5


def test_invoke_shows_the_runtimes_answer(deployed: dict[str, Any], cli: Any, moto: Moto, tmp_path: Path) -> None:
    """moto's sagemaker-runtime answers with a result set through its API (a container's body); it reads request
    bodies as UTF-8 text, so a JSON body goes here (images go to the real container in test_contract.py)."""
    request_body = tmp_path / "request.json"
    request_body.write_text(json.dumps({"inputs": [{"name": "body", "datatype": "BYTES", "shape": [1],
                                                    "data": ["kitten"]}]}))
    body = json.dumps([{"probability": 0.47, "class": "n02124075 Egyptian cat"}])
    request = urllib.request.Request(f"{moto.url}/moto-api/static/sagemaker/endpoint-results", method="POST",
                                     data=json.dumps({"results": [{"Body": body, "ContentType": "application/json",
                                                                   "InvokedProductionVariant": "AllTraffic"}]}).encode())
    urllib.request.urlopen(request, timeout=10).close()
    proc = cli("sagemaker", "invoke", NAME, str(request_body))
    assert proc.code == 0, proc.stderr
    assert "Egyptian cat" in proc.stdout and "variant AllTraffic" in proc.stderr


def test_destroy_removes_everything_and_keeps_the_logs(deployed: dict[str, Any], cli: Any) -> None:
    proc = cli("sagemaker", "destroy", NAME, "-o", "json")
    assert proc.code == 0, proc.stderr
    result = json.loads(proc.stdout)
    kinds = [d["kind"] for d in result["deleted"]]
    assert kinds == ["scaling", "endpoint", "endpoint-config", "model", "iam-role", "model-data"]
    assert result["kept"] == [{"kind": "log-group", "id": f"/aws/sagemaker/Endpoints/{NAME}",
                               "why": "data is kept: 0 bytes of logs"}]
    sm = boto3.client("sagemaker")
    assert sm.list_endpoints()["Endpoints"] == sm.list_models()["Models"] == []
    assert sm.list_endpoint_configs()["EndpointConfigs"] == []
    assert boto3.client("iam").list_roles()["Roles"] == []
    bucket = deployed["model_data"].split("/")[2]
    assert boto3.client("s3").list_object_versions(Bucket=bucket, Prefix="sagemaker/").get("Versions") is None
    assert boto3.client("application-autoscaling").describe_scalable_targets(
        ServiceNamespace="sagemaker")["ScalableTargets"] == []
    again = cli("sagemaker", "destroy", NAME, "--delete-data", "--yes", "-o", "json")
    assert [d["kind"] for d in json.loads(again.stdout)["deleted"]] == ["log-group"]
    assert cli("sagemaker", "destroy", NAME).stderr.startswith(f"nothing of {NAME} left")


def test_a_log_group_not_made_for_the_endpoint_is_used_and_never_deleted(moto: Moto, cli: Any,
                                                                          mar: Path) -> None:  # noqa: F811
    """SageMaker's own group (or anyone's) of the endpoint's name, without mmsctl:sagemaker=NAME: deploy writes
    to it as it is and says so; destroy --delete-data keeps it and says why."""
    group = f"/aws/sagemaker/Endpoints/{NAME}"
    logs = boto3.client("logs")
    logs.create_log_group(logGroupName=group, tags={"team": "theirs"})
    pushed_image(NAME)
    out = deploy(cli, "--model", str(mar), "--image", IMAGE)
    assert {"action": "reuse", "kind": "log-group",
            "id": f"{group} (not tagged mmsctl:sagemaker={NAME}: destroy keeps it)"} in out["changes"]
    gone = cli("sagemaker", "destroy", NAME, "--delete-data", "--yes", "-o", "json")
    assert gone.code == 0, gone.stderr
    result = json.loads(gone.stdout)
    assert "log-group" not in [d["kind"] for d in result["deleted"]]
    assert result["kept"] == [{"kind": "log-group", "id": group, "why": f"not tagged mmsctl:sagemaker={NAME}"}]
    assert logs.list_tags_log_group(logGroupName=group)["tags"] == {"team": "theirs"}


def test_describe_shows_a_scalable_target_without_a_policy(moto: Moto, cli: Any, mar: Path) -> None:  # noqa: F811
    """A target someone registered (or a policy someone deleted): the range, and "none" for the target tracking."""
    pushed_image(NAME)
    deploy(cli, "--model", str(mar), "--image", IMAGE)
    boto3.client("application-autoscaling").register_scalable_target(
        ServiceNamespace="sagemaker", ResourceId=f"endpoint/{NAME}/variant/AllTraffic",
        ScalableDimension="sagemaker:variant:DesiredInstanceCount", MinCapacity=1, MaxCapacity=2)
    proc = cli("sagemaker", "describe", NAME)
    assert proc.code == 0, proc.stderr
    assert "1-2 instances (target tracking: none)" in proc.stdout


@pytest.mark.parametrize("serverless, size, limit", [(True, 5, 4), (False, 7, 6)])
def test_invoke_refuses_a_body_over_the_endpoints_limit(moto: Moto, cli: Any, mar: Path, tmp_path: Path,  # noqa: F811
                                                        serverless: bool, size: int, limit: int) -> None:
    """4 MB to a serverless endpoint, 6 MB to a real-time one: refused before anything is sent."""
    pushed_image(NAME)
    deploy(cli, "--model", str(mar), "--image", IMAGE, *(("--serverless", "2048") if serverless else ()))
    big = tmp_path / "big.json"
    big.write_bytes(b"[" + b"0," * (size * 1024 * 1024 // 2) + b"0]")
    proc = cli("sagemaker", "invoke", NAME, str(big))
    assert proc.code == 2 and proc.stderr.count("error:") == 1, proc.stderr
    assert f"over InvokeEndpoint's {limit} MB" in proc.stderr and "IMAGE" in proc.stderr


def test_destroy_leaves_what_is_not_its_own(deployed: dict[str, Any], cli: Any) -> None:
    """A model named like the endpoint's but not tagged for it stays; so does the data without --yes off a terminal."""
    sm = boto3.client("sagemaker")
    sm.create_model(ModelName=f"{NAME}-theirs", PrimaryContainer={"Image": IMAGE},
                    ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/theirs")
    refused = cli("sagemaker", "destroy", NAME, "--delete-data")
    assert refused.code == 2 and "confirm with --yes" in refused.stderr
    done = cli("sagemaker", "destroy", NAME)
    assert done.code == 0, done.stderr
    table = [line.split() for line in done.stdout.splitlines()]
    assert table[0] == ["DELETED", "RESOURCE"] and [row[0] for row in table[1:]] == [
        "scaling", "endpoint", "endpoint-config", "model", "iam-role", "model-data"]
    assert done.stderr.splitlines() == [f"kept log-group /aws/sagemaker/Endpoints/{NAME} (data is kept: 0 bytes of "
                                        f"logs); to delete it too: mmsctl sagemaker destroy {NAME} --delete-data"]
    assert [m["ModelName"] for m in sm.list_models()["Models"]] == [f"{NAME}-theirs"]


def test_the_cost_of_one_workload_everywhere(cli: Any) -> None:
    """100,000 predictions over 30 days at 45 ms: the arithmetic of each row, from the bundled prices."""
    from mmsctl.cloud.aws.prices import bundled_prices

    prices = bundled_prices()
    proc = cli("sagemaker", "cost", "--requests", "100000", "--days", "30", "--duration-ms", "45", "-o", "json")
    rows = {r["option"]: r for r in json.loads(proc.stdout)}
    data = 100_000 * 8 * 1024 / 1024**3 * prices["sagemaker"]["data_processed_per_gb"]
    assert rows["ec2"]["total"] == pytest.approx(720 * prices["instances"]["m5.large"], abs=1e-4)
    assert rows["fleet"]["total"] == pytest.approx(720 * (2 * prices["instances"]["m5.large"] + 0.0225), abs=1e-4)
    assert rows["lambda"]["total"] == pytest.approx(100_000 * (45e-3 * 0.0000166667 + 0.2e-6), abs=1e-4)
    assert rows["sagemaker"]["total"] == pytest.approx(720 * 0.115 + data, abs=1e-4)
    assert rows["sagemaker serverless"]["total"] == pytest.approx(100_000 * 2 * 0.045 * 0.00002 + data, abs=1e-4)
    busy = json.loads(cli("sagemaker", "cost", "--days", "1", "--duration-ms", "45", "--throughput", "0.5",
                          "-o", "json").stdout)
    assert [r["setup"] for r in busy][:2] == ["3 × m5.large", "3 × m5.large + ALB"]  # 1.16 req/s at 0.5 each
    bad = cli("sagemaker", "cost", "--duration-ms", "45", "--serverless", "1500")
    assert bad.code == 2 and "--serverless" in bad.stderr


def test_the_cost_example_prints_the_pages_table(cli: Any) -> None:
    """docs/sagemaker.md's cost block as pasted: the table the command prints (piped: plain columns) is the page's."""
    (block,) = block_at("docs/sagemaker.md", "test_the_cost_example_prints_the_pages_table")
    (line,) = block.commands
    page = (REPO / "docs" / "sagemaker.md").read_text(encoding="utf-8")
    after = page[page.index(f"$ {line}\n") + len(line) + 3:]
    shown = after[:after.index("```")].splitlines()
    proc = cli(*shlex.split(line)[1:])
    assert proc.code == 0, proc.stderr
    assert proc.stdout.splitlines() == shown


def test_bench_refuses_a_sweep_longer_than_a_signature_lives(cli: Any, kitten_jpg: Path) -> None:
    """A signed request must reach AWS within 5 minutes of its timestamp: bench signs once, so a sweep that could
    run longer is refused before anything is sent (no AWS, no endpoint needed)."""
    proc = cli("bench", "run", "squeezenet", str(kitten_jpg), "--context", "sagemaker:kitten", "-c", "1,2,4,8,16,32",
               "-d", "60s")
    assert proc.code == 2 and "past the 5 minutes a signed request is good for" in proc.stderr, proc.stderr


def test_a_sagemaker_context_has_no_model_server_api(cli: Any) -> None:
    """`sagemaker:NAME` works with predict, bench and top; models, scale and ping say why they cannot."""
    for args in (("models", "list"), ("scale", "squeezenet", "--min-workers", "2"), ("ping",)):
        proc = cli(*args, "--context", "sagemaker:kitten")
        assert proc.code == 2 and "is a SageMaker endpoint: it has no" in proc.stderr, (args, proc.stderr)
        assert "mmsctl sagemaker describe kitten" in proc.stderr
