"""Boot failures where users look: what an instance reports of its boot (its `mmsctl:boot` tag) in `ec2 list`,
`ec2 describe` (with its console's last boot lines), `ec2 launch --wait` and `fleet describe`; the role's
permission to report it; and the AMI's Python checked before anything is made, wherever the AMI says it."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import boto3
import pytest

from mmsctl.cloud.instance.boot_status import boot_status, console_lines
from tests.cloud.conftest import Moto
from tests.cloud.conftest import run_cli_here as run_cli
from tests.support.moto import AMAZON_IMAGE

PARAM = "/mmsctl-test/dlami"


@pytest.fixture
def aws(moto: Moto, instance_assets: Path) -> dict[str, Any]:
    boto3.client("ssm").put_parameter(Name=PARAM, Value=AMAZON_IMAGE, Type="String")
    return {"ec2": boto3.client("ec2"), "iam": boto3.client("iam"), "moto": moto}


def _launch(aws: dict[str, Any], *args: str) -> Any:
    return run_cli(aws["moto"], "ec2", "launch", "-m", "squeezenet", "-o", "json", *args)


def _tag(aws: dict[str, Any], instance_id: str, value: str) -> None:
    aws["ec2"].create_tags(Resources=[instance_id], Tags=[{"Key": "mmsctl:boot", "Value": value}])


@pytest.mark.parametrize(("value", "state", "text"), [
    ("ready", "ready", "ready"),
    ("failed: packages: E: Could not get lock /var/lib/dpkg/lock-frontend", "failed",
     "failed: packages: E: Could not get lock /var/lib/dpkg/lock-frontend"),
    # what an instance writes is its own: no escape sequence reaches the terminal
    ("failed: fetch: \x1b[2J\x1b]0;owned\x07gone", "failed", "failed: fetch: [2J ]0;owned gone"),
    (None, "booting", "booting"),
])
def test_the_tag_reads_as_a_status(value: str | None, state: str, text: str) -> None:
    tags = [{"Key": "mmsctl:boot", "Value": value}] if value is not None else []
    status = boot_status({"Tags": tags, "State": {"Name": "running"}})
    assert (status.state, status.text) == (state, text)
    assert boot_status({"State": {"Name": "stopped"}}).text == "-"  # stopped before it said anything


def test_list_describe_and_wait_show_a_failed_boot(aws: dict[str, Any]) -> None:
    """docs/ec2.md's "When a boot fails": `ec2 list` and `ec2 describe` show the step and line an instance
    reported, and `ec2 launch --wait` stops at it."""
    out = _launch(aws, "--ami", f"resolve:ssm:{PARAM}")
    assert out.returncode == 0, out.stderr
    [row] = json.loads(out.stdout)["instances"]
    assert row["boot"] == "booting"
    _tag(aws, row["id"], "failed: fetch: could not fetch s3://b/k: HTTP 403 AccessDenied")
    listed = run_cli(aws["moto"], "ec2", "list")
    assert "failed: fetch: could not fetch s3://b/k: HTTP 403 AccessDenied" in " ".join(listed.stdout.split())
    described = json.loads(run_cli(aws["moto"], "ec2", "describe", row["id"], "-o", "json").stdout)
    assert described["boot"].startswith("failed: fetch:") and described["boot_log"] is None  # moto's console: none

    from mmsctl.cloud.aws.session import open_session
    from mmsctl.cloud.ec2.query import boot_of, wait_for_server
    from mmsctl.errors import CloudError

    with pytest.raises(CloudError, match="the boot failed at fetch: could not fetch s3://b/k: HTTP 403"):
        wait_for_server("http://127.0.0.1:9", timeout=600, boot=boot_of(open_session(), row["id"]),
                        sleep=lambda s: pytest.fail("waited on a failed boot"))
    _tag(aws, row["id"], "ready")  # ready as the instance sees it, even where its port cannot be reached from here
    assert wait_for_server("http://127.0.0.1:9", timeout=600, boot=boot_of(open_session(), row["id"]),
                           sleep=lambda s: pytest.fail("waited on a ready boot"))


def test_the_launch_role_may_tag_its_own_instances_with_the_boot_status_only(aws: dict[str, Any]) -> None:
    out = _launch(aws, "--ami", f"resolve:ssm:{PARAM}", "--name", "demo")
    assert out.returncode == 0, out.stderr
    doc = aws["iam"].get_role_policy(RoleName="mmsctl-ec2-demo", PolicyName="mmsctl-boot-status")["PolicyDocument"]
    assert doc["Statement"] == [{
        "Sid": "TagOwnBootStatus", "Effect": "Allow", "Action": "ec2:CreateTags",
        "Resource": "arn:aws:ec2:*:*:instance/*",
        "Condition": {
            "StringEquals": {"ec2:ResourceTag/Name": "demo", "ec2:ResourceTag/mmsctl:managed": "true"},
            "ForAllValues:StringEquals": {"aws:TagKeys": ["mmsctl:boot"]},
            "StringLike": {"aws:RequestTag/mmsctl:boot": ["ready", "failed: *"]},
            "ArnLike": {"ec2:SourceInstanceARN": "arn:aws:ec2:*:*:instance/*"},
        },
    }]
    [inst] = [i for r in aws["ec2"].describe_instances()["Reservations"] for i in r["Instances"]]
    assert {t["Key"]: t["Value"] for t in inst["Tags"]}["Name"] == "demo"  # the tag the condition names


def test_console_lines_are_the_boots_last_bounded_and_printable(moto: Moto) -> None:
    """GetConsoleOutput: Latest=True is for Nitro types only (UnsupportedOperation elsewhere), then the buffer
    (botocore has decoded its base64 by then)."""
    from botocore.stub import Stubber

    from mmsctl.cloud.aws.session import open_session

    text = "\n".join([f"[   {i}.0] kernel line {i}" for i in range(5)] + [
        "mmsctl-init: start 2026-01-01T00:00:00Z", "mmsctl-init: step packages t=1.0",
        "E: Could not get lock", "mmsctl-init: FAILED at packages: E: Could not get lock\x1b[31m " + "x" * 500])
    aws = open_session()
    with Stubber(aws.client("ec2")) as stub:
        stub.add_client_error("get_console_output", service_error_code="UnsupportedOperation",
                              service_message="This instance type does not support retrieving the latest console "
                                              "output.", expected_params={"InstanceId": "i-1", "Latest": True})
        stub.add_response("get_console_output", {"InstanceId": "i-1", "Output": base64.b64encode(text.encode()).decode()},
                          {"InstanceId": "i-1"})  # as EC2 sends it
        lines = console_lines(aws, "i-1", limit=2)
    assert lines[0] == "mmsctl-init: step packages t=1.0"
    assert lines[1].startswith("mmsctl-init: FAILED at packages: E: Could not get lock [31m") and len(lines[1]) == 300


@pytest.mark.parametrize(("name", "refusal"), [
    ("ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-amd64-server-20240423",
     "is Ubuntu 24.04, whose python3 is 3.12; the wheels are for 3.10 (--instance-python, --ami)"),
    ("amzn2-ami-kernel-5.10-hvm-2.0.20241001.0-x86_64-gp2",
     "is Amazon Linux 2, whose python3 is 3.7; the wheels are for 3.10 (--instance-python, --ami)"),
])
def test_an_ami_that_states_another_python_is_refused_before_anything_is_made(aws: dict[str, Any], name: str,
                                                                                refusal: str) -> None:
    image = aws["ec2"].register_image(Name=name, Description="")["ImageId"]
    out = _launch(aws, "--ami", image)
    assert out.returncode == 2, out.stdout
    [line] = [x for x in out.stderr.splitlines() if x.startswith("error:")]
    assert refusal in line and image in line
    assert ("--instance-python 3.12" if "noble" in name else "an image whose python3 is 3.9 to 3.12") in out.stderr
    assert aws["ec2"].describe_security_groups(Filters=[{"Name": "tag:mmsctl:managed", "Values": ["true"]}])[
        "SecurityGroups"] == []
    assert boto3.client("s3").list_buckets()["Buckets"] == [] and aws["iam"].list_roles()["Roles"] == []
    matching = _launch(aws, "--ami", image, "--instance-python", "3.12", "--dry-run") if "noble" in name else None
    assert matching is None or matching.returncode == 0, matching.stderr if matching else ""


def test_an_ami_that_does_not_say_is_launched_with_a_warning(aws: dict[str, Any]) -> None:
    image = aws["ec2"].register_image(Name="team-golden-image-7", Description="built by packer")["ImageId"]
    out = _launch(aws, "--ami", image, "--dry-run")
    assert out.returncode == 0, out.stderr
    assert f"AMI {image} (team-golden-image-7) does not say which Python it has" in " ".join(out.stderr.split())


def test_fleet_describe_shows_each_members_boot(aws: dict[str, Any]) -> None:
    made = run_cli(aws["moto"], "fleet", "create", "demo", "-m", "squeezenet", "--ami", f"resolve:ssm:{PARAM}",
                   "--min", "2", "-o", "json")
    assert made.returncode == 0, made.stderr
    group = boto3.client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=["mmsctl-fleet-demo"])[
        "AutoScalingGroups"][0]
    first, second = sorted(i["InstanceId"] for i in group["Instances"])
    _tag(aws, first, "ready")
    _tag(aws, second, "failed: python: mmsctl-init: the wheels are for Python 3.10, this AMI's python3 is Python 3.12.3")
    info = json.loads(run_cli(aws["moto"], "fleet", "describe", "demo", "-o", "json").stdout)
    assert {i["id"]: i["boot"] for i in info["instances"]} == {
        first: "ready", second: "failed: python: mmsctl-init: the wheels are for Python 3.10, this AMI's python3 is "
                                "Python 3.12.3"}
    table = run_cli(aws["moto"], "fleet", "describe", "demo")
    assert table.returncode == 0 and "BOOT" in table.stdout
    assert f"{second}: boot failed: python: mmsctl-init: the wheels are for Python 3.10" in " ".join(table.stderr.split())
    doc = aws["iam"].get_role_policy(RoleName="mmsctl-fleet-demo", PolicyName="mmsctl-boot-status")["PolicyDocument"]
    assert doc["Statement"][0]["Condition"]["StringEquals"] == {"ec2:ResourceTag/mmsctl:fleet": "demo"}

