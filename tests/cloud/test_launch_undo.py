"""A failed `ec2 launch` leaves nothing it made: Elastic Inference is retired, and EC2 says so.

AWS refuses EI's endpoint service with ``InvalidServiceName`` and the message below (the error of
DescribeVpcEndpointServices and CreateVpcEndpoint for a service a region does not offer); moto still lists and
makes it, so AWS's answer is played with tests/support/aws_refusals.py, everything else is moto.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.cloud.conftest import Moto
from tests.cloud.conftest import run_cli_here as run_cli
from tests.support.aws_refusals import refusing
from tests.support.moto import AMAZON_IMAGE

EI_SERVICE = "com.amazonaws.us-east-1.elastic-inference.runtime"
RETIRED = ("InvalidServiceName", f"The Vpc Endpoint Service '{EI_SERVICE}' does not exist")
VCPU_LIMIT = ("VcpuLimitExceeded", "You have requested more vCPU capacity than your current vCPU limit of 32 allows "
              "for the instance bucket that the specified instance type belongs to. Please visit "
              "http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit.")


@pytest.fixture
def aws(moto: Moto, instance_assets: Path) -> dict[str, Any]:
    return {"ec2": boto3.client("ec2"), "iam": boto3.client("iam"), "moto": moto}


def _launch(aws: dict[str, Any], *args: str) -> Any:
    return run_cli(aws["moto"], "ec2", "launch", "--ami", AMAZON_IMAGE, "-o", "json", *args)


def _ours(aws: dict[str, Any]) -> dict[str, list[str]]:
    """Everything tagged or pathed as mmsctl's that is still there."""
    ec2, iam = aws["ec2"], aws["iam"]
    managed = [{"Name": "tag:mmsctl:managed", "Values": ["true"]}]
    return {
        "security-groups": sorted(g["GroupName"] for g in ec2.describe_security_groups(Filters=managed)["SecurityGroups"]),
        "endpoints": [e["VpcEndpointId"] for e in ec2.describe_vpc_endpoints(Filters=managed)["VpcEndpoints"]
                      if e["State"] not in ("deleted", "deleting")],
        "roles": sorted(r["RoleName"] for path in ("/mmsctl/", "/mmsctl-ec2/")
                        for r in iam.list_roles(PathPrefix=path)["Roles"]),
        "profiles": sorted(p["InstanceProfileName"] for path in ("/mmsctl/", "/mmsctl-ec2/")
                           for p in iam.list_instance_profiles(PathPrefix=path)["InstanceProfiles"]),
        "instances": [i["InstanceId"] for r in ec2.describe_instances(Filters=managed)["Reservations"]
                      for i in r["Instances"]],
    }


def test_a_region_without_ei_is_refused_before_anything_is_made(aws: dict[str, Any]) -> None:
    with refusing("ec2", "DescribeVpcEndpointServices", *RETIRED):
        proc = _launch(aws, "--eia", "medium", "-m", "squeezenet")
    assert proc.returncode == 9 and proc.stdout == ""
    line = proc.stderr.splitlines()[0]
    assert line.startswith("error: Elastic Inference is retired: us-east-1 no longer offers " + EI_SERVICE)
    assert RETIRED[1] in line
    assert _ours(aws) == {"security-groups": [], "endpoints": [], "roles": [], "profiles": [], "instances": []}
    s3 = boto3.client("s3")
    assert s3.list_buckets()["Buckets"] == []  # the asset bucket is not even made


def test_an_endpoint_ec2_will_not_make_takes_back_the_groups_and_keeps_what_was_reused(aws: dict[str, Any]) -> None:
    first = _launch(aws, "-m", "squeezenet")  # not EI: makes the server group and its own role
    assert first.returncode == 0, first.stderr
    before = _ours(aws)
    assert before["security-groups"] == ["mmsctl-server"]

    with refusing("ec2", "CreateVpcEndpoint", *RETIRED) as refused:
        proc = _launch(aws, "--eia", "medium", "-m", "squeezenet", "--name", "ei-try")
    assert len(refused) == 1
    assert proc.returncode == 9, proc.stderr
    line = proc.stderr.splitlines()[0]
    assert f"us-east-1 no longer offers {EI_SERVICE}" in line and RETIRED[1] in line
    assert "removed what this launch made: security group sg-" in line and "(mmsctl-ei-endpoint)" in line
    assert "mmsctl-server" not in line  # reused: never deleted
    assert _ours(aws) == before  # nothing of the EI launch is left; the first launch's all there


def test_a_refused_run_takes_back_endpoint_groups_and_roles_and_says_what_stays(aws: dict[str, Any]) -> None:
    with refusing("ec2", "RunInstances", *VCPU_LIMIT):
        proc = _launch(aws, "--eia", "medium", "-m", "squeezenet", "--name", "ei-run")
    assert proc.returncode == 9
    line = proc.stderr.splitlines()[0]
    assert line.startswith("error: quota exceeded: ec2 RunInstances") and "vCPU limit of 32" in line
    for what in ("instance profile mmsctl-ec2-ei-run", "iam role mmsctl-ec2-ei-run", "vpc endpoint vpce-",
                 "(mmsctl-ei-endpoint)", "(mmsctl-server)"):
        assert what in line.split("; removed what this launch made: ")[1], what
    assert "kept: assets s3://mmsctl-assets-123456789012-us-east-1/ec2/ei-run/" in line
    assert "`mmsctl ec2 cleanup`" in proc.stderr
    assert _ours(aws) == {"security-groups": [], "endpoints": [], "roles": [], "profiles": [], "instances": []}
    # What stays is what the next launch of that name reuses; cleanup removes the prefix.
    done = run_cli(aws["moto"], "ec2", "cleanup", "-o", "json")
    assert done.returncode == 0, done.stderr
    assert {"kind": "assets", "id": "s3://mmsctl-assets-123456789012-us-east-1/ec2/"} in json.loads(done.stdout)[
        "deleted"]


def test_a_dry_run_asks_about_ei_and_plans_without_undoing(aws: dict[str, Any]) -> None:
    with refusing("ec2", "DescribeVpcEndpointServices", *RETIRED):
        proc = _launch(aws, "--eia", "medium", "--dry-run")
    assert proc.returncode == 9 and "Elastic Inference is retired" in proc.stderr
    assert "removed" not in proc.stderr
    plan = _launch(aws, "--eia", "medium", "--dry-run")
    calls = json.loads(plan.stdout)["calls"]
    assert calls[0]["operation"] == "DescribeVpcEndpointServices" and calls[0]["executed"] is True
    assert calls[0]["parameters"] == {"ServiceNames": [EI_SERVICE]}
