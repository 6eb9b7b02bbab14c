"""`mmsctl ec2 launch … --dry-run` (the README's tour has one) on a machine with no AWS set up at all.

No region, no credentials, no ~/.aws: a dry run still prints the whole plan, with placeholders
for what it would have looked up, and says that it did not look. (The autouse fixture already
removed every AWS_* variable; AWS_EC2_METADATA_DISABLED keeps botocore off the network.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_mmsctl


@pytest.fixture(autouse=True)
def no_aws_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.aws/config or credentials


def test_ec2_launch_dry_run_plans_without_region_or_credentials(capsys) -> None:
    code, out, err = run_mmsctl(capsys, "ec2", "launch", "--eia", "medium", "--dry-run", "-o", "json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["looked_up"] is False and plan["region"] == "<region>"
    calls = {c["operation"]: c for c in plan["calls"]}
    assert not any(c["executed"] for c in plan["calls"])  # nothing reached AWS
    assert calls["GetParameter"]["looked_up"] is False
    run = calls["RunInstances"]["parameters"]
    assert run["ImageId"].startswith("<AMI id from /aws/service/deeplearning/")
    assert run["SubnetId"] == "<default subnet 1>"
    assert run["ElasticInferenceAccelerators"] == [{"Type": "eia1.medium", "Count": 1}]
    assert {"CreateSecurityGroup", "CreateVpcEndpoint", "CreateRole", "CreateInstanceProfile"} <= set(calls)
    assert "nothing was looked up in AWS" in err and "no AWS region or credentials" in err


def test_the_table_says_which_calls_it_would_look_up(capsys) -> None:
    code, out, err = run_mmsctl(capsys, "ec2", "launch", "--eia", "medium", "--dry-run")
    assert code == 0, err
    rows = [line.split() for line in out.splitlines()[1:]]
    # whether EI's endpoint service is offered, the account (it names the asset bucket), then the AMI; the S3
    # puts come before the instances
    assert [r[2:5] for r in rows[:3]] == [["DescribeVpcEndpointServices", "would", "look"],
                                          ["GetCallerIdentity", "would", "look"], ["GetParameter", "would", "look"]]
    assert rows[-1][2:5] == ["RunInstances", "would", "run"] and any(r[2] == "PutObject" for r in rows)


def test_a_real_launch_still_needs_a_region(capsys) -> None:
    code, _, err = run_mmsctl(capsys, "ec2", "launch", "--eia", "medium")
    assert code == 9 and err.startswith("error: no AWS region configured")


def test_lambda_dry_runs_plan_without_region_or_credentials(capsys, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """build --push, deploy and destroy: the whole plan with placeholders, nothing reached AWS."""
    from tests.cloud.lambda_support import noop_mar

    empty = tmp_path / "empty"
    empty.write_text("")
    for variable in ("AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):  # files that exist and say nothing
        monkeypatch.setenv(variable, str(empty))
    mar = noop_mar(tmp_path)
    code, out, err = run_mmsctl(capsys, "lambda", "deploy", "kitten", "--model", str(mar), "--function-url",
                                "--input-bucket", "kitten-in", "--output-bucket", "kitten-out", "--dry-run", "-o", "json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["looked_up"] is False and not any(c["executed"] for c in plan["calls"])
    ops = [c["operation"] for c in plan["calls"] if c["mutating"]]
    assert {"CreateRepository", "CreateBucket", "PutObject", "CreateRole", "CreateFunction", "CreateFunctionUrlConfig",
            "PutBucketNotificationConfiguration"} <= set(ops), ops
    [put] = [c["parameters"] for c in plan["calls"] if c["operation"] == "PutObject"]
    assert put["Body"] == f"<{mar.name}, {mar.stat().st_size} bytes>"  # the file, not a Python object's repr
    assert "nothing was looked up in AWS" in err

    code, out, err = run_mmsctl(capsys, "lambda", "destroy", "kitten", "--dry-run", "-o", "json")
    assert code == 0, err
    assert json.loads(out)["looked_up"] is False
    assert "GetFunction" in {c["operation"] for c in json.loads(out)["calls"]}
    assert "this plan shows what it would look for" in err  # not "nothing to delete": it did not look

    context = tmp_path / "ctx"
    code, out, err = run_mmsctl(capsys, "lambda", "build", str(mar), "--out", str(context), "--push",
                                "--name", "kitten", "--dry-run", "-o", "json")
    assert code == 0, err
    assert "CreateRepository" in {c["operation"] for c in json.loads(out)["calls"]}


def test_ssh_from_the_whole_internet_only_on_purpose(capsys) -> None:
    """0.0.0.0/0 on SSH is refused before anything (exit 2, the hint names the way out); with
    --allow-world-ssh the plan opens it, as asked."""
    for args in (["ec2", "launch", "--allow-cidr", "0.0.0.0/0"], ["fleet", "create", "web", "-m", "squeezenet",
                                                                  "--ssh-cidr", "0.0.0.0/0"]):
        code, out, err = run_mmsctl(capsys, *args, "--dry-run", "-o", "json")
        assert code == 2 and "opens SSH to the whole internet" in err and "--allow-world-ssh" in err, err
        code, out, err = run_mmsctl(capsys, *args, "--allow-world-ssh", "--dry-run", "-o", "json")
        assert code == 0, err
        ingress = [p for c in json.loads(out)["calls"] if c["operation"] == "AuthorizeSecurityGroupIngress"
                   for p in c["parameters"].get("IpPermissions", [])]
        assert any(r.get("CidrIp") == "0.0.0.0/0" for p in ingress if p["FromPort"] == 22
                   for r in p.get("IpRanges", [])), ingress


@pytest.mark.parametrize("command", [["ec2", "launch"], ["fleet", "create", "prod"]])
def test_a_dry_run_refuses_models_a_real_run_could_not_find(capsys, command: list[str]) -> None:
    """A zoo typo (with the did-you-mean) or a local file that is not there: exit 3 before any plan, as
    `serve start` and `lambda deploy` answer; nothing is downloaded to check."""
    code, out, err = run_mmsctl(capsys, *command, "--models", "squeezenett", "--dry-run")
    assert code == 3 and out == "", err
    assert "unknown model 'squeezenett'" in err and "did you mean 'squeezenet'" in err
    code, out, err = run_mmsctl(capsys, *command, "--models", "foo=./nosuch.mar", "--dry-run")
    assert (code, out) == (3, "") and err.splitlines()[0] == "error: ./nosuch.mar: no such file or folder (--models)"


_ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com/x:latest"


@pytest.mark.parametrize("args", [
    ("ec2", "launch", "--eia", "medium"),
    ("fleet", "create", "web", "-m", "squeezenet"),
    ("lambda", "deploy", "kitten", "--model", "s3://b/squeezenet.mar", "--image", _ECR),
    ("lambda", "destroy", "kitten"),
    ("sagemaker", "deploy", "kitten", "--model", "s3://b/model.tar.gz", "--image", _ECR),
    ("sagemaker", "destroy", "kitten"),
])
@pytest.mark.parametrize("region", [(), ("--region", "us-east-1")])
def test_a_profile_that_does_not_exist_fails_before_any_plan(capsys, args: tuple[str, ...],
                                                             region: tuple[str, ...]) -> None:
    """The same one line, exit 9, as without --dry-run: no plan first, no internal error after."""
    code, out, err = run_mmsctl(capsys, *args, *region, "--profile", "nosuch", "--dry-run")
    assert (code, out) == (9, ""), err
    assert err.startswith("error: AWS profile not found: nosuch (--profile)\n") and err.count("error:") == 1, err


def test_sagemaker_refuses_an_image_of_another_region_without_looking_anything_up(capsys) -> None:
    """--region and the image's URI are enough to see the mismatch: refused offline too (exit 2), not planned, and
    before the model is fetched or packed."""
    code, out, err = run_mmsctl(capsys, "sagemaker", "deploy", "kitten", "--model", "squeezenet", "--image", _ECR,
                                "--region", "eu-west-1", "--dry-run")
    assert (code, out) == (2, ""), err
    assert err.startswith(f"error: image {_ECR} is in us-east-1, the endpoint in eu-west-1") and "(--image)" in err


@pytest.mark.parametrize("args, region, looked, wanting", [
    (("ec2", "launch"), (), "GetParameter", "Pass --region and credentials"),
    (("sagemaker", "destroy", "kitten"), ("--region", "eu-west-1"), "DescribeEndpoint", "Pass credentials"),
    (("lambda", "destroy", "kitten"), ("--region", "eu-west-1"), "GetFunction", "Pass credentials"),
])
def test_the_banner_says_what_this_command_could_not_look_up_and_what_it_lacks(
        capsys, args: tuple[str, ...], region: tuple[str, ...], looked: str, wanting: str) -> None:
    """Its own look-ups (not EC2's AMI and subnets for a SageMaker destroy), and --region only when none was given."""
    code, _, err = run_mmsctl(capsys, *args, *region, "--dry-run")
    assert code == 0, err
    banner = next(line for line in err.splitlines() if "nothing was looked up in AWS" in line)
    assert f"({looked}" in banner or f", {looked}" in banner, banner
    assert wanting + " for a plan from your account" in banner, banner
    if args[0] != "ec2":
        assert "AMI" not in banner and "subnets" not in banner, banner
