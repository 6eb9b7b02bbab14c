"""The S3 pipeline's asynchronous controls against a real moto server: reserved concurrency, retries, event age,
the failure destination (our dead-letter queue by default), and a clash with someone else's notification
refused before anything is made."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.cloud.conftest import Moto
from tests.cloud.lambda_support import noop_mar, policy_doc, pushed_image
from tests.support.cli import run_mmsctl

NAME = "kitten"
PIPELINE = ("--input-bucket", "kitten-in", "--output-bucket", "kitten-out", "--input-prefix", "incoming/",
            "--output-prefix", "predictions/")
QUEUE = f"mmsctl-lambda-{NAME}-failures"


@pytest.fixture(scope="module")
def mar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return noop_mar(tmp_path_factory.mktemp("mar"))


@pytest.fixture
def aws(moto: Moto) -> dict[str, Any]:
    return {n: boto3.client(n) for n in ("s3", "iam", "lambda", "sqs", "sns")}


def _deploy(capsys: pytest.CaptureFixture[str], mar: Path, *args: str) -> dict[str, Any]:
    code, out, err = run_mmsctl(capsys, "lambda", "deploy", NAME, "--model", str(mar), "-o", "json", *args)
    assert code == 0, err
    return json.loads(out)


def _role_statements(aws: dict[str, Any]) -> dict[str, Any]:
    doc = policy_doc(aws["iam"].get_role_policy(RoleName=f"mmsctl-lambda-{NAME}",
                                                PolicyName="mmsctl-lambda")["PolicyDocument"])
    return {s["Sid"]: s for s in doc["Statement"]}


def test_pipeline_controls_are_the_desired_state(moto: Moto, capsys, aws: dict[str, Any], mar: Path) -> None:
    pushed_image(NAME)
    _deploy(capsys, mar, *PIPELINE, "--max-concurrency", "5", "--retries", "1", "--max-event-age", "1h")
    queue_url = aws["sqs"].get_queue_url(QueueName=QUEUE)["QueueUrl"]
    queue_arn = aws["sqs"].get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    assert aws["sqs"].list_queue_tags(QueueUrl=queue_url)["Tags"]["mmsctl:lambda"] == NAME
    assert aws["lambda"].get_function_concurrency(FunctionName=NAME)["ReservedConcurrentExecutions"] == 5
    config = aws["lambda"].get_function_event_invoke_config(FunctionName=NAME)
    assert (config["MaximumRetryAttempts"], config["MaximumEventAgeInSeconds"]) == (1, 3600)
    assert config["DestinationConfig"]["OnFailure"]["Destination"] == queue_arn
    code, out, err = run_mmsctl(capsys, "lambda", "describe", NAME, "-o", "json")
    assert json.loads(out)["asynchronous"] == {"max_concurrency": 5, "retries": 1, "max_event_age_s": 3600,
                                               "on_failure": queue_arn}, err
    assert _role_statements(aws)["SendFailures"] == {"Sid": "SendFailures", "Effect": "Allow",
                                                     "Action": ["sqs:SendMessage"], "Resource": queue_arn}

    # flags are the desired state: the cap goes, failures go to a topic of the user's
    topic = aws["sns"].create_topic(Name="failed-photos")["TopicArn"]
    again = _deploy(capsys, mar, *PIPELINE, "--on-failure", "sns://failed-photos")
    assert "ReservedConcurrentExecutions" not in aws["lambda"].get_function_concurrency(FunctionName=NAME)
    config = aws["lambda"].get_function_event_invoke_config(FunctionName=NAME)
    assert config["DestinationConfig"]["OnFailure"]["Destination"] == topic and config["MaximumRetryAttempts"] == 2
    assert _role_statements(aws)["SendFailures"]["Action"] == ["sns:Publish"]
    assert {(c["action"], c["kind"]) for c in again["changes"]} >= {("delete", "reserved-concurrency"),
                                                                    ("update", "async-invoke-config")}
    unchanged = _deploy(capsys, mar, *PIPELINE, "--on-failure", "sns://failed-photos")
    assert not [c for c in unchanged["calls"] if c["mutating"]]  # idempotent

    # destroy keeps the dead-letter queue while it holds failed events
    aws["sqs"].send_message(QueueUrl=queue_url, MessageBody=json.dumps({"requestContext": {"condition": "RetriesExhausted"}}))
    code, out, err = run_mmsctl(capsys, "lambda", "destroy", NAME, "-o", "json")
    assert code == 0, err
    kept = {k["id"]: k["why"] for k in json.loads(out)["kept"]}
    assert kept[QUEUE] == "holds 1 failed event: data is kept unless asked"
    code, _, err = run_mmsctl(capsys, "lambda", "destroy", NAME, "--delete-data")  # no terminal, no --yes
    assert code == 2 and f"destroy would delete 1 failed event in queue {QUEUE}; confirm with --yes" in err, err
    assert aws["sqs"].get_queue_url(QueueName=QUEUE)["QueueUrl"] == queue_url
    code, out, err = run_mmsctl(capsys, "lambda", "destroy", NAME, "--delete-data", "--yes", "-o", "json")
    assert code == 0, err
    assert {"kind": "sqs-queue", "id": QUEUE} in json.loads(out)["deleted"]
    assert aws["sqs"].list_queues().get("QueueUrls", []) == []


def test_an_overlapping_notification_is_refused_before_anything_is_made(moto: Moto, capsys, aws: dict[str, Any],
                                                                         mar: Path) -> None:
    pushed_image(NAME)
    aws["s3"].create_bucket(Bucket="kitten-in")
    queue = aws["sqs"].create_queue(QueueName="theirs")["QueueUrl"]
    queue_arn = aws["sqs"].get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    aws["s3"].put_bucket_notification_configuration(Bucket="kitten-in", NotificationConfiguration={"QueueConfigurations": [
        {"Id": "thumbnails", "QueueArn": queue_arn, "Events": ["s3:ObjectCreated:Put"],
         "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "incoming/cats/"},
                                             {"Name": "suffix", "Value": ".jpg"}]}}},
        {"Id": "audit", "QueueArn": queue_arn, "Events": ["s3:ObjectRemoved:*"]},  # another event family: no clash
        {"Id": "pngs", "QueueArn": queue_arn, "Events": ["s3:ObjectCreated:*"],  # a suffix of ours, any prefix
         "Filter": {"Key": {"FilterRules": [{"Name": "suffix", "Value": ".png"}]}}}]})
    code, _, err = run_mmsctl(capsys, "lambda", "deploy", NAME, "--model", str(mar), *PIPELINE)
    assert code == 2, err
    assert "rule thumbnails" in err and queue_arn in err and "prefix 'incoming/cats/'" in err
    dogs = ("--input-bucket", "kitten-in", "--output-bucket", "kitten-out", "--input-prefix", "dogs/",
            "--output-prefix", "predictions/")
    code, _, err = run_mmsctl(capsys, "lambda", "deploy", NAME, "--model", str(mar), *dogs, "--suffix", ".png")
    assert code == 2 and "rule pngs" in err and "suffix '.png'" in err, err
    assert aws["lambda"].list_functions()["Functions"] == [] and aws["iam"].list_roles()["Roles"] == []
    assert [b["Name"] for b in aws["s3"].list_buckets()["Buckets"]] == ["kitten-in"]
    # a disjoint prefix (thumbnails), a disjoint suffix (pngs), another event family (audit): no clash
    _deploy(capsys, mar, *dogs, "--suffix", ".jpg")
    ids = [c["Id"] for c in aws["s3"].get_bucket_notification_configuration(Bucket="kitten-in")["QueueConfigurations"]]
    assert ids == ["thumbnails", "audit", "pngs"]  # theirs, untouched


@pytest.mark.parametrize(("args", "message"), [
    (("--max-concurrency", "0"), "max concurrency 0: use 1-1000 (--max-concurrency)"),
    (("--retries", "3"), "retries 3: Lambda retries an asynchronous event 0 to 2 times (--retries)"),
    (("--max-event-age", "30s"), "event age 30s: Lambda keeps events 60 s to 6 h (--max-event-age)"),
    (("--max-event-age", "soon"), "is not a duration"),
    (("--on-failure", "ftp://x"), "use sqs://QUEUE, sns://TOPIC, s3://BUCKET"),
    (("--on-failure", "s3://kitten-out"), "is a bucket of the pipeline"),
    (("--provisioned", "4", "--max-concurrency", "2"), "provisioned concurrency 4 is more than the cap 2"),
])
def test_bad_controls_are_refused_before_any_call(capsys, mar: Path, args: tuple[str, ...], message: str) -> None:
    code, _, err = run_mmsctl(capsys, "lambda", "deploy", NAME, "--model", str(mar), *PIPELINE, *args,
                              "--region", "us-east-1")  # no credentials here: a call would fail differently
    assert code == 2 and message in err, err
