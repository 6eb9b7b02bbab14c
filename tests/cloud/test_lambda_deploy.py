"""`mmsctl lambda deploy / list / describe / destroy` (the real entry point, in-process) against a real moto server.

moto creates image functions, buckets, notifications, roles, rules, repositories, URLs and
permissions: each test reads back, through boto3, what exists afterwards.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any
from unittest import mock

import boto3
import pytest

from mmsctl.errors import CloudError
from tests.cloud.conftest import FAKE_AWS, Moto, run_cli_here
from tests.cloud.lambda_support import aws_calls_recorded, noop_mar, policy_doc, pushed_image, tags_of
from tests.support.cli import CliResult, run_mmsctl

ACCOUNT = "123456789012"
REGION = "us-east-1"
NAME = "kitten"
PIPELINE = ("--input-bucket", "kitten-in", "--output-bucket", "kitten-out", "--input-prefix", "incoming/",
            "--output-prefix", "predictions/")


@pytest.fixture(scope="module")
def mar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return noop_mar(tmp_path_factory.mktemp("mar"))


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Any:
    """``mmsctl ARGS`` through `mmsctl.cli.main.run`, with this process's environment (the moto fixture's)."""
    return lambda *args: run_mmsctl(capsys, *args)


def at(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    """Point this process's boto3 at *url* (an endpoint that records requests)."""
    for key, value in {**FAKE_AWS, "AWS_ENDPOINT_URL": url}.items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def aws(moto: Moto) -> dict[str, Any]:
    return {n: boto3.client(n) for n in ("s3", "iam", "lambda", "events", "logs", "ecr", "resourcegroupstaggingapi")}


def deploy(cli: Any, *args: str) -> dict[str, Any]:
    proc: CliResult = cli("lambda", "deploy", NAME, "-o", "json", *args)
    assert proc.code == 0, proc.stderr
    return json.loads(proc.stdout)


def mutating(result: dict[str, Any]) -> list[str]:
    return [f"{c['service']}.{c['operation']}" for c in result["calls"] if c["mutating"]]


def test_deploy_creates_the_pipeline_with_least_privilege(moto: Moto, cli: Any, aws: dict[str, Any], mar: Path) -> None:
    digest = pushed_image(NAME)
    out = deploy(cli, "--model", str(mar), *PIPELINE, "--function-url", "--warm", "5m")
    s3, iam, lam = aws["s3"], aws["iam"], aws["lambda"]
    tag = {"mmsctl:lambda": NAME}

    # The model bucket: versioned, private, tagged, holding the archive; the function pins that version.
    bucket = out["model"].split("/")[2]
    assert bucket.startswith(f"{NAME}".join(["mmsctl-", "-model-"])) or bucket.startswith(f"mmsctl-{NAME}-model-")
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    assert s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"]["BlockPublicPolicy"]
    head = s3.head_object(Bucket=bucket, Key="models/noop.mar")
    assert head["VersionId"] == out["model_version"]
    for b in (bucket, "kitten-in", "kitten-out"):
        assert tags_of(s3.get_bucket_tagging(Bucket=b)["TagSet"]).items() >= tag.items(), b

    # The role: only Lambda may assume it; it may touch exactly the model object, the two prefixes, its logs.
    role = iam.get_role(RoleName=f"mmsctl-lambda-{NAME}")["Role"]
    assert role["Path"] == "/mmsctl-lambda/" and tags_of(role["Tags"])["mmsctl:lambda"] == NAME
    assert policy_doc(role["AssumeRolePolicyDocument"])["Statement"] == [
        {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}]
    assert iam.list_role_policies(RoleName=role["RoleName"])["PolicyNames"] == ["mmsctl-lambda"]
    assert iam.list_attached_role_policies(RoleName=role["RoleName"])["AttachedPolicies"] == []
    doc = policy_doc(iam.get_role_policy(RoleName=role["RoleName"], PolicyName="mmsctl-lambda")["PolicyDocument"])
    assert {s["Sid"]: (s["Action"], s["Resource"]) for s in doc["Statement"]} == {
        "OwnLogGroup": (["logs:CreateLogStream", "logs:PutLogEvents"],
                        f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/lambda/{NAME}:*"),
        "ReadModel": (["s3:GetObject", "s3:GetObjectVersion"], f"arn:aws:s3:::{bucket}/models/noop.mar"),
        "ReadInput": (["s3:GetObject", "s3:GetObjectVersion"], "arn:aws:s3:::kitten-in/incoming/*"),
        "WriteOutput": (["s3:GetObject", "s3:PutObject"], "arn:aws:s3:::kitten-out/predictions/*"),
        "FindOutput": (["s3:ListBucket"], "arn:aws:s3:::kitten-out"),
        "SendFailures": (["sqs:SendMessage"], f"arn:aws:sqs:{REGION}:{ACCOUNT}:mmsctl-lambda-{NAME}-failures"),
    }

    # The function: an image pinned to the pushed digest, 1024 MB / 30 s, its environment, tags.
    fn = lam.get_function(FunctionName=NAME)
    config = fn["Configuration"]
    assert (config["PackageType"], config["MemorySize"], config["Timeout"]) == ("Image", 1024, 30)
    assert fn["Code"]["ImageUri"] == f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/mmsctl-lambda/{NAME}@{digest}"
    assert config["Role"] == role["Arn"]
    assert config["Environment"]["Variables"] == {
        "MMSCTL_LAMBDA_MODEL": f"s3://{bucket}/models/noop.mar", "MMSCTL_LAMBDA_MODEL_VERSION": head["VersionId"],
        "MMSCTL_LAMBDA_INPUT_BUCKET": "kitten-in", "MMSCTL_LAMBDA_INPUT_PREFIX": "incoming/",
        "MMSCTL_LAMBDA_OUTPUT_BUCKET": "kitten-out", "MMSCTL_LAMBDA_OUTPUT_PREFIX": "predictions/",
        "MMSCTL_LAMBDA_BUCKET_OWNER": ACCOUNT}  # the handler names it in every call on the pipeline's buckets
    assert fn["Tags"]["mmsctl:lambda"] == NAME
    arn = config["FunctionArn"]

    # The URL: IAM auth by default, so no public permission.
    assert lam.get_function_url_config(FunctionName=NAME)["AuthType"] == "AWS_IAM"
    statements = {s["Sid"]: s for s in json.loads(lam.get_policy(FunctionName=NAME)["Policy"])["Statement"]}
    assert set(statements) == {"mmsctl-s3", "mmsctl-warm"}

    # The S3 trigger: permission with source ARN and account, then one notification per image suffix.
    s3_perm = statements["mmsctl-s3"]
    assert s3_perm["Principal"] == {"Service": "s3.amazonaws.com"} and s3_perm["Action"] == "lambda:InvokeFunction"
    assert s3_perm["Condition"] == {"ArnLike": {"AWS:SourceArn": "arn:aws:s3:::kitten-in"},
                                    "StringEquals": {"AWS:SourceAccount": ACCOUNT}}
    configs = s3.get_bucket_notification_configuration(Bucket="kitten-in")["LambdaFunctionConfigurations"]
    assert sorted(c["Filter"]["Key"]["FilterRules"][1]["Value"] for c in configs) == sorted(
        [".jpg", ".jpeg", ".png", ".JPG", ".JPEG", ".PNG"])
    for c in configs:
        assert c["LambdaFunctionArn"] == arn and c["Events"] == ["s3:ObjectCreated:*"]
        assert c["Filter"]["Key"]["FilterRules"][0] == {"Name": "prefix", "Value": "incoming/"}

    # The warm-up schedule: a tagged rule every 5 minutes, its target the function, allowed by a permission.
    rule = aws["events"].describe_rule(Name=f"mmsctl-{NAME}-warm")
    assert rule["ScheduleExpression"] == "rate(5 minutes)" and rule["State"] == "ENABLED"
    assert tags_of(aws["events"].list_tags_for_resource(ResourceARN=rule["Arn"])["Tags"])["mmsctl:lambda"] == NAME
    [target] = aws["events"].list_targets_by_rule(Rule=rule["Name"])["Targets"]
    assert (target["Arn"], json.loads(target["Input"])) == (arn, {"mmsctl": "warm"})
    assert statements["mmsctl-warm"]["Condition"]["ArnLike"]["AWS:SourceArn"] == rule["Arn"]

    # The log group and the repository: tagged; the repository lets Lambda pull for this function only.
    [group] = aws["logs"].describe_log_groups(logGroupNamePrefix=f"/aws/lambda/{NAME}")["logGroups"]
    assert group["retentionInDays"] == 30
    assert aws["logs"].list_tags_for_resource(resourceArn=group["arn"].removesuffix(":*"))["tags"]["mmsctl:lambda"] == NAME
    repo = aws["ecr"].describe_repositories(repositoryNames=[f"mmsctl-lambda/{NAME}"])["repositories"][0]
    assert tags_of(aws["ecr"].list_tags_for_resource(resourceArn=repo["repositoryArn"])["tags"])["mmsctl:lambda"] == NAME
    pull = policy_doc(aws["ecr"].get_repository_policy(repositoryName=repo["repositoryName"])["policyText"])
    assert pull["Statement"][0]["Condition"] == {"StringLike": {"aws:sourceArn": [arn, f"{arn}:*"]}}

    # `list` and `describe` see it.
    listed = cli("lambda", "list", "-o", "json")
    assert [r["name"] for r in json.loads(listed.stdout)] == [NAME]
    described = json.loads(cli("lambda", "describe", NAME, "-o", "json").stdout)
    assert described["schedule"] == "rate(5 minutes) (ENABLED)" and described["url_auth"] == "AWS_IAM"
    assert "s3://kitten-in/incoming/*.jpg" in described["s3_trigger"]


def test_a_second_deploy_changes_nothing_and_a_new_archive_updates_the_pinned_version(
    moto: Moto, cli: Any, aws: dict[str, Any], mar: Path, tmp_path: Path
) -> None:
    pushed_image(NAME)
    args = ("--model", str(mar), *PIPELINE, "--function-url", "--warm", "5m")
    first = deploy(cli, *args)
    again = deploy(cli, *args)
    assert mutating(again) == []
    assert {c["action"] for c in again["changes"]} == {"reuse"}

    newer = noop_mar(tmp_path / "v2")  # another archive under the same name
    with zipfile.ZipFile(newer, "a") as zf:
        zf.writestr("extra.txt", "changed")
    third = deploy(cli, "--model", str(newer), *PIPELINE, "--function-url", "--warm", "5m", "--memory", "2048")
    assert third["model_version"] != first["model_version"]
    assert mutating(third) == ["s3.PutObject", "lambda.UpdateFunctionConfiguration"]
    config = aws["lambda"].get_function_configuration(FunctionName=NAME)
    assert config["MemorySize"] == 2048
    assert config["Environment"]["Variables"]["MMSCTL_LAMBDA_MODEL_VERSION"] == third["model_version"]


def test_dry_run_lists_every_call_a_deploy_makes_and_makes_none(moto: Moto, cli: Any, aws: dict[str, Any], mar: Path) -> None:
    pushed_image(NAME)
    args = ("--model", str(mar), *PIPELINE, "--function-url", "--public", "--warm", "1h")
    planned = cli("lambda", "deploy", NAME, "--dry-run", "-o", "json", *args)
    assert planned.code == 0, planned.stderr
    plan = json.loads(planned.stdout)
    assert plan["dry_run"] is True and all(not c["executed"] for c in plan["calls"] if c["mutating"])
    assert aws["lambda"].list_functions()["Functions"] == []
    assert [b["Name"] for b in aws["s3"].list_buckets()["Buckets"]] == []
    assert aws["iam"].list_roles()["Roles"] == []

    done = deploy(cli, *args)
    assert mutating(plan) == mutating(done)
    assert mutating(done)[:3] == ["s3.CreateBucket", "s3.PutPublicAccessBlock", "s3.PutBucketVersioning"]
    order = [op.split(".")[1] for op in mutating(done)]
    assert order.index("CreateRole") < order.index("CreateFunction") < order.index("CreateFunctionUrlConfig") \
        < order.index("PutBucketNotificationConfiguration") < order.index("PutRule")
    # the S3 permission (with source ARN and account) comes before the notification that needs it
    calls = done["calls"]
    s3_perm = next(i for i, c in enumerate(calls) if c["operation"] == "AddPermission"
                   and c["parameters"]["StatementId"] == "mmsctl-s3")
    notify = next(i for i, c in enumerate(calls) if c["operation"] == "PutBucketNotificationConfiguration")
    assert s3_perm < notify
    assert calls[s3_perm]["parameters"]["SourceAccount"] == ACCOUNT
    text = cli("lambda", "deploy", NAME, "--dry-run", *args)
    assert "would run" in text.stdout and "nothing was changed" in text.stderr


def test_public_url_warns_and_adds_both_permissions(moto: Moto, cli: Any, aws: dict[str, Any], mar: Path) -> None:
    pushed_image(NAME)
    proc = cli("lambda", "deploy", NAME, "--model", str(mar), "--function-url", "--public", "-o", "json")
    assert proc.code == 0, proc.stderr
    assert "warning: the function URL is public (AuthType NONE)" in proc.stderr
    assert aws["lambda"].get_function_url_config(FunctionName=NAME)["AuthType"] == "NONE"
    statements = {s["Sid"]: s for s in json.loads(aws["lambda"].get_policy(FunctionName=NAME)["Policy"])["Statement"]}
    assert statements["mmsctl-url-public"]["Action"] == "lambda:InvokeFunctionUrl"
    assert statements["mmsctl-url-public-invoke"]["Action"] == "lambda:InvokeFunction"
    # What was asked of Lambda (moto keeps the statements but not these two conditions).
    grants = {c["parameters"]["StatementId"]: c["parameters"] for c in json.loads(proc.stdout)["calls"]
              if c["operation"] == "AddPermission"}
    assert grants["mmsctl-url-public"]["FunctionUrlAuthType"] == "NONE"
    assert grants["mmsctl-url-public-invoke"]["InvokedViaFunctionUrl"] is True

    private = deploy(cli, "--model", str(mar), "--function-url")  # back to IAM auth: the public grants go
    assert "lambda.RemovePermission" in mutating(private)
    assert aws["lambda"].get_function_url_config(FunctionName=NAME)["AuthType"] == "AWS_IAM"
    with pytest.raises(aws["lambda"].exceptions.ResourceNotFoundException):
        aws["lambda"].get_policy(FunctionName=NAME)


def test_a_users_bucket_keeps_its_other_notifications(moto: Moto, cli: Any, aws: dict[str, Any], mar: Path) -> None:
    s3 = aws["s3"]
    s3.create_bucket(Bucket="their-bucket")
    queue = "arn:aws:sqs:us-east-1:123456789012:their-queue"
    s3.put_bucket_notification_configuration(Bucket="their-bucket", NotificationConfiguration={
        "QueueConfigurations": [{"Id": "theirs", "QueueArn": queue, "Events": ["s3:ObjectRemoved:*"]}]})
    pushed_image(NAME)
    deploy(cli, "--model", str(mar), "--input-bucket", "their-bucket", "--output-bucket", "their-bucket",
           "--input-prefix", "in/", "--output-prefix", "out/")
    config = s3.get_bucket_notification_configuration(Bucket="their-bucket")
    assert [q["Id"] for q in config["QueueConfigurations"]] == ["theirs"]
    assert len(config["LambdaFunctionConfigurations"]) == 6

    gone = cli("lambda", "destroy", NAME, "-o", "json")
    assert gone.code == 0, gone.stderr
    assert {"kind": "bucket", "id": "their-bucket", "why": "yours: deploy only used it"} in json.loads(gone.stdout)["kept"]
    config = s3.get_bucket_notification_configuration(Bucket="their-bucket")
    assert [q["Id"] for q in config["QueueConfigurations"]] == ["theirs"]
    assert "LambdaFunctionConfigurations" not in config


@pytest.mark.slow
def test_destroy_leaves_nothing_tagged_and_a_second_destroy_is_a_no_op(
    moto: Moto, cli: Any, aws: dict[str, Any], mar: Path, kitten_jpg: Path
) -> None:
    pushed_image(NAME)
    deploy(cli, "--model", str(mar), *PIPELINE, "--function-url", "--warm", "5m")
    aws["s3"].put_object(Bucket="kitten-in", Key="incoming/k.jpg", Body=kitten_jpg.read_bytes())
    aws["s3"].put_object(Bucket="kitten-out", Key="predictions/k.jpg.json", Body=b"{}")

    plan = cli("lambda", "destroy", NAME, "--dry-run", "-o", "json")
    assert plan.code == 0, plan.stderr
    planned = [c["operation"] for c in json.loads(plan.stdout)["calls"] if c["mutating"]]
    assert planned[:3] == ["RemoveTargets", "DeleteRule", "PutBucketNotificationConfiguration"]
    assert planned[-2:] == ["BatchDeleteImage", "DeleteRepository"]
    assert planned.count("DeleteBucket") == 1  # the model bucket; the two holding data are kept
    plan = cli("lambda", "destroy", NAME, "--dry-run", "--delete-data", "-o", "json")
    assert [c["operation"] for c in json.loads(plan.stdout)["calls"]].count("DeleteBucket") == 3
    assert aws["lambda"].get_function(FunctionName=NAME)  # nothing was deleted

    proc = cli("lambda", "destroy", NAME)  # the table and the notes a terminal user reads
    assert proc.code == 0, proc.stderr
    table = [line.split() for line in proc.stdout.splitlines()]
    assert table[0] == ["DELETED", "RESOURCE"]
    assert [row[0] for row in table[1:]] == ["schedule", "s3-notification", "function-url", "lambda-function",
                                             "log-group", "sqs-queue", "iam-role",
                                             "bucket", "ecr-images", "ecr-repository"]  # the reverse of deploy's order
    assert sorted(proc.stderr.splitlines()) == [
        f"kept bucket {b} (holds 1 object: data is kept unless asked)" for b in ("kitten-in", "kitten-out")] + [
        f"to delete them too: mmsctl lambda destroy {NAME} --delete-data"]
    assert aws["s3"].get_object(Bucket="kitten-in", Key="incoming/k.jpg")["Body"].read() == kitten_jpg.read_bytes()

    unasked = cli("lambda", "destroy", NAME, "--delete-data")  # no terminal here, and no --yes
    assert unasked.code == 2 and "would delete 1 object in s3://kitten-in, 1 object in s3://kitten-out" in unasked.stderr
    assert {b["Name"] for b in aws["s3"].list_buckets()["Buckets"]} == {"kitten-in", "kitten-out"}
    declined = _on_a_terminal(moto, "n\n", "lambda", "destroy", NAME, "--delete-data")  # asked, with the count
    assert "Delete 1 object in s3://kitten-in, 1 object in s3://kitten-out, every version? [y/N]" in declined.stderr
    assert declined.returncode == 2 and declined.stderr.rstrip().endswith("error: nothing deleted")
    assert {b["Name"] for b in aws["s3"].list_buckets()["Buckets"]} == {"kitten-in", "kitten-out"}
    proc = cli("lambda", "destroy", NAME, "--delete-data", "--yes", "-o", "json")
    assert proc.code == 0, proc.stderr
    assert sorted(d["id"] for d in json.loads(proc.stdout)["deleted"]) == ["kitten-in", "kitten-out"]
    assert aws["lambda"].list_functions()["Functions"] == []
    assert aws["s3"].list_buckets()["Buckets"] == []
    assert aws["iam"].list_roles()["Roles"] == []
    assert aws["events"].list_rules()["Rules"] == []
    assert aws["logs"].describe_log_groups()["logGroups"] == []
    assert aws["ecr"].describe_repositories()["repositories"] == []
    tagged = aws["resourcegroupstaggingapi"].get_resources(TagFilters=[{"Key": "mmsctl:lambda"}])
    assert tagged["ResourceTagMappingList"] == []

    again = cli("lambda", "destroy", NAME, "-o", "json")
    assert again.code == 0 and json.loads(again.stdout)["deleted"] == []
    text = cli("lambda", "destroy", NAME)
    assert f"nothing of {NAME} left in {REGION}" in text.stderr
    described = cli("lambda", "describe", NAME)
    assert described.code == 3 and described.stderr.startswith(f"error: no function {NAME} in {REGION}")


def _on_a_terminal(moto: Moto, typed: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``mmsctl ARGS`` with a pseudo-terminal as its stdin, *typed* already waiting there (stderr captured); in this
    process (tests/cloud/conftest.py `run_cli_here`), the terminal as ``sys.stdin``: what the command reads and asks."""
    controller, terminal = pty.openpty()
    try:
        os.write(controller, typed.encode())
        with open(terminal, encoding="utf-8", closefd=False) as stdin, mock.patch.object(sys, "stdin", stdin):
            return run_cli_here(moto, *args)
    finally:
        os.close(terminal)
        os.close(controller)


def test_keep_data_keeps_the_buckets(moto: Moto, cli: Any, aws: dict[str, Any], mar: Path) -> None:
    pushed_image(NAME)
    deploy(cli, "--model", str(mar), *PIPELINE)
    proc = cli("lambda", "destroy", NAME, "--keep-data", "-o", "json")
    assert proc.code == 0, proc.stderr
    kept = {k["id"] for k in json.loads(proc.stdout)["kept"]}
    names = {b["Name"] for b in aws["s3"].list_buckets()["Buckets"]}
    assert {"kitten-in", "kitten-out"} <= kept == names
    assert aws["lambda"].list_functions()["Functions"] == []
    # a later destroy without --keep-data finds the buckets by their tags and removes them
    final = cli("lambda", "destroy", NAME, "-o", "json")
    assert sorted(d["id"] for d in json.loads(final.stdout)["deleted"]) == sorted(names)


def test_refuses_what_mmsctl_did_not_make_and_missing_images(moto: Moto, cli: Any, aws: dict[str, Any], mar: Path) -> None:
    role = aws["iam"].create_role(RoleName="someone-elses", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    aws["lambda"].create_function(FunctionName=NAME, Role=role, PackageType="Image",
                                  Code={"ImageUri": f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/x:1"})
    for args in (("deploy", NAME, "--model", str(mar), "--image", f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/x:1"),
                 ("destroy", NAME)):
        proc = cli("lambda", *args)
        assert proc.code == 9, proc.stderr
        assert "was not deployed by mmsctl" in proc.stderr and "refusing" in proc.stderr
    assert aws["lambda"].get_function(FunctionName=NAME)

    proc = cli("lambda", "deploy", "other", "--model", str(mar), "-o", "json")
    assert proc.code == 2  # a step the user has to take first, as documented; nothing was made
    assert proc.stderr.splitlines() == [
        f"error: no image {ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/mmsctl-lambda/other:latest in ECR",
        "hint: build and push it: mmsctl lambda build MODEL --push --name other"]
    assert aws["ecr"].describe_repositories()["repositories"] == []  # no empty repository left behind
    assert [b["Name"] for b in aws["s3"].list_buckets()["Buckets"]] == []


@pytest.mark.parametrize(("args", "message"), [
    (("--warm", "15s"), "(--warm)\nhint: use --warm 1m or more, or --provisioned N to keep N instances initialised\n"),
    (("--memory", "64"), "error: memory 64: Lambda allows 128-10240 MB (--memory)\n"),
    (("--timeout", "1000"), "error: timeout 1000: Lambda allows 1-900 seconds (--timeout)\n"),
    (("--input-bucket", "bkt1", "--output-bucket", "bkt1"), "invocation loop) (--output-bucket, --input-prefix, "
     "--output-prefix)\nhint: use another output bucket, or disjoint prefixes: --input-prefix incoming/ "
     "--output-prefix predictions/\n"),
    (("--warm", "5m", "--provisioned", "2"), "error: a warm-up schedule or provisioned concurrency, not both "
     "(--warm, --provisioned)\n"),
    (("--public",), "error: public makes the function URL public: ask for a function URL too (--public, --function-url)"),
    (("--input-bucket", "bkt1"), "error: an input bucket and an output bucket go together (the S3 pipeline needs "
     "both) (--input-bucket, --output-bucket)"),
])
def test_refusals_make_no_aws_call(args: tuple[str, ...], message: str, mar: Path, cli: Any,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    with aws_calls_recorded() as (url, seen):
        at(monkeypatch, url)
        proc = cli("lambda", "deploy", NAME, "--model", str(mar), *args)
    assert proc.code == 2
    assert proc.stderr.startswith("error: ") and message in proc.stderr
    assert seen == []


def test_the_recorder_does_see_calls(mar: Path, cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above means something: a valid deploy against the recorder does reach it."""
    with aws_calls_recorded() as (url, seen):
        at(monkeypatch, url)
        proc = cli("lambda", "deploy", NAME, "--model", str(mar))
    assert proc.code != 0 and seen


def test_provisioned_concurrency_plan_points_everything_at_the_alias(moto: Moto, cli: Any, aws: dict[str, Any],
                                                                     mar: Path) -> None:
    """moto has no provisioned concurrency: the plan (dry run) shows what deploy asks of Lambda."""
    pushed_image(NAME)
    proc = cli("lambda", "deploy", NAME, "--dry-run", "-o", "json", "--model", str(mar), "--function-url",
                   *PIPELINE, "--provisioned", "3")
    assert proc.code == 0, proc.stderr
    calls = [c for c in json.loads(proc.stdout)["calls"] if c["mutating"]]
    ops = [c["operation"] for c in calls]
    assert ops.index("CreateFunction") < ops.index("PublishVersion") < ops.index("CreateAlias") \
        < ops.index("PutProvisionedConcurrencyConfig") < ops.index("CreateFunctionUrlConfig")
    by_op = {c["operation"]: c["parameters"] for c in calls}
    assert by_op["CreateAlias"]["Name"] == "live"
    assert by_op["PutProvisionedConcurrencyConfig"] == {"FunctionName": NAME, "Qualifier": "live",
                                                        "ProvisionedConcurrentExecutions": 3}
    assert by_op["CreateFunctionUrlConfig"]["Qualifier"] == "live"
    assert by_op["AddPermission"]["Qualifier"] == "live"
    arns = {c["LambdaFunctionArn"] for c in by_op["PutBucketNotificationConfiguration"]["NotificationConfiguration"]
            ["LambdaFunctionConfigurations"]}
    assert arns == {f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{NAME}:live"}
    assert "PutRule" not in ops
    assert aws["lambda"].list_functions()["Functions"] == []


def test_build_push_dry_run_shows_the_repository_calls_and_the_commands(moto: Moto, cli: Any, tmp_path: Path) -> None:
    proc = cli("lambda", "build", "s3://models-b/m.mar", "--out", str(tmp_path / "ctx"), "--push",
                   "--name", NAME, "--dry-run", "-o", "json")
    assert proc.code == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert [c["operation"] for c in plan["calls"] if c["mutating"]] == ["CreateRepository", "SetRepositoryPolicy"]
    image = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/mmsctl-lambda/{NAME}:latest"
    login, build, push = plan["push"]["commands"]
    assert login.endswith(f"login --username AWS --password-stdin {ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com")
    assert "--platform linux/amd64" in build and build.endswith(f"-t {image} {tmp_path / 'ctx'}")
    assert push.endswith(f"push {image}")
    assert "password" not in json.dumps(plan["push"]).replace("--password-stdin", "")
    assert boto3.client("ecr").describe_repositories()["repositories"] == []


def test_a_synchronous_invoke_is_never_retried(tmp_path: Path, cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A retried Invoke would run the function again: one request, even when Lambda answers 500."""
    image = tmp_path / "x.jpg"
    image.write_bytes(b"\xff\xd8\xff")
    with aws_calls_recorded() as (url, seen):
        at(monkeypatch, url)
        proc = cli("lambda", "invoke", NAME, str(image))
        listed = cli("lambda", "list")
    assert proc.code == 9 and proc.stderr.startswith("error: lambda Invoke failed")
    assert len([s for s in seen if s.endswith(f"/functions/{NAME}/invocations")]) == 1
    assert listed.code == 9 and len(seen) > 2  # other calls keep boto3's retries


def test_a_deploy_that_fails_half_way_says_what_it_made(moto: Moto, cli: Any, aws: dict[str, Any], mar: Path) -> None:
    """A role of the function's name that mmsctl did not make stops deploy after the buckets exist."""
    pushed_image(NAME)
    aws["iam"].create_role(RoleName=f"mmsctl-lambda-{NAME}", Path="/mmsctl/", AssumeRolePolicyDocument="{}")
    proc = cli("lambda", "deploy", NAME, "--model", str(mar), *PIPELINE)
    assert proc.code != 0 and len(proc.stderr.splitlines()) == 2, proc.stderr
    error, hint = proc.stderr.splitlines()
    made = sorted(b["Name"] for b in aws["s3"].list_buckets()["Buckets"])
    assert made and all(f"bucket {b}" in error for b in made if b != "their-bucket"), (made, error)
    assert f"deploy of {NAME} stopped there, after it made:" in error
    assert hint.endswith(f"mmsctl lambda destroy {NAME}")
    assert aws["lambda"].list_functions()["Functions"] == []
    cleanup = cli("lambda", "destroy", NAME, "-o", "json")
    assert cleanup.code == 0, cleanup.stderr
    assert aws["s3"].list_buckets()["Buckets"] == []


def test_a_deploy_that_fails_at_its_last_step_names_everything_it_made(moto: Moto, cli: Any, aws: dict[str, Any],
                                                                       mar: Path) -> None:
    """Someone else's EventBridge rule of the warm-up's name stops deploy after the function, its URL and its
    trigger exist; that rule is never changed or deleted, by deploy or destroy."""
    pushed_image(NAME)
    theirs = aws["events"].put_rule(Name=f"mmsctl-{NAME}-warm", ScheduleExpression="rate(1 hour)")["RuleArn"]
    proc = cli("lambda", "deploy", NAME, "--model", str(mar), *PIPELINE, "--function-url", "--warm", "5m")
    assert proc.code == 9 and len(proc.stderr.splitlines()) == 2, proc.stderr
    error, hint = proc.stderr.splitlines()
    assert error.startswith(f"error: EventBridge rule mmsctl-{NAME}-warm exists and was not made by mmsctl"), error
    made = error.split("after it made: ", 1)[1]
    for what in (f"lambda-function {NAME}", f"iam-role mmsctl-lambda-{NAME}", f"sqs-queue mmsctl-lambda-{NAME}-failures",
                 "input-bucket kitten-in", "output-bucket kitten-out", "function-url", "s3-notification"):
        assert what in made, (what, made)
    assert hint.endswith(f"mmsctl lambda destroy {NAME}")
    assert aws["lambda"].get_function(FunctionName=NAME)

    assert cli("lambda", "deploy", NAME, "--model", str(mar), *PIPELINE).code == 0  # no --warm: theirs stays
    cleanup = cli("lambda", "destroy", NAME, "-o", "json")
    assert cleanup.code == 0, cleanup.stderr
    assert json.loads(cleanup.stdout)["kept"] == [{"kind": "schedule", "id": f"mmsctl-{NAME}-warm",
                                                   "why": "not tagged mmsctl:lambda"}]
    assert aws["lambda"].list_functions()["Functions"] == [] and aws["s3"].list_buckets()["Buckets"] == []
    rule = aws["events"].describe_rule(Name=f"mmsctl-{NAME}-warm")
    assert (rule["Arn"], rule["ScheduleExpression"]) == (theirs, "rate(1 hour)")
    assert aws["events"].list_targets_by_rule(Rule=f"mmsctl-{NAME}-warm")["Targets"] == []


def _not_validated(arn: str) -> dict[str, Any]:
    """AWS's answer to PutBucketNotificationConfiguration while S3 may not yet invoke the function (400)."""
    from mmsctl.cloud.lambda_.deploy.triggers import NOT_VALIDATED

    return {"service_error_code": "InvalidArgument", "service_message": NOT_VALIDATED, "http_status_code": 400,
            "service_error_meta": {"ArgumentName1": f"{arn}, null",
                                   "ArgumentValue1": f"Not authorized to invoke function [{arn}]"}}


def test_the_notification_is_put_again_while_s3_cannot_validate_the_new_permission(
        moto: Moto, cli: Any, aws: dict[str, Any], mar: Path) -> None:
    """S3 tests the function when the notification is put; a permission added a moment before may not have reached
    it (moto never refuses: botocore's Stubber plays S3, its real code and message). Bounded; then one clear line."""
    from botocore.stub import ANY, Stubber

    from mmsctl.cloud.aws.session import open_session
    from mmsctl.cloud.lambda_.deploy.permissions import Permissions
    from mmsctl.cloud.lambda_.deploy.target import Target
    from mmsctl.cloud.lambda_.deploy.triggers import NotificationNotValidated, ensure_trigger
    from mmsctl.cloud.lambda_.spec import DeploySpec

    pushed_image(NAME)
    deploy(cli, "--model", str(mar), *PIPELINE)
    arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{NAME}"
    current = aws["s3"].get_bucket_notification_configuration(Bucket="kitten-in")
    current.pop("ResponseMetadata")
    sleeps: list[float] = []
    target = Target(open_session(), DeploySpec(name=NAME, model=str(mar), input_bucket="kitten-in",
                                               input_prefix="incoming/", suffixes=(".png",)), sleep=sleeps.append)
    with Stubber(target.aws.client("s3")) as s3:
        s3.add_response("get_bucket_notification_configuration", current, {"Bucket": "kitten-in"})
        for _ in range(2):
            s3.add_client_error("put_bucket_notification_configuration", **_not_validated(arn))
        s3.add_response("put_bucket_notification_configuration", {},
                        {"Bucket": "kitten-in", "NotificationConfiguration": ANY})
        ensure_trigger(target, Permissions(target), None)
        s3.assert_no_pending_responses()
    assert sleeps == [1, 2]

    sleeps.clear()
    with Stubber(target.aws.client("s3")) as s3:
        s3.add_response("get_bucket_notification_configuration", current, {"Bucket": "kitten-in"})
        for _ in range(8):
            s3.add_client_error("put_bucket_notification_configuration", **_not_validated(arn))
        with pytest.raises(NotificationNotValidated) as refused:
            ensure_trigger(target, Permissions(target), None)
        s3.assert_no_pending_responses()
    assert len(sleeps) == 7 and sum(sleeps) <= 60  # bounded
    assert refused.value.message == (f"S3 refused the notifications of s3://kitten-in for {arn} 8 times: "
                                     f"Not authorized to invoke function [{arn}]")
    assert "mmsctl-s3" in (refused.value.hint or "")

    sleeps.clear()  # any other refusal is not waited on
    with Stubber(target.aws.client("s3")) as s3:
        s3.add_response("get_bucket_notification_configuration", current, {"Bucket": "kitten-in"})
        s3.add_client_error("put_bucket_notification_configuration", "InvalidArgument",
                            "Configurations overlap. Configurations on the same bucket cannot share a common event "
                            "type.", 400)
        with pytest.raises(CloudError, match="Configurations overlap"):
            ensure_trigger(target, Permissions(target), None)
    assert sleeps == []


def test_a_bucket_of_another_account_is_never_taken_for_ours(moto: Moto, aws: dict[str, Any],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Bucket names are global. A bucket of another account that lets this one in answers HeadBucket with 200, and
    may even carry our tag; moto has one account. S3 refuses (403) a call whose ExpectedBucketOwner is not the
    bucket's: the policy stand-in plays that owner check (tests/support/s3_policy_standin.py)."""
    from mmsctl.cloud.aws.session import open_session
    from mmsctl.cloud.lambda_.destroy import DestroyResult, _bucket
    from mmsctl.cloud.lambda_.resources import NotOurAccount, bucket_tags
    from tests.support.s3_policy_standin import serving_s3_as_role

    for bucket in ("their-photos", "kitten-out"):
        aws["s3"].create_bucket(Bucket=bucket)
        aws["s3"].put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": [{"Key": "mmsctl:lambda", "Value": NAME}]})
    anything = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
    with serving_s3_as_role(moto.url, anything) as s3:
        s3.owners["their-photos"] = "210987654321"
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3.url)
        session = open_session()
        assert bucket_tags(session, "kitten-out") == {"mmsctl:lambda": NAME}
        with pytest.raises(NotOurAccount, match="bucket their-photos exists and is not this account's"):
            bucket_tags(session, "their-photos")  # deploy refuses it
        result = DestroyResult(NAME, REGION)
        _bucket(session, NAME, "their-photos", False, result)  # destroy leaves it alone, tag or not
        assert result.kept == [{"kind": "bucket", "id": "their-photos", "why": "another account's now: not touched"}]
        assert {d.owner for d in s3.seen} == {ACCOUNT} and ("s3:ListBucket", 403) in s3.actions()
    assert sorted(b["Name"] for b in aws["s3"].list_buckets()["Buckets"]) == ["kitten-out", "their-photos"]
