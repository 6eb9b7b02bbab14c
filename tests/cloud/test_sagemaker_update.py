"""`sagemaker update`: a new model, a new configuration and UpdateEndpoint, with the canary's deployment guardrails.

moto has no UpdateEndpoint: botocore's Stubber answers that call alone, on the client that makes it (the one that
never retries), with AWS's real answers and errors; everything else (models, configurations, alarms, the role)
is moto's. Where AWS then moves the endpoint, a stand-in does to moto what UpdateEndpoint does: the endpoint,
InService again, on the new configuration (or left on the old one: a rollback).
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import boto3
import pytest
from botocore.stub import ANY, Stubber

from mmsctl.cloud.aws.session import open_session
from mmsctl.cloud.sagemaker.model_data import pack
from mmsctl.cloud.sagemaker.update import UpdateSpec, update
from tests.cloud.conftest import Moto
from tests.cloud.lambda_support import noop_mar, pushed_image
from tests.support.cli import run_mmsctl

ACCOUNT = "123456789012"
NAME = "kitten"
IMAGE = f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/mmsctl-lambda/{NAME}:latest"
ARN = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:endpoint/{NAME}"


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("mars")
    return noop_mar(folder, "noop"), noop_mar(folder, "other")


@pytest.fixture
def deployed(moto: Moto, capsys: pytest.CaptureFixture[str], archives: tuple[Path, Path]) -> dict[str, Any]:
    """An endpoint `sagemaker deploy` made, on two instances."""
    pushed_image(NAME)
    proc = run_mmsctl(capsys, "sagemaker", "deploy", NAME, "--model", str(archives[0]), "--image", IMAGE,
                      "--count", "2", "-o", "json")
    assert proc.code == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def _moves_on_moto(params: dict[str, Any], **_: Any) -> None:
    """What UpdateEndpoint does, done to moto: the endpoint runs the new configuration, InService."""
    sm = boto3.client("sagemaker")
    tags = sm.list_tags(ResourceArn=ARN)["Tags"]
    sm.delete_endpoint(EndpointName=NAME)
    sm.create_endpoint(EndpointName=NAME, EndpointConfigName=params["EndpointConfigName"], Tags=tags)


@contextmanager
def update_endpoint_stubbed(aws: Any, *, moves: bool = True) -> Iterator[Stubber]:
    """Stubber on the client UpdateEndpoint goes through (and nothing else); *moves*: the stand-in moves moto."""
    client = aws.client("sagemaker", max_attempts=0)
    handler: Optional[Callable[..., None]] = _moves_on_moto if moves else None
    if handler is not None:
        client.meta.events.register("provide-client-params.sagemaker.UpdateEndpoint", handler)
    try:
        with Stubber(client) as stub:
            yield stub
            stub.assert_no_pending_responses()
    finally:
        if handler is not None:
            client.meta.events.unregister("provide-client-params.sagemaker.UpdateEndpoint", handler)


def _update(aws: Any, archive: Path, tmp_path: Path, **spec: Any) -> Any:
    return update(aws, UpdateSpec(NAME, str(archive), **spec).check(), model_data=pack(str(archive), tmp_path / "m.tgz"),
                  sleep=lambda s: None)


def test_update_with_a_canary_guardrail_moves_the_endpoint_and_retires_the_old_model(
        deployed: dict[str, Any], archives: tuple[Path, Path], tmp_path: Path) -> None:
    aws = open_session()
    with update_endpoint_stubbed(aws) as stub:
        stub.add_response("update_endpoint", {"EndpointArn": ARN}, {
            "EndpointName": NAME, "EndpointConfigName": ANY, "RetainAllVariantProperties": True,
            "DeploymentConfig": {
                "BlueGreenUpdatePolicy": {
                    "TrafficRoutingConfiguration": {"Type": "CANARY", "WaitIntervalInSeconds": 300,
                                                    "CanarySize": {"Type": "CAPACITY_PERCENT", "Value": 10}},
                    "TerminationWaitInSeconds": 0, "MaximumExecutionTimeoutInSeconds": 3600 + 600},
                "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": f"mmsctl-sagemaker-{NAME}-errors"},
                                                         {"AlarmName": f"mmsctl-sagemaker-{NAME}-latency"}]}}})
        result = _update(aws, archives[1], tmp_path, canary_percent=10, bake_s=300, max_latency_ms=250)
    sm, iam, cw = boto3.client("sagemaker"), boto3.client("iam"), boto3.client("cloudwatch")
    assert sm.describe_endpoint(EndpointName=NAME)["EndpointConfigName"] == result.config != deployed["config"]
    variant = sm.describe_endpoint_config(EndpointConfigName=result.config)["ProductionVariants"][0]
    assert (variant["InstanceType"], variant["InitialInstanceCount"]) == ("ml.m5.large", 2)  # the variant kept
    # The old configuration and model are gone (the endpoint no longer runs them); the image is the same one.
    assert [c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]] == [result.config]
    assert [m["ModelName"] for m in sm.list_models()["Models"]] == [result.model]
    assert sm.describe_model(ModelName=result.model)["PrimaryContainer"]["Image"] == result.image
    # The alarms that guard it: 5xx errors of the variant, and p99 model latency over 250 ms (in microseconds).
    alarms = {a["AlarmName"]: a for a in cw.describe_alarms()["MetricAlarms"]}
    errors, latency = alarms[f"mmsctl-sagemaker-{NAME}-errors"], alarms[f"mmsctl-sagemaker-{NAME}-latency"]
    assert (errors["MetricName"], errors["Threshold"], errors["Statistic"]) == ("Invocation5XXErrors", 0.0, "Sum")
    assert (latency["MetricName"], latency["Threshold"], latency["ExtendedStatistic"]) == (
        "ModelLatency", 250_000.0, "p99")
    assert {d["Name"]: d["Value"] for d in errors["Dimensions"]} == {"EndpointName": NAME, "VariantName": "AllTraffic"}
    # The role reads the new model data only, and may read the alarms (SageMaker reads them during the bake).
    doc = iam.get_role_policy(RoleName=f"mmsctl-sagemaker-{NAME}", PolicyName="mmsctl-sagemaker-endpoint")[
        "PolicyDocument"]
    statements = {s["Sid"]: s for s in doc["Statement"]}
    assert statements["ReadModel"]["Resource"] == [f"arn:aws:s3:::{result.model_data.removeprefix('s3://')}"]
    assert statements["ReadRollbackAlarms"] == {
        "Sid": "ReadRollbackAlarms", "Effect": "Allow", "Action": ["cloudwatch:DescribeAlarms"],
        "Resource": [f"arn:aws:cloudwatch:us-east-1:{ACCOUNT}:alarm:mmsctl-sagemaker-{NAME}-{k}"
                     for k in ("errors", "latency")]}


def test_a_rollback_is_reported_and_the_endpoint_keeps_its_model(deployed: dict[str, Any],
                                                                  archives: tuple[Path, Path], tmp_path: Path) -> None:
    """InService again on the old configuration: the alarms rolled it back. Nothing of the old is deleted."""
    from mmsctl.errors import CloudError

    aws = open_session()
    with update_endpoint_stubbed(aws, moves=False) as stub:
        stub.add_response("update_endpoint", {"EndpointArn": ARN})
        with pytest.raises(CloudError, match=f"endpoint {NAME} rolled back to {deployed['config']}") as caught:
            _update(aws, archives[1], tmp_path, canary_percent=25)
    assert caught.value.exit_code == 9
    sm = boto3.client("sagemaker")
    assert sm.describe_endpoint(EndpointName=NAME)["EndpointConfigName"] == deployed["config"]
    assert sm.describe_model(ModelName=deployed["model"])  # still there: the endpoint runs it


def test_awss_in_progress_error_is_one_line_and_not_retried(deployed: dict[str, Any], archives: tuple[Path, Path],
                                                            tmp_path: Path) -> None:
    """UpdateEndpoint on an endpoint already changing: AWS's ValidationException, sent once (the Stubber has one
    answer: a retry would fail the test), and the message names what this run made and how to remove it."""
    from mmsctl.cloud.sagemaker.deploy.run import DeployIncomplete

    aws = open_session()
    message = f'Cannot update in-progress endpoint "{ARN}".'
    with update_endpoint_stubbed(aws, moves=False) as stub:
        stub.add_client_error("update_endpoint", service_error_code="ValidationException", service_message=message,
                              http_status_code=400)
        with pytest.raises(DeployIncomplete) as caught:
            _update(aws, archives[1], tmp_path)
    text = caught.value.message
    assert "sagemaker UpdateEndpoint failed: ValidationException: " + message in text
    assert "after it made: model-data s3://" in text and ", model kitten-" in text
    assert text.endswith(f"(destroying {NAME} removes them)")


def test_an_endpoint_that_is_not_in_service_is_refused_before_any_change(
        deployed: dict[str, Any], archives: tuple[Path, Path], tmp_path: Path) -> None:
    """moto's endpoints are InService at once: AWS's Updating state comes from a stubbed DescribeEndpoint."""
    from mmsctl.cloud.sagemaker.update import EndpointBusy

    aws = open_session()
    described = boto3.client("sagemaker").describe_endpoint(EndpointName=NAME)
    updating = {k: described[k] for k in ("EndpointName", "EndpointArn", "EndpointConfigName", "CreationTime",
                                          "LastModifiedTime")}
    with Stubber(aws.client("sagemaker")) as stub:
        stub.add_response("describe_endpoint", {**updating, "EndpointStatus": "Updating"}, {"EndpointName": NAME})
        stub.add_response("list_tags", {"Tags": [{"Key": "mmsctl:sagemaker", "Value": NAME}]})
        with pytest.raises(EndpointBusy, match="is Updating: SageMaker takes one change at a time"):
            _update(aws, archives[1], tmp_path)
    assert len(boto3.client("sagemaker").list_models()["Models"]) == 1


@pytest.mark.parametrize("spec, message", [
    ({"canary_percent": 60}, "1 to 50 percent"),
    ({"canary_percent": 10, "bake_s": 7200}, "bake must be from 0 to 3600"),
    ({"bake_s": 60}, "bake time is how long a canary is watched"),
    ({"max_latency_ms": 100}, "goes with a canary"),
])
def test_bad_update_flags(spec: dict[str, Any], message: str) -> None:
    from mmsctl.errors import UsageError

    with pytest.raises(UsageError, match=message):
        UpdateSpec(NAME, "squeezenet", **spec).check()


@pytest.mark.parametrize("args, line", [
    ((), "error: name the new model (or a new image) (--model, --image)"),
    (("--model", "squeezenet", "--max-latency", "100"),
     "error: a latency ceiling sets a rollback alarm: it goes with a canary (--max-latency, --canary)"),
    (("--model", "squeezenet", "--canary", "60"), "error: canary 60%: 1 to 50 percent of the new fleet (SageMaker's "
                                                  "canary is at most half of it) (--canary)"),
    (("--model", "squeezenet", "--canary", "10", "--bake", "7200"),
     "error: bake must be from 0 to 3600 seconds (--bake)"),
    (("--model", "squeezenet", "--bake", "60"),
     "error: a bake time is how long a canary is watched: it goes with a canary (--bake, --canary)"),
])
def test_bad_update_flags_are_one_line_naming_the_flag(capsys: pytest.CaptureFixture[str], args: tuple[str, ...],
                                                        line: str) -> None:
    """The core names the arguments; the CLI their flags. Refused before any AWS call (no moto here)."""
    proc = run_mmsctl(capsys, "sagemaker", "update", NAME, *args)
    assert proc.code == 2 and proc.stderr.splitlines() == [line]


def test_updating_an_endpoint_that_is_not_there_says_how_to_make_it(moto: Moto,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    proc = run_mmsctl(capsys, "sagemaker", "update", NAME, "--model", "s3://my-models/model.tar.gz")
    assert proc.code == 3
    assert proc.stderr.splitlines() == [
        f"error: no endpoint {NAME} in us-east-1",
        f"hint: deploy it first: mmsctl sagemaker deploy {NAME} --model MODEL --image URI"]


def test_a_canary_on_a_serverless_endpoint_is_refused(moto: Moto, capsys: pytest.CaptureFixture[str],
                                                      archives: tuple[Path, Path]) -> None:
    """Deployment guardrails are for endpoints on instances."""
    pushed_image(NAME)
    proc = run_mmsctl(capsys, "sagemaker", "deploy", NAME, "--model", str(archives[0]), "--image", IMAGE,
                      "--serverless", "2048")
    assert proc.code == 0, proc.stderr
    proc = run_mmsctl(capsys, "sagemaker", "update", NAME, "--model", str(archives[1]), "--canary", "10")
    assert proc.code == 2 and proc.stderr.splitlines() == [
        "error: deployment guardrails (a canary) are for endpoints on instances, not serverless ones (--canary)"]


def test_a_canary_on_inf1_instances_is_refused(moto: Moto, capsys: pytest.CaptureFixture[str],
                                               archives: tuple[Path, Path]) -> None:
    """SageMaker runs no guardrails on Inf1 instances: it would shift all traffic at once, with no baking and no
    rollback ("Exclusions"), so the canary asked for would silently not happen. Nothing is made."""
    pushed_image(NAME)
    proc = run_mmsctl(capsys, "sagemaker", "deploy", NAME, "--model", str(archives[0]), "--image", IMAGE,
                      "--instance-type", "ml.inf1.xlarge", "--count", "2")
    assert proc.code == 0, proc.stderr
    models = boto3.client("sagemaker").list_models()["Models"]
    proc = run_mmsctl(capsys, "sagemaker", "update", NAME, "--model", str(archives[1]), "--canary", "10")
    assert proc.code == 2 and proc.stderr.splitlines() == [
        "error: deployment guardrails (a canary) do not run on Inf1 instances (ml.inf1.xlarge): SageMaker would "
        "shift all traffic at once, with no baking and no rollback (--canary)"]
    assert boto3.client("sagemaker").list_models()["Models"] == models
