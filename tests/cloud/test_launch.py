"""`mmsctl ec2` against a real moto server: what exists in 'AWS' afterwards. The CLI runs in-process in the
environment a subprocess would get (tests/cloud/conftest.py `run_cli_here`): its exit codes and one-line errors
are the console script's own."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.cloud.conftest import Moto
from tests.cloud.conftest import run_cli_here as run_cli
from tests.support.moto import AMAZON_IMAGE

PARAM = "/mmsctl-test/dlami"
EI_SERVICE = "com.amazonaws.us-east-1.elastic-inference.runtime"
R18 = "https://models.example.com/resnet-18.mar"


def _tags(resource: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in resource.get("Tags", [])}


@pytest.fixture
def aws(moto: Moto, instance_assets: Path) -> dict[str, Any]:
    """boto3 clients on moto, with a 'DLAMI' id published in an SSM parameter (moto reserves /aws/…)."""
    ec2 = boto3.client("ec2")
    ssm = boto3.client("ssm")
    image = AMAZON_IMAGE
    ssm.put_parameter(Name=PARAM, Value=image, Type="String")
    return {"ec2": ec2, "iam": boto3.client("iam"), "image": image, "moto": moto}


def _launch(aws: dict[str, Any], *args: str) -> dict[str, Any]:
    proc = run_cli(aws["moto"], "ec2", "launch", "--ami", f"resolve:ssm:{PARAM}", "-o", "json", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _our_groups(ec2: Any) -> list[dict[str, Any]]:
    return ec2.describe_security_groups(Filters=[{"Name": "tag:mmsctl:managed", "Values": ["true"]}])[
        "SecurityGroups"]


#: Connect on the account's accelerators in the region, nothing else (not the EI guide's iam:*/ec2:* reads).
EI_CONNECT_ONLY = {"Version": "2012-10-17", "Statement": [{
    "Sid": "ElasticInferenceConnect", "Effect": "Allow", "Action": "elastic-inference:Connect",
    "Resource": "arn:aws:elastic-inference:us-east-1:123456789012:elastic-inference-accelerator/*"}]}


def _policy(iam: Any, role: str, name: str) -> dict[str, Any]:
    doc = iam.get_role_policy(RoleName=role, PolicyName=name)["PolicyDocument"]
    return json.loads(doc) if isinstance(doc, str) else doc


def _instances(ec2: Any, **kw: Any) -> list[dict[str, Any]]:
    return [i for r in ec2.describe_instances(**kw)["Reservations"] for i in r["Instances"]]


def test_launch_eia_creates_endpoint_group_role_and_tagged_instance(aws: dict[str, Any]) -> None:
    ec2, iam = aws["ec2"], aws["iam"]
    out = _launch(aws, "--eia", "medium", "-m", "squeezenet", "-m", f"r18={R18}", "--allow-cidr", "203.0.113.0/24")
    assert out["accelerator"] == "eia1.medium" and out["instance_type"] == "m5.large"
    assert out["ami"] == {"id": aws["image"], "source": f"ssm:{PARAM}", "name": out["ami"]["name"]}
    assert any("retired" in w for w in out["warnings"])
    vpc = ec2.describe_vpcs(VpcIds=[out["vpc"]])["Vpcs"][0]

    # The interface endpoint, with private DNS, in the subnet's VPC.
    endpoints = ec2.describe_vpc_endpoints(Filters=[{"Name": "service-name", "Values": [EI_SERVICE]}])["VpcEndpoints"]
    assert len(endpoints) == 1
    ep = endpoints[0]
    assert ep["VpcId"] == out["vpc"] and ep["VpcEndpointType"] == "Interface" and ep["PrivateDnsEnabled"]
    assert _tags(ep)["mmsctl:managed"] == "true"

    # A group allowing 443 from the VPC, attached to the endpoint.
    groups = {_tags(g)["mmsctl:component"]: g for g in _our_groups(ec2)}
    ei_sg = groups["ei-security-group"]
    assert [g["GroupId"] for g in ep["Groups"]] == [ei_sg["GroupId"]]
    rules = {(p["FromPort"], r["CidrIp"]) for p in ei_sg["IpPermissions"] for r in p["IpRanges"]}
    assert rules == {(443, vpc["CidrBlock"])}
    server_rules = {(p["FromPort"], r["CidrIp"]) for p in groups["server-security-group"]["IpPermissions"]
                    for r in p["IpRanges"]}
    assert server_rules == {(8080, "203.0.113.0/24"), (22, "203.0.113.0/24")}

    # No shared EI role: the launch's own role (below) carries EI's policy.
    assert iam.list_roles(PathPrefix="/mmsctl/")["Roles"] == []

    # The instance: tags record what was asked (moto, like retired EI, does not echo the accelerator).
    [inst] = _instances(ec2, InstanceIds=[out["instances"][0]["id"]])
    tags = _tags(inst)
    assert tags["mmsctl:managed"] == "true"
    assert tags["mmsctl:accelerator"] == "eia1.medium"
    assert tags["mmsctl:models"] == f"squeezenet=squeezenet,r18={R18}"
    assert inst["InstanceType"] == "m5.large" and inst["ImageId"] == aws["image"]
    # It boots from the asset bucket: its own role reads its prefix (and connects to EI).
    own = iam.get_instance_profile(InstanceProfileName="mmsctl-ec2-mmsctl-squeezenet-r18")["InstanceProfile"]
    assert inst["IamInstanceProfile"]["Arn"] == own["Arn"] and own["Path"] == "/mmsctl-ec2/"
    role = own["Roles"][0]["RoleName"]
    assert sorted(iam.list_role_policies(RoleName=role)["PolicyNames"]) == [
        "mmsctl-boot-assets", "mmsctl-boot-status", "mmsctl-elastic-inference-connect", "mmsctl-session-manager"]
    assert _policy(iam, role, "mmsctl-elastic-inference-connect") == EI_CONNECT_ONLY
    read = iam.get_role_policy(RoleName=role, PolicyName="mmsctl-boot-assets")["PolicyDocument"]
    read = json.loads(read) if isinstance(read, str) else read
    assert read["Statement"][0]["Resource"][0].endswith(":::mmsctl-assets-123456789012-us-east-1/ec2/"
                                                        "mmsctl-squeezenet-r18/*")
    keys = [o["Key"] for o in boto3.client("s3").list_objects_v2(
        Bucket="mmsctl-assets-123456789012-us-east-1", Prefix="ec2/")["Contents"]]
    assert sorted(re.sub("[0-9a-f]{64}", "*", k) for k in keys) == [
        "ec2/mmsctl-squeezenet-r18/manifests/*.json", "ec2/mmsctl-squeezenet-r18/models/*/squeezenet.mar"]
    assert {g["GroupId"] for g in inst["SecurityGroups"]} == {ei_sg["GroupId"],
                                                             groups["server-security-group"]["GroupId"]}
    raw = ec2.describe_instance_attribute(InstanceId=inst["InstanceId"], Attribute="userData")["UserData"]["Value"]
    script = base64.b64decode(raw).decode()
    assert script.startswith("#!/bin/bash")
    assert "systemctl enable --now mmsctl.service" in script
    assert f"--models squeezenet=/opt/mmsctl/assets/models/squeezenet.mar --models r18={R18}" in script


def test_launch_twice_reuses_endpoint_group_and_role(aws: dict[str, Any]) -> None:
    ec2, iam = aws["ec2"], aws["iam"]
    first = _launch(aws, "--eia", "eia2.large")
    second = _launch(aws, "--eia", "eia2.large")
    # the two groups and EI's endpoint, then the asset bucket, the uploaded assets, the launch's role and profile
    assert len(first["created"]) == 7 and second["created"] == []
    assert len(second["reused"]) == 7
    assert len(ec2.describe_vpc_endpoints()["VpcEndpoints"]) == 1
    assert len(_our_groups(ec2)) == 2
    assert iam.list_roles(PathPrefix="/mmsctl/")["Roles"] == []
    assert len(_instances(ec2, Filters=[{"Name": "tag:mmsctl:accelerator", "Values": ["eia2.large"]}])) == 2
    # Without assets (--pip-spec) the instance has no role of its own: the shared EI role, Connect only.
    third = _launch(aws, "--eia", "eia2.large", "--pip-spec", "mmsctl==0.1.0")
    assert third["created"] == ["iam role mmsctl-ei", "instance profile mmsctl-ei"]
    assert _policy(iam, "mmsctl-ei", "mmsctl-elastic-inference-connect") == EI_CONNECT_ONLY
    [inst] = _instances(ec2, InstanceIds=[third["instances"][0]["id"]])
    assert inst["IamInstanceProfile"]["Arn"].endswith(":instance-profile/mmsctl/mmsctl-ei")


def test_other_accelerators_need_no_ei_resources(aws: dict[str, Any]) -> None:
    ec2, iam = aws["ec2"], aws["iam"]
    out = _launch(aws, "--accelerator", "g5", "-m", "squeezenet", "--count", "2")
    assert out["instance_type"] == "g5.xlarge" and out["warnings"] == []
    assert len(out["instances"]) == 2
    assert ec2.describe_vpc_endpoints()["VpcEndpoints"] == []
    assert iam.list_roles(PathPrefix="/mmsctl/")["Roles"] == []
    # no EI role: only the launch's own, which reads its boot assets
    [role] = iam.list_roles(PathPrefix="/mmsctl-ec2/")["Roles"]
    assert sorted(iam.list_role_policies(RoleName=role["RoleName"])["PolicyNames"]) == [
        "mmsctl-boot-assets", "mmsctl-boot-status", "mmsctl-session-manager"]
    for inst in _instances(ec2, InstanceIds=[i["id"] for i in out["instances"]]):
        assert _tags(inst)["mmsctl:accelerator"] == "g5"


def test_dry_run_prints_calls_and_changes_nothing(aws: dict[str, Any]) -> None:
    ec2, iam = aws["ec2"], aws["iam"]
    proc = run_cli(aws["moto"], "ec2", "launch", "--eia", "medium", "--ami", f"resolve:ssm:{PARAM}", "--dry-run",
                   "-o", "json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    planned = [c["operation"] for c in plan["calls"] if not c["executed"]]
    ei = ["CreateSecurityGroup", "AuthorizeSecurityGroupIngress", "CreateSecurityGroup",
          "AuthorizeSecurityGroupIngress", "CreateVpcEndpoint"]
    assert planned[:5] == ei and planned[5:10] == ["CreateBucket", "PutPublicAccessBlock", "PutBucketEncryption",
                                                  "PutBucketVersioning", "PutBucketTagging"]
    # EC2 is asked first whether the region still offers EI's endpoint service
    assert [c["operation"] for c in plan["calls"]][0] == "DescribeVpcEndpointServices"
    assert planned[-8:] == ["CreateRole", "PutRolePolicy", "PutRolePolicy", "PutRolePolicy", "PutRolePolicy",
                            "CreateInstanceProfile", "AddRoleToInstanceProfile", "RunInstances"]
    # the launch's role: session, assets, boot status, EI
    assert all(c["mutating"] is False for c in plan["calls"] if c["executed"])
    run = next(c for c in plan["calls"] if c["operation"] == "RunInstances")["parameters"]
    assert run["ElasticInferenceAccelerators"] == [{"Type": "eia1.medium", "Count": 1}]
    assert run["InstanceType"] == "m5.large" and run["ImageId"] == aws["image"]
    endpoint = next(c for c in plan["calls"] if c["operation"] == "CreateVpcEndpoint")["parameters"]
    assert endpoint["ServiceName"] == EI_SERVICE and endpoint["PrivateDnsEnabled"] is True
    # Nothing was created.
    assert ec2.describe_vpc_endpoints()["VpcEndpoints"] == []
    assert _our_groups(ec2) == [] and _instances(ec2) == []
    assert iam.list_roles(PathPrefix="/mmsctl/")["Roles"] == []
    # The table form names the calls too.
    table = run_cli(aws["moto"], "ec2", "launch", "--eia", "medium", "--ami", aws["image"], "--dry-run")
    assert table.returncode == 0
    assert "CreateVpcEndpoint" in table.stdout and "would run" in table.stdout
    assert "nothing was changed" in table.stderr


def test_list_describe_ssh_config(aws: dict[str, Any]) -> None:
    out = _launch(aws, "--accelerator", "inf2", "--key-name", "me", "-m", "squeezenet")
    iid = out["instances"][0]["id"]
    listed = json.loads(run_cli(aws["moto"], "ec2", "list", "-o", "json").stdout)
    assert [r["id"] for r in listed] == [iid]
    assert listed[0]["accelerator"] == "inf2" and listed[0]["type"] == "inf2.xlarge"
    desc = json.loads(run_cli(aws["moto"], "ec2", "describe", iid, "-o", "json").stdout)
    assert desc["tags"]["mmsctl:models"] == "squeezenet=squeezenet" and desc["key"] == "me"
    ssh = run_cli(aws["moto"], "ec2", "ssh-config").stdout
    assert f"-{iid}\n" in ssh and "IdentityFile ~/.ssh/me.pem" in ssh and "LocalForward 8081 127.0.0.1:8081" in ssh


def test_cleanup_removes_ours_and_nothing_else(aws: dict[str, Any]) -> None:
    ec2, iam, moto = aws["ec2"], aws["iam"], aws["moto"]
    vpc_id = ec2.describe_vpcs()["Vpcs"][0]["VpcId"]
    theirs_sg = ec2.create_security_group(GroupName="theirs", Description="not ours", VpcId=vpc_id)["GroupId"]
    iam.create_role(RoleName="theirs", Path="/mmsctl/", AssumeRolePolicyDocument="{}")
    [theirs] = ec2.run_instances(ImageId=aws["image"], MinCount=1, MaxCount=1)["Instances"]

    first = _launch(aws, "--eia", "medium")
    _launch(aws)  # a second launch of the same name shares its role and prefix
    refused = run_cli(moto, "ec2", "cleanup")
    assert refused.returncode == 9 and "still exist" in refused.stderr
    foreign = run_cli(moto, "ec2", "terminate", theirs["InstanceId"])
    assert foreign.returncode == 9 and "not launched by mmsctl" in foreign.stderr
    one = run_cli(moto, "ec2", "terminate", first["instances"][0]["id"], "--wait", "-o", "json")
    assert one.returncode == 0 and "deleted" not in one.stderr  # the other instance still runs with that role
    assert [r["launch"] for r in json.loads(one.stdout)] == ["mmsctl-server"]
    assert iam.list_roles(PathPrefix="/mmsctl-ec2/")["Roles"]
    ended = run_cli(moto, "ec2", "terminate", "--all", "--wait")
    assert ended.returncode == 0, ended.stderr
    # --wait: the launch's own role, profile and asset prefix go with its last instance (EI's shared ones stay)
    launch_role = [r["RoleName"] for r in iam.list_roles(PathPrefix="/mmsctl-ec2/")["Roles"]]
    assert launch_role == [] and "deleted iam-role mmsctl-ec2-" in ended.stderr
    assert "deleted assets s3://" in ended.stderr and "deleted instance-profile mmsctl-ec2-" in ended.stderr

    plan = run_cli(moto, "ec2", "cleanup", "--dry-run", "-o", "json")
    assert plan.returncode == 0, plan.stderr
    assert "DeleteVpcEndpoints" in [c["operation"] for c in json.loads(plan.stdout)["calls"]]
    assert len(ec2.describe_vpc_endpoints()["VpcEndpoints"]) == 1  # dry run deleted nothing

    done = run_cli(moto, "ec2", "cleanup")  # the table and the notes a terminal user reads
    assert done.returncode == 0, done.stderr
    table = [line.split() for line in done.stdout.splitlines()]
    assert table[0] == ["DELETED", "ID"] and sorted(row[0] for row in table[1:]) == [
        "security-group", "security-group", "vpc-endpoint"]  # the launch's role and prefix went with its instance
    assert "kept iam-role theirs (not tagged mmsctl:managed)" in done.stderr.splitlines()
    assert [e for e in ec2.describe_vpc_endpoints()["VpcEndpoints"] if e["State"] != "deleted"] == []
    assert _our_groups(ec2) == []
    assert [r["RoleName"] for r in iam.list_roles(PathPrefix="/mmsctl/")["Roles"]] == ["theirs"]
    assert iam.list_instance_profiles(PathPrefix="/mmsctl/")["InstanceProfiles"] == []
    # What was not ours is untouched.
    assert ec2.describe_security_groups(GroupIds=[theirs_sg])["SecurityGroups"]
    [still] = _instances(ec2, InstanceIds=[theirs["InstanceId"]])
    assert still["State"]["Name"] == "running"
    again = run_cli(moto, "ec2", "cleanup")
    assert again.returncode == 0 and "nothing of mmsctl's left" in again.stderr


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["ec2", "launch", "--eia", "medium", "--region", "eu-central-1"], {},
         "Elastic Inference never existed in eu-central-1"),
        (["ec2", "list", "--region", "mars-north-1"], {}, "unknown AWS region: 'mars-north-1'"),
        (["ec2", "list"], {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": ""},
         "no AWS credentials found (run `aws configure` or set AWS_PROFILE)"),
        (["ec2", "launch", "--eia", "medium"], {}, "AMI parameter /aws/service/deeplearning/ami/"),
        (["ec2", "describe", "i-0123456789abcdef0"], {}, "no such instance in us-east-1"),
        (["ec2", "launch", "--eia", "huge"], {}, "unknown Elastic Inference accelerator 'huge'"),
        (["ec2", "launch", "-m", "./model.mar", "--pip-spec", "mmsctl"], {}, "a local file is not on the instance"),
    ],
)
def test_errors_are_one_line(moto: Moto, args: list[str], env: dict[str, str], message: str,
                             instance_assets: Path) -> None:
    proc = run_cli(moto, *args, env=env)  # instance_assets: a launch never builds real wheels here (no index)
    assert proc.returncode in (2, 3, 9), proc.stderr
    first = proc.stderr.strip().splitlines()[0]
    assert first.startswith("error: ") and message in first, proc.stderr
    assert "Traceback" not in proc.stderr
