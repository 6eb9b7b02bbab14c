"""`mmsctl fleet` against a real moto server: the exact resource graph, dry runs, the waiter,
list/describe/members/scale, and a destroy that leaves nothing tagged."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.cloud.conftest import Moto
from tests.support.moto import AMAZON_IMAGE
from tests.support._proc import any_free_port
from tests.support.cli import CliResult, run_mmsctl

PARAM = "/mmsctl-test/dlami"
FLEET = "mmsctl:fleet"


def _tags(resource: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in resource.get("Tags", [])}


@pytest.fixture
def cli(moto: Moto, capsys: pytest.CaptureFixture[str]) -> Any:
    """``mmsctl ARGS`` in this process (the real entry point), talking to moto."""
    def run(*args: str) -> CliResult:
        return run_mmsctl(capsys, *args)

    return run


@pytest.fixture
def aws(moto: Moto, cli: Any, instance_assets: Path) -> dict[str, Any]:
    """boto3 clients on moto, and a 'DLAMI' id published in an SSM parameter (moto reserves /aws/…)."""
    ec2 = boto3.client("ec2")
    image = AMAZON_IMAGE
    boto3.client("ssm").put_parameter(Name=PARAM, Value=image, Type="String")
    vpc = ec2.describe_vpcs(Filters=[{"Name": "isDefault", "Values": ["true"]}])["Vpcs"][0]
    return {"ec2": ec2, "elb": boto3.client("elbv2"), "asg": boto3.client("autoscaling"),
            "iam": boto3.client("iam"), "image": image, "moto": moto, "vpc": vpc, "cli": cli}


def _create(aws: dict[str, Any], name: str, *args: str) -> dict[str, Any]:
    proc = aws["cli"]("fleet", "create", name, "--ami", f"resolve:ssm:{PARAM}", "-o", "json", *args)
    assert proc.code == 0, proc.stderr
    return json.loads(proc.stdout)


def _groups(aws: dict[str, Any], name: str) -> dict[str, dict[str, Any]]:
    found = aws["ec2"].describe_security_groups(Filters=[{"Name": f"tag:{FLEET}", "Values": [name]}])["SecurityGroups"]
    return {_tags(g)["mmsctl:component"]: g for g in found}


def _ingress(group: dict[str, Any], key: str = "IpPermissions") -> set[tuple[int, str]]:
    """Every (port, source) a group's rules allow; a source is a CIDR or a group id."""
    rules = set()
    for perm in group[key]:
        port = perm.get("FromPort", -1)
        rules |= {(port, r["CidrIp"]) for r in perm.get("IpRanges", [])}
        rules |= {(port, p["GroupId"]) for p in perm.get("UserIdGroupPairs", [])}
    return rules


def _lb(aws: dict[str, Any], name: str) -> dict[str, Any]:
    return aws["elb"].describe_load_balancers(Names=[f"mmsctl-fleet-{name}"])["LoadBalancers"][0]


def _tg(aws: dict[str, Any], name: str) -> dict[str, Any]:
    return aws["elb"].describe_target_groups(Names=[f"mmsctl-fleet-{name}"])["TargetGroups"][0]


def _asg(aws: dict[str, Any], name: str) -> dict[str, Any]:
    return aws["asg"].describe_auto_scaling_groups(AutoScalingGroupNames=[f"mmsctl-fleet-{name}"])[
        "AutoScalingGroups"][0]


def _elb_tags(aws: dict[str, Any], arn: str) -> dict[str, str]:
    return _tags(aws["elb"].describe_tags(ResourceArns=[arn])["TagDescriptions"][0])


@pytest.mark.slow
def test_create_makes_the_exact_resource_graph(aws: dict[str, Any]) -> None:
    ec2, elb, asg, iam = aws["ec2"], aws["elb"], aws["asg"], aws["iam"]
    out = _create(aws, "prod", "-m", "squeezenet", "-m", "r18=https://models.example.com/resnet-18.mar",
                  "--min", "2", "--max", "6", "--target-requests-per-instance", "12.5", "--key-name", "me")
    assert out["health_check_path"] == "/v2/health/ready"  # names no model: holds for any model set
    assert out["target_requests_per_minute"] == 750.0
    lb = _lb(aws, "prod")
    assert out["endpoint"] == f"http://{lb['DNSName']}"

    # Security groups: the balancer reaches the instances' inference port only; the management
    # port only from the admin group, which nothing of the fleet belongs to.
    groups = _groups(aws, "prod")
    assert set(groups) == {"fleet-lb-security-group", "fleet-instance-security-group", "fleet-admin-security-group"}
    lb_sg = groups["fleet-lb-security-group"]["GroupId"]
    inst_sg = groups["fleet-instance-security-group"]["GroupId"]
    admin_sg = groups["fleet-admin-security-group"]["GroupId"]
    assert _ingress(groups["fleet-lb-security-group"]) == {(80, "0.0.0.0/0")}
    assert _ingress(groups["fleet-lb-security-group"], "IpPermissionsEgress") == {(8080, inst_sg)}
    assert _ingress(groups["fleet-instance-security-group"]) == {(8080, lb_sg), (8081, admin_sg)}
    assert _ingress(groups["fleet-admin-security-group"]) == set()
    management_sources = {src for port, src in _ingress(groups["fleet-instance-security-group"]) if port == 8081}
    assert lb_sg not in management_sources and not any("/" in s for s in management_sources)

    # Balancer, listener, target group and its health check.
    assert lb["Scheme"] == "internet-facing" and lb["Type"] == "application"
    assert lb["SecurityGroups"] == [lb_sg] and lb["VpcId"] == aws["vpc"]["VpcId"]
    assert len({z["ZoneName"] for z in lb["AvailabilityZones"]}) >= 2
    tg = _tg(aws, "prod")
    assert (tg["Protocol"], tg["Port"], tg["TargetType"], tg["VpcId"]) == ("HTTP", 8080, "instance", lb["VpcId"])
    assert (tg["HealthCheckProtocol"], tg["HealthCheckPath"], tg["Matcher"]["HttpCode"]) == ("HTTP", "/v2/health/ready", "200")
    assert (tg["HealthCheckIntervalSeconds"], tg["HealthyThresholdCount"], tg["UnhealthyThresholdCount"]) == (15, 2, 3)
    attributes = {a["Key"]: a["Value"] for a in elb.describe_target_group_attributes(
        TargetGroupArn=tg["TargetGroupArn"])["Attributes"]}
    assert attributes["deregistration_delay.timeout_seconds"] == "30"
    [listener] = elb.describe_listeners(LoadBalancerArn=lb["LoadBalancerArn"])["Listeners"]
    assert (listener["Protocol"], listener["Port"]) == ("HTTP", 80)
    assert [(a["Type"], a["TargetGroupArn"]) for a in listener["DefaultActions"]] == [("forward", tg["TargetGroupArn"])]

    # Launch template: what `ec2 launch` boots, the management API on the private address.
    [template] = ec2.describe_launch_templates(Filters=[{"Name": f"tag:{FLEET}", "Values": ["prod"]}])["LaunchTemplates"]
    data = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
        "LaunchTemplateVersions"][0]["LaunchTemplateData"]
    assert (data["ImageId"], data["InstanceType"], data["KeyName"]) == (aws["image"], "c5.xlarge", "me")
    assert data["SecurityGroupIds"] == [inst_sg] and data["MetadataOptions"]["HttpTokens"] == "required"
    profile = iam.get_instance_profile(InstanceProfileName="mmsctl-fleet-prod")["InstanceProfile"]
    assert data["IamInstanceProfile"]["Arn"] == profile["Arn"]
    assert [r["RoleName"] for r in profile["Roles"]] == ["mmsctl-fleet-prod"]
    assert sorted(iam.list_role_policies(RoleName="mmsctl-fleet-prod")["PolicyNames"]) == [
        "mmsctl-boot-assets", "mmsctl-boot-status", "mmsctl-complete-lifecycle", "mmsctl-session-manager"]
    _assert_completes_only_its_groups(iam, "prod")
    script = base64.b64decode(data["UserData"]).decode()
    assert "--management-address http://0.0.0.0:8081" in script and "--inference-address http://0.0.0.0:8080" in script
    assert ("--models squeezenet=/opt/mmsctl/assets/models/squeezenet.mar "
            "--models r18=https://models.example.com/resnet-18.mar") in script
    assert '"$VENV/bin/pip" install --no-index --no-compile --find-links "$APP_DIR/assets/wheelhouse" mmsctl==' in script
    assert "apt-get -o DPkg::Lock::Timeout=600 update" in script.split("if ! python3 -c", 1)[1].split("fi\n", 1)[0]
    bucket = f"mmsctl-assets-{ACCOUNT}-us-east-1"
    assert '"bucket": "%s", "dest": "/opt/mmsctl/assets"' % bucket in script and 'boot.py" fetch' in script
    _assert_assets(aws, bucket, "fleet/prod/", ["models/*/squeezenet.mar"])

    # The group over the subnets, with ELB health checks, and its target-tracking policy.
    group = _asg(aws, "prod")
    assert (group["MinSize"], group["DesiredCapacity"], group["MaxSize"]) == (2, 2, 6)
    assert (group["HealthCheckType"], group["HealthCheckGracePeriod"]) == ("ELB", 2 * (60 + 90))  # asg.py
    assert group["TargetGroupARNs"] == [tg["TargetGroupArn"]]
    assert group["LaunchTemplate"]["LaunchTemplateId"] == template["LaunchTemplateId"]
    # The launch hook, made with the group (before its first instance): held until the boot completes it.
    [hook] = asg.describe_lifecycle_hooks(AutoScalingGroupName="mmsctl-fleet-prod")["LifecycleHooks"]
    assert {k: hook[k] for k in ("LifecycleHookName", "LifecycleTransition", "HeartbeatTimeout", "DefaultResult")} == {
        "LifecycleHookName": "mmsctl-server-ready", "LifecycleTransition": "autoscaling:EC2_INSTANCE_LAUNCHING",
        "HeartbeatTimeout": 1800, "DefaultResult": "ABANDON"}
    assert ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
        "LaunchTemplateVersions"][0]["VersionDescription"] == "mmsctl fleet prod; boot completes mmsctl-server-ready"
    assert set(group["VPCZoneIdentifier"].split(",")) == {z["SubnetId"] for z in lb["AvailabilityZones"]}
    [policy] = asg.describe_policies(AutoScalingGroupName="mmsctl-fleet-prod")["ScalingPolicies"]
    tracking = policy["TargetTrackingConfiguration"]
    assert policy["PolicyType"] == "TargetTrackingScaling" and tracking["TargetValue"] == 750.0
    spec = tracking["PredefinedMetricSpecification"]
    assert spec["PredefinedMetricType"] == "ALBRequestCountPerTarget"
    assert spec["ResourceLabel"] == (lb["LoadBalancerArn"].split(":loadbalancer/")[1] + "/"
                                     + tg["TargetGroupArn"].split(":")[-1])

    # mmsctl:fleet=prod on everything.
    for arn in (lb["LoadBalancerArn"], tg["TargetGroupArn"], listener["ListenerArn"]):
        assert _elb_tags(aws, arn)[FLEET] == "prod", arn
    assert _tags(template)[FLEET] == "prod" and _tags(group)[FLEET] == "prod"
    assert _tags(iam.get_role(RoleName="mmsctl-fleet-prod")["Role"])[FLEET] == "prod"
    assert _tags(profile)[FLEET] == "prod"
    instances = [i for r in ec2.describe_instances(InstanceIds=[i["InstanceId"] for i in group["Instances"]])[
        "Reservations"] for i in r["Instances"]]
    assert len(instances) == 2
    assert all(_tags(i)[FLEET] == "prod" and _tags(i)["mmsctl:models"].startswith("squeezenet=") for i in instances)
    assert all("mmsctl:managed" not in _tags(i) for i in instances)  # `ec2 terminate --all` must not see them


ACCOUNT = "123456789012"


def _assert_completes_only_its_groups(iam: Any, name: str) -> None:
    """The instances may complete a lifecycle action on the fleet's two group names (blue/green) and nothing else:
    autoscaling:CompleteLifecycleAction's one resource type is autoScalingGroup, whose ARN is
    ``…:autoScalingGroup:${GroupId}:autoScalingGroupName/${GroupFriendlyName}`` (Service Authorization Reference)."""
    doc = iam.get_role_policy(RoleName=f"mmsctl-fleet-{name}", PolicyName="mmsctl-complete-lifecycle")["PolicyDocument"]
    prefix = f"arn:aws:autoscaling:us-east-1:{ACCOUNT}:autoScalingGroup:*:autoScalingGroupName/"
    assert doc["Statement"] == [{"Sid": "CompleteOwnLaunch", "Effect": "Allow",
                                 "Action": ["autoscaling:CompleteLifecycleAction"],
                                 "Resource": [f"{prefix}mmsctl-fleet-{name}", f"{prefix}mmsctl-fleet-{name}-green"]}]


def _assert_assets(aws: dict[str, Any], bucket: str, prefix: str, models: list[str]) -> None:
    """The asset bucket: private, encrypted, versioned, tagged; the prefix holds the models and the manifest,
    the shared wheels hold the wheelhouse; the role reads exactly those."""
    s3 = boto3.client("s3")
    block = s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"]
    assert all(block[k] for k in ("BlockPublicAcls", "IgnorePublicAcls", "BlockPublicPolicy", "RestrictPublicBuckets"))
    rule = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"][0]
    assert rule["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    assert {t["Key"]: t["Value"] for t in s3.get_bucket_tagging(Bucket=bucket)["TagSet"]}["mmsctl:managed"] == "true"
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"])
    manifest = _manifest(aws, bucket, prefix)
    assert sorted(_unhashed(k) for k in keys if k.startswith(prefix)) == sorted(
        [prefix + "manifests/*.json", *(prefix + m for m in models)])
    assert sorted(_unhashed(k) for k in keys if k.startswith("wheels/")) == [
        "wheels/*/mmsctl-0.1.0-py3-none-any.whl", "wheels/*/numpy-1.26.4-cp310-cp310-manylinux2014_x86_64.whl"]
    for item in manifest["assets"]:  # each under a key that names its sha256
        head = s3.head_object(Bucket=bucket, Key=item["key"])
        assert head["Metadata"]["sha256"] == item["sha256"] and item["sha256"] in item["key"]
    role = prefix.split("/")[1]
    doc = aws["iam"].get_role_policy(RoleName=f"mmsctl-fleet-{role}", PolicyName="mmsctl-boot-assets")["PolicyDocument"]
    [statement] = doc["Statement"]
    assert (statement["Sid"], statement["Effect"], statement["Action"]) == ("ReadBootAssets", "Allow", ["s3:GetObject"])
    assert statement["Resource"][:2] == [f"arn:aws:s3:::{bucket}/{prefix}*", f"arn:aws:s3:::{bucket}/wheels/*"]


def _unhashed(key: str) -> str:
    """*key* with the sha256 it names as ``*``."""
    return re.sub(r"[0-9a-f]{64}", "*", key)


def _manifest(aws: dict[str, Any], bucket: str, prefix: str) -> dict[str, Any]:
    """The manifest the fleet's launch template pins (its sha256 is in the boot script's settings)."""
    [template] = aws["ec2"].describe_launch_templates(
        Filters=[{"Name": f"tag:{FLEET}", "Values": [prefix.split("/")[1]]}])["LaunchTemplates"]
    data = aws["ec2"].describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
        "LaunchTemplateVersions"][0]["LaunchTemplateData"]
    settings = base64.b64decode(data["UserData"]).decode().split("boot.json\" <<'MMSCTL_EOF'\n", 1)[1]
    digest = json.loads(settings.split("\n", 1)[0])["assets"]["manifest_sha256"]
    body = boto3.client("s3").get_object(Bucket=bucket, Key=f"{prefix}manifests/{digest}.json")["Body"].read()
    assert hashlib.sha256(body).hexdigest() == digest
    return dict(json.loads(body))


def test_assets_upload_only_what_changed_and_go_with_the_fleet(aws: dict[str, Any], tmp_path: Path) -> None:
    """A second fleet uploads its models and no wheel; a local archive and an s3:// model reach the instance;
    destroy removes the fleet's prefix (every version), never the bucket or the shared wheels."""
    from tests.cloud.lambda_support import noop_mar

    s3 = boto3.client("s3")
    first = _create(aws, "one", "-m", "squeezenet", "--min", "1")
    assert [r["name"] for r in first["resources"] if r["kind"] == "assets"] == ["3 uploaded, 0 unchanged"]
    s3.create_bucket(Bucket="my-models")
    s3.put_object(Bucket="my-models", Key="prod/resnet.mar", Body=b"read once here")
    mine = noop_mar(tmp_path, "mine")
    second = _create(aws, "two", "-m", f"own={mine}", "-m", "r=s3://my-models/prod/resnet.mar", "--min", "1")
    assert [r["name"] for r in second["resources"] if r["kind"] == "assets"] == ["1 uploaded, 2 unchanged"]
    bucket = f"mmsctl-assets-{ACCOUNT}-us-east-1"
    _assert_assets(aws, bucket, "fleet/two/", ["models/*/own.mar"])
    manifest = _manifest(aws, bucket, "fleet/two/")
    assert manifest["s3"] == [{"uri": "s3://my-models/prod/resnet.mar", "dest": "models/r.mar", "region": "us-east-1",
                               "style": "virtual", "size": 14,
                               "sha256": hashlib.sha256(b"read once here").hexdigest()}]  # unversioned: hashed
    doc = aws["iam"].get_role_policy(RoleName="mmsctl-fleet-two", PolicyName="mmsctl-boot-assets")["PolicyDocument"]
    assert doc["Statement"][0]["Resource"][-1] == "arn:aws:s3:::my-models/prod/resnet.mar"

    gone = aws["cli"]("fleet", "destroy", "two", "-o", "json")
    assert gone.code == 0, gone.stderr
    assert any(d["kind"] == "assets" for d in json.loads(gone.stdout)["deleted"])
    left = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"])
    assert not any(k.startswith("fleet/two/") for k in left) and any(k.startswith("fleet/one/manifests/") for k in left)
    assert any(k.startswith("wheels/") for k in left)
    assert s3.list_object_versions(Bucket=bucket, Prefix="fleet/two/").get("Versions", []) == []
    assert s3.get_object(Bucket="my-models", Key="prod/resnet.mar")["Body"].read() == b"read once here"


def test_https_internal_and_ssh(aws: dict[str, Any]) -> None:
    cert = boto3.client("acm").request_certificate(DomainName="models.example.com")["CertificateArn"]
    out = _create(aws, "edge", "-m", "squeezenet", "--certificate-arn", cert, "--internal",
                  "--ssh-cidr", "203.0.113.0/24", "--min", "1", "--max", "3", "--server", "mmsctl")
    lb = _lb(aws, "edge")
    assert lb["Scheme"] == "internal" and out["endpoint"] == f"https://{lb['DNSName']}"
    listeners = {li["Port"]: li for li in aws["elb"].describe_listeners(LoadBalancerArn=lb["LoadBalancerArn"])["Listeners"]}
    assert set(listeners) == {80, 443}
    https = listeners[443]
    assert https["Protocol"] == "HTTPS" and https["Certificates"][0]["CertificateArn"] == cert
    assert https["SslPolicy"] == "ELBSecurityPolicy-TLS13-1-2-2021-06"
    assert https["DefaultActions"][0]["Type"] == "forward"
    redirect = listeners[80]["DefaultActions"][0]
    assert redirect["Type"] == "redirect" and redirect["RedirectConfig"]["Protocol"] == "HTTPS"
    groups = _groups(aws, "edge")
    vpc_cidr = aws["vpc"]["CidrBlock"]
    assert _ingress(groups["fleet-lb-security-group"]) == {(80, vpc_cidr), (443, vpc_cidr)}
    assert _ingress(groups["fleet-instance-security-group"]) == {
        (8080, groups["fleet-lb-security-group"]["GroupId"]),
        (8081, groups["fleet-admin-security-group"]["GroupId"]), (22, "203.0.113.0/24")}


def test_dry_run_lists_every_call_and_changes_nothing(aws: dict[str, Any]) -> None:
    proc = aws["cli"]("fleet", "create", "plan", "-m", "squeezenet", "--ami", aws["image"],
                   "--dry-run", "--wait", "-o", "json")
    assert proc.code == 0, proc.stderr
    assert "--wait skipped" in proc.stderr
    plan = json.loads(proc.stdout)
    planned = [(c["service"], c["operation"]) for c in plan["calls"] if not c["executed"]]
    assert planned == [
        ("s3", "CreateBucket"), ("s3", "PutPublicAccessBlock"), ("s3", "PutBucketEncryption"),
        ("s3", "PutBucketVersioning"), ("s3", "PutBucketTagging"), ("s3", "PutObject"), ("s3", "PutObject"),
        ("s3", "PutObject"),  # the model, the wheels (not built for a plan), the manifest
        ("iam", "CreateRole"), ("iam", "PutRolePolicy"), ("iam", "PutRolePolicy"), ("iam", "PutRolePolicy"),
        ("iam", "PutRolePolicy"),
        ("iam", "CreateInstanceProfile"),
        ("iam", "AddRoleToInstanceProfile"),
        ("ec2", "CreateSecurityGroup"), ("ec2", "AuthorizeSecurityGroupIngress"),
        ("ec2", "CreateSecurityGroup"),
        ("ec2", "CreateSecurityGroup"), ("ec2", "AuthorizeSecurityGroupIngress"),
        ("ec2", "RevokeSecurityGroupEgress"), ("ec2", "AuthorizeSecurityGroupEgress"),
        ("ec2", "CreateLaunchTemplate"),
        ("elbv2", "CreateTargetGroup"), ("elbv2", "ModifyTargetGroupAttributes"),
        ("elbv2", "CreateLoadBalancer"), ("elbv2", "CreateListener"),
        ("autoscaling", "CreateAutoScalingGroup"), ("autoscaling", "PutScalingPolicy"),
    ]
    assert all(not c["mutating"] for c in plan["calls"] if c["executed"])
    lookups = [(c["service"], c["operation"], json.dumps(c["parameters"], sort_keys=True))
               for c in plan["calls"] if not c["mutating"]]
    assert len(lookups) == len(set(lookups))  # each question once: GetRole and GetInstanceProfile were listed twice
    by_op = {c["operation"]: c["parameters"] for c in plan["calls"]}
    assert by_op["CreateTargetGroup"]["HealthCheckPath"] == "/v2/health/ready"
    # the hook is part of the group's creation: it exists before the group's first launch
    assert by_op["CreateAutoScalingGroup"]["LifecycleHookSpecificationList"] == [{
        "LifecycleHookName": "mmsctl-server-ready", "LifecycleTransition": "autoscaling:EC2_INSTANCE_LAUNCHING",
        "HeartbeatTimeout": 1800, "DefaultResult": "ABANDON"}]
    assert by_op["PutScalingPolicy"]["TargetTrackingConfiguration"]["TargetValue"] == 600.0
    assert by_op["CreateLaunchTemplate"]["LaunchTemplateData"]["UserData"].startswith("<shell script (base64)")
    assert plan["fleet"]["endpoint"].startswith("http://<new dns name of mmsctl-fleet-plan>")
    assert _nothing_tagged(aws, "plan") == []


def _nothing_tagged(aws: dict[str, Any], name: str) -> list[str]:
    """Every resource kind fleet create makes, listed; what still carries mmsctl:fleet=NAME."""
    ec2, elb, asg, iam = aws["ec2"], aws["elb"], aws["asg"], aws["iam"]
    left = []
    by_tag = [{"Name": f"tag:{FLEET}", "Values": [name]}]
    left += [f"instance {i['InstanceId']}" for r in ec2.describe_instances(Filters=by_tag)["Reservations"]
             for i in r["Instances"] if i["State"]["Name"] not in ("terminated", "shutting-down")]
    left += [f"volume {v['VolumeId']}" for v in ec2.describe_volumes(Filters=by_tag)["Volumes"]]
    left += [f"security group {g['GroupId']}" for g in ec2.describe_security_groups(Filters=by_tag)["SecurityGroups"]]
    left += [f"launch template {t['LaunchTemplateId']}"
             for t in ec2.describe_launch_templates(Filters=by_tag)["LaunchTemplates"]]
    left += [f"auto scaling group {g['AutoScalingGroupName']}" for g in asg.describe_auto_scaling_groups(
        Filters=[{"Name": f"tag:{FLEET}", "Values": [name]}])["AutoScalingGroups"]]
    lbs = elb.describe_load_balancers()["LoadBalancers"]
    tgs = elb.describe_target_groups()["TargetGroups"]
    listeners = [li for lb in lbs for li in elb.describe_listeners(LoadBalancerArn=lb["LoadBalancerArn"])["Listeners"]]
    arns = [x["LoadBalancerArn"] for x in lbs] + [x["TargetGroupArn"] for x in tgs] + [x["ListenerArn"] for x in listeners]
    if arns:
        left += [d["ResourceArn"] for d in elb.describe_tags(ResourceArns=arns)["TagDescriptions"]
                 if _tags(d).get(FLEET) == name]
    left += [f"role {r['RoleName']}" for r in iam.list_roles()["Roles"]
             if _tags(iam.get_role(RoleName=r["RoleName"])["Role"]).get(FLEET) == name]
    left += [f"instance profile {p['InstanceProfileName']}" for p in iam.list_instance_profiles()["InstanceProfiles"]
             if _tags(iam.get_instance_profile(InstanceProfileName=p["InstanceProfileName"])["InstanceProfile"]
                      ).get(FLEET) == name]
    # And the Resource Groups Tagging API's view (ec2 + elbv2 resources), terminated instances aside.
    tagging = boto3.client("resourcegroupstaggingapi").get_resources(
        TagFilters=[{"Key": FLEET, "Values": [name]}])["ResourceTagMappingList"]
    terminated = {i["InstanceId"] for r in ec2.describe_instances(Filters=by_tag)["Reservations"]
                  for i in r["Instances"] if i["State"]["Name"] == "terminated"}
    left += [m["ResourceARN"] for m in tagging if m["ResourceARN"].rsplit("/", 1)[-1] not in terminated]
    return left


def test_wait_returns_the_endpoint_when_targets_are_healthy(aws: dict[str, Any]) -> None:
    proc = aws["cli"]("fleet", "create", "web", "-m", "squeezenet", "--ami", aws["image"],
                   "--min", "2", "--desired", "3", "--max", "4", "--wait", "--wait-timeout", "60")
    assert proc.code == 0, proc.stderr
    endpoint = f"http://{_lb(aws, 'web')['DNSName']}"
    assert re.search(rf"Endpoint +{endpoint}\n", proc.stdout) and re.search(r"Healthy +3/3\n", proc.stdout)
    assert re.search(r"Lifecycle hook +mmsctl-server-ready: a new instance joins", proc.stdout)
    assert "web: 3/3 targets healthy" in proc.stderr
    health = aws["elb"].describe_target_health(TargetGroupArn=_tg(aws, "web")["TargetGroupArn"])
    assert sorted(h["TargetHealth"]["State"] for h in health["TargetHealthDescriptions"]) == ["healthy"] * 3


def test_waiter_polls_until_every_target_is_healthy(aws: dict[str, Any]) -> None:
    """The waiter's real calls: a stopped instance is not a healthy target (moto reports it
    'unused'), so the waiter keeps polling until it runs again, and gives up with exit 7."""
    from mmsctl.cloud.aws.session import open_session
    from mmsctl.cloud.fleet.query import wait_healthy
    from mmsctl.errors import RequestTimeout

    _create(aws, "slow", "-m", "squeezenet", "--min", "2")
    ids = [i["InstanceId"] for i in _asg(aws, "slow")["Instances"]]
    aws["ec2"].stop_instances(InstanceIds=[ids[0]])
    seen: list[int] = []
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 2:
            aws["ec2"].start_instances(InstanceIds=[ids[0]])

    state = wait_healthy(open_session(), "slow", timeout=600, sleep=sleep,
                         on_progress=lambda s: seen.append(s.healthy))
    assert seen == [1, 1, 2] and state.ready and slept == [5.0, 7.5]

    aws["ec2"].stop_instances(InstanceIds=[ids[1]])
    now = [0.0]

    def tick(seconds: float) -> None:
        now[0] += seconds

    with pytest.raises(RequestTimeout) as caught:
        wait_healthy(open_session(), "slow", timeout=30, sleep=tick, clock=lambda: now[0])
    assert caught.value.exit_code == 7
    assert f"1 of 2 targets healthy after 30s; {ids[1]}: unused" in caught.value.message


@pytest.mark.slow
def test_list_describe_members_and_scale(aws: dict[str, Any]) -> None:
    cli = aws["cli"]
    _create(aws, "prod", "-m", "squeezenet", "--min", "2", "--max", "5")
    listed = json.loads(cli("fleet", "list", "-o", "json").stdout)
    assert [(f["name"], f["in_service"], f["min"], f["max"], f["models"]) for f in listed] == [
        ("prod", 2, 2, 5, "squeezenet=squeezenet")]
    desc = json.loads(cli("fleet", "describe", "prod", "-o", "json").stdout)
    assert desc["target_group"]["health_check_path"] == "/v2/health/ready" and desc["target_group"]["healthy"] == 2
    assert desc["lifecycle_hook"] == {"name": "mmsctl-server-ready", "transition": "autoscaling:EC2_INSTANCE_LAUNCHING",
                                      "heartbeat_timeout_s": 1800, "default_result": "ABANDON"}
    assert desc["warm_pool"] is None and desc["notes"] == []
    assert desc["scaling_policy"]["metric"] == "ALBRequestCountPerTarget"
    assert {g["component"] for g in desc["security_groups"]} == {
        "fleet-lb-security-group", "fleet-instance-security-group", "fleet-admin-security-group"}
    table = cli("fleet", "describe", "prod")
    assert "GET /v2/health/ready → 200 every 15s" in table.stdout and "HTTP:80 forward" in table.stdout
    assert "mmsctl-server-ready: a new instance joins (or enters the warm pool) once its server is ready" in table.stdout
    # No saved context reaches the members' management API: the fan-out comparison says it was not made.
    assert desc["drift"] == [] and desc["beyond_template"]["checked"] is False
    assert ("models registered by fan-out: not checked (no saved context names fleet prod; "
            "`mmsctl fleet tunnel prod` writes one)") in table.stderr and "older launch template" not in table.stderr

    # A context whose member does not answer: the comparison is not made, and the reason is given.
    closed = any_free_port()
    assert cli("context", "add", "prod-down", "--members", f"http://127.0.0.1:{closed}").code == 0
    down = json.loads(cli("fleet", "describe", "prod", "--context", "prod-down", "-o", "json").stdout)
    assert down["beyond_template"]["checked"] is False and down["beyond_template"]["context"] == "prod-down"
    assert f"127.0.0.1:{closed}" in down["beyond_template"]["reason"]

    # Drift: the group moves to a new template version; today's members stay on the old one until replaced.
    group = _asg(aws, "prod")
    template_id = group["LaunchTemplate"]["LaunchTemplateId"]
    old_version = {i["InstanceId"]: i["LaunchTemplate"]["Version"] for i in group["Instances"]}
    new_version = aws["ec2"].create_launch_template_version(
        LaunchTemplateId=template_id, SourceVersion="1",
        LaunchTemplateData={"InstanceType": "c5.large"})["LaunchTemplateVersion"]["VersionNumber"]
    aws["asg"].update_auto_scaling_group(AutoScalingGroupName=group["AutoScalingGroupName"], LaunchTemplate={
        "LaunchTemplateId": template_id, "Version": str(new_version)})
    drifted = cli("fleet", "describe", "prod")
    assert f"2 member(s) on an older launch template version: {', '.join(sorted(old_version))}" in drifted.stderr
    assert "`mmsctl fleet rollout prod --strategy rolling` replaces them" in drifted.stderr
    for iid, version in old_version.items():  # the Template column shows each member's own version
        row = next(line for line in drifted.stdout.splitlines() if iid in line)
        assert re.split(r"[\s│|]+", row.strip(" │|"))[:2] == [iid, str(version)]
    assert json.loads(cli("fleet", "describe", "prod", "-o", "json").stdout)["drift"] == sorted(old_version)

    # Members: the group's in-service instances at their private addresses.
    members = json.loads(cli("fleet", "members", "prod", "-o", "json").stdout)
    described = {i["InstanceId"]: i["PrivateIpAddress"] for r in aws["ec2"].describe_instances(
        InstanceIds=[i["InstanceId"] for i in _asg(aws, "prod")["Instances"]])["Reservations"] for i in r["Instances"]}
    assert {m["id"]: m["private_ip"] for m in members} == described
    assert {m["management_url"] for m in members} == {f"http://{ip}:8081" for ip in described.values()}

    scaled = cli("fleet", "scale", "prod", "--desired", "4", "-o", "json")
    assert scaled.code == 0, scaled.stderr
    assert json.loads(scaled.stdout)["after"] == {"min": 2, "desired": 4, "max": 5}
    group = _asg(aws, "prod")
    assert (group["MinSize"], group["DesiredCapacity"], group["MaxSize"]) == (2, 4, 5)
    # A new max below the desired size moves it down; a dry run changes nothing.
    plan = json.loads(cli("fleet", "scale", "prod", "--max", "3", "--dry-run", "-o", "json").stdout)
    assert [c["parameters"] for c in plan["calls"] if c["operation"] == "UpdateAutoScalingGroup"] == [
        {"AutoScalingGroupName": "mmsctl-fleet-prod", "MinSize": 2, "MaxSize": 3, "DesiredCapacity": 3}]
    assert _asg(aws, "prod")["MaxSize"] == 5
    bad = cli("fleet", "scale", "prod", "--min", "6")
    assert bad.code == 2 and "min (6) <= desired" in bad.stderr
    ghost = cli("fleet", "scale", "ghost", "--min", "1")
    assert ghost.code == 9 and "no fleet 'ghost' in us-east-1" in ghost.stderr


@pytest.mark.slow
def test_destroy_leaves_nothing_tagged_and_twice_is_a_no_op(aws: dict[str, Any]) -> None:
    cli = aws["cli"]
    cert = boto3.client("acm").request_certificate(DomainName="models.example.com")["CertificateArn"]
    _create(aws, "prod", "-m", "squeezenet", "--certificate-arn", cert)
    _create(aws, "other", "-m", "squeezenet", "--min", "1")
    plan = cli("fleet", "destroy", "prod", "--dry-run", "-o", "json")
    assert plan.code == 0, plan.stderr
    planned = [c["operation"] for c in json.loads(plan.stdout)["calls"] if not c["executed"]]
    assert planned == ["DeletePolicy", "DeleteAutoScalingGroup", "DeleteListener", "DeleteListener",
                       "DeleteLoadBalancer", "DeleteTargetGroup", "DeleteLaunchTemplate",
                       "RevokeSecurityGroupIngress", "RevokeSecurityGroupEgress", "DeleteSecurityGroup",
                       "DeleteSecurityGroup", "DeleteSecurityGroup", "RemoveRoleFromInstanceProfile",
                       "DeleteInstanceProfile", "DeleteRolePolicy", "DeleteRolePolicy", "DeleteRolePolicy", "DeleteRolePolicy",
                       "DeleteRole",
                       "DeleteObjects"]  # the fleet's asset prefix
    assert len(_nothing_tagged(aws, "prod")) > 10  # the dry run deleted nothing

    done = cli("fleet", "destroy", "prod", "-o", "json")
    assert done.code == 0, done.stderr
    kinds = [d["kind"] for d in json.loads(done.stdout)["deleted"]]
    assert kinds == ["scaling-policy", "auto-scaling-group", "listener", "listener", "load-balancer", "target-group",
                     "launch-template", "security-group", "security-group", "security-group", "instance-profile",
                     "iam-role", "assets"]
    assert _nothing_tagged(aws, "prod") == []
    assert len(_nothing_tagged(aws, "other")) > 10  # the other fleet is untouched
    again = cli("fleet", "destroy", "prod")
    assert again.code == 0 and again.stdout == "" and "nothing left of fleet prod in us-east-1" in again.stderr
    shown = cli("fleet", "destroy", "other")  # the table a terminal user reads
    table = [line.split() for line in shown.stdout.splitlines()]
    assert shown.code == 0 and table[0] == ["DELETED", "ID"] and table[2][:2] == ["auto-scaling-group", "mmsctl-fleet-other"]
    assert cli("fleet", "describe", "prod").code == 9


def test_same_named_resources_without_the_tag_are_never_touched(aws: dict[str, Any]) -> None:
    cli, iam = aws["cli"], aws["iam"]
    iam.create_role(RoleName="mmsctl-fleet-ghost", Path="/mmsctl-fleet/", AssumeRolePolicyDocument="{}")
    refused = cli("fleet", "create", "ghost", "-m", "squeezenet", "--ami", aws["image"])
    assert refused.code == 9 and "not tagged mmsctl:fleet=ghost: role mmsctl-fleet-ghost" in refused.stderr
    kept = cli("fleet", "destroy", "ghost")
    assert kept.code == 0, kept.stderr
    assert "kept role mmsctl-fleet-ghost: it has the fleet's name but not its mmsctl:fleet=ghost tag" in kept.stderr
    assert iam.get_role(RoleName="mmsctl-fleet-ghost")["Role"]["Path"] == "/mmsctl-fleet/"
    assert iam.list_role_policies(RoleName="mmsctl-fleet-ghost")["PolicyNames"] == []


def test_ec2_commands_leave_fleets_alone(aws: dict[str, Any]) -> None:
    cli = aws["cli"]
    _create(aws, "prod", "-m", "squeezenet", "--min", "1")
    iid = _asg(aws, "prod")["Instances"][0]["InstanceId"]
    assert json.loads(cli("ec2", "list", "-o", "json").stdout) == []
    refused = cli("ec2", "terminate", iid)
    assert refused.code == 9 and "belongs to fleet 'prod'" in refused.stderr
    assert "mmsctl fleet scale prod" in refused.stderr
    assert cli("ec2", "cleanup").code == 0
    assert len(_groups(aws, "prod")) == 3


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["fleet", "create", "Prod_1", "-m", "squeezenet"], 2, "bad fleet name 'Prod_1'"),
        (["fleet", "create", "a-very-long-fleet-name", "-m", "squeezenet"], 2, "bad fleet name"),
        (["fleet", "create", "x", "-m", "squeezenet", "--min", "5", "--max", "2"], 2,
         "sizes must satisfy 1 <= min (5) <= desired (5) <= max (2) <= 1000 (--min, --desired, --max)"),
        (["fleet", "create", "x"], 2, "a fleet needs models: the balancer's health check asks a model (--models)"),
        (["fleet", "create", "x", "-m", "squeezenet", "--ssh-cidr", "10.0.0.1/8"], 2,
         "SSH CIDR '10.0.0.1/8': 10.0.0.1/8 has host bits set (--ssh-cidr)"),
        (["fleet", "create", "x", "-m", "squeezenet", "--ssh-cidr", "0.0.0.0/0"], 2,
         "0.0.0.0/0 opens SSH to the whole internet (--ssh-cidr, --allow-world-ssh)"),
        (["fleet", "create", "x", "-m", "squeezenet", "--ssh-cidr", "::/0"], 2, "::/0 opens SSH to the whole internet"),
        (["fleet", "create", "x", "-m", "squeezenet", "--ssh-cidr", "0.0.0.0/1"], 2,
         "0.0.0.0/1 opens SSH to a /1, most of the internet"),
        (["fleet", "create", "x", "-m", "squeezenet", "--target-requests-per-instance", "0"], 2,
         "requests per second (--target-requests-per-instance)"),
        (["fleet", "create", "x", "-m", "squeezenet", "--eia", "medium", "--region", "eu-central-1"], 9,
         "Elastic Inference never existed in eu-central-1"),
        (["fleet", "describe", "ghost"], 9, "no fleet 'ghost' in us-east-1"),
        (["fleet", "scale", "ghost"], 2, "pass --min, --max or --desired"),
    ],
)
def test_errors_are_one_line(cli: Any, args: list[str], code: int, message: str) -> None:
    proc = cli(*args)
    assert proc.code == code, proc.stderr
    first = proc.stderr.strip().splitlines()[0]
    assert first.startswith("error: ") and message in first, proc.stderr
    assert "Traceback" not in proc.stderr


def test_refusals_that_need_aws(aws: dict[str, Any]) -> None:
    cli = aws["cli"]
    subnet = aws["ec2"].describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])["Subnets"][0]
    one_zone = cli("fleet", "create", "x", "-m", "squeezenet", "--ami", aws["image"],
                       "--subnets", subnet["SubnetId"])
    assert one_zone.code == 2 and "subnets in 2 availability zones at least" in one_zone.stderr
    _create(aws, "prod", "-m", "squeezenet", "--min", "1")
    again = cli("fleet", "create", "prod", "-m", "squeezenet", "--ami", aws["image"])
    assert again.code == 9 and "fleet 'prod' already exists in us-east-1" in again.stderr
    # AWS refuses a step half-way: the error says how to remove what was made, and destroy does.
    bad_cert = "arn:aws:acm:us-east-1:123456789012:certificate/not-there"
    half = cli("fleet", "create", "half", "-m", "squeezenet", "--ami", aws["image"],
                   "--certificate-arn", bad_cert)
    assert half.code == 9, half.stderr
    assert "CreateListener" in half.stderr and "`mmsctl fleet destroy half` removes whatever exists" in half.stderr
    assert _nothing_tagged(aws, "half") != []
    assert cli("fleet", "destroy", "half").code == 0
    assert _nothing_tagged(aws, "half") == []


def test_context_for_a_fleet_finds_its_balancer_and_members(aws: dict[str, Any], capsys) -> None:
    """`context add --fleet`: predict's URL is the balancer; the members (found when a command runs)
    are the group's in-service instances at their private addresses. Nothing here contacts them:
    moto's instances have no servers, and tests talk to 127.0.0.1 only."""
    from mmsctl.cli.fanout import fleet_members
    from mmsctl.client.contexts import ContextStore
    from tests.support.cli import run_mmsctl

    _create(aws, "prod", "-m", "squeezenet", "--min", "3", "--max", "3")
    added = run_mmsctl(capsys, "context", "add", "prod", "--fleet", "prod")
    assert added.code == 0, added.stderr
    ctx = ContextStore().get("prod")
    assert (ctx.fleet, ctx.region, ctx.members, ctx.management_url) == ("prod", "us-east-1", (), "")
    assert ctx.inference_url == f"http://{_lb(aws, 'prod')['DNSName']}" and ctx.is_fleet
    ips = {i["InstanceId"]: i["PrivateIpAddress"] for r in aws["ec2"].describe_instances(
        InstanceIds=[i["InstanceId"] for i in _asg(aws, "prod")["Instances"]])["Reservations"] for i in r["Instances"]}
    assert {(m.name, m.management_url, m.inference_url) for m in fleet_members(ctx)} == {
        (iid, f"http://{ip}:8081", f"http://{ip}:8080") for iid, ip in ips.items()}
    listed = run_mmsctl(capsys, "context", "list")
    assert "fleet prod (us-east-1)" in listed.stdout
    missing = run_mmsctl(capsys, "context", "add", "nope", "--fleet", "nope")
    assert missing.code == 9 and "no fleet 'nope' in us-east-1" in missing.stderr
    both = run_mmsctl(capsys, "context", "add", "x", "--fleet", "prod", "--members", "http://h:8081")
    assert both.code == 2 and "pass --members or --fleet, not both" in both.stderr
    # A fleet scaled to zero has no member to manage: a clear error, not an empty table.
    aws["asg"].update_auto_scaling_group(AutoScalingGroupName="mmsctl-fleet-prod", MinSize=0, DesiredCapacity=0)
    from mmsctl.errors import CloudError

    with pytest.raises(CloudError, match="fleet 'prod' has no in-service instance to manage"):
        fleet_members(ContextStore().get("prod"))


def test_ssh_config_tunnels_each_member_and_names_the_context(aws: dict[str, Any], capsys) -> None:
    from tests.support.cli import run_mmsctl

    _create(aws, "prod", "-m", "squeezenet", "--min", "2", "--key-name", "me")
    proc = aws["cli"]("fleet", "ssh-config", "prod", "--local-port", "28080")
    assert proc.code == 0, proc.stderr
    ids = sorted(i["InstanceId"] for i in _asg(aws, "prod")["Instances"])
    for i, iid in enumerate(ids):
        assert f"Host mmsctl-fleet-prod-{iid}\n" in proc.stdout
        assert (f"LocalForward {28080 + 3 * i} 127.0.0.1:8080\n    LocalForward {28081 + 3 * i} 127.0.0.1:8081\n"
                f"    LocalForward {28082 + 3 * i} 127.0.0.1:8082") in proc.stdout
    assert "IdentityFile ~/.ssh/me.pem" in proc.stdout
    assert "mmsctl fleet tunnel prod --local-port 28080\n" in proc.stdout  # the command that opens them
    command = proc.stdout.strip().splitlines()[-1].removeprefix("# with these entries open: mmsctl ").split()
    assert command[:3] == ["context", "add", "prod-tunnel"]
    assert run_mmsctl(capsys, *command).code == 0  # the printed command is a working context


def test_fleet_cost_from_a_fleet_and_a_saved_bench_run(aws: dict[str, Any], tmp_path) -> None:
    from mmsctl.loadtest.results import BenchRun, Level, Sweep, save_run

    run = tmp_path / "bench.json"
    save_run(BenchRun(sweeps=[Sweep("local", "http://127.0.0.1:8080", "squeezenet", levels=[
        Level(concurrency=1, duration_s=10.0, sent=100, ok=100), Level(concurrency=8, duration_s=10.0, sent=300, ok=250),
    ])]), run)
    _create(aws, "prod", "-m", "squeezenet", "--min", "2", "--desired", "3", "--max", "8")
    proc = aws["cli"]("fleet", "cost", "prod", "--from-bench", str(run), "-o", "json")
    assert proc.code == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [(r["instances"], r["instance_type"], r["throughput_per_instance"]) for r in rows] == [
        (2, "c5.xlarge", 25.0), (3, "c5.xlarge", 25.0), (8, "c5.xlarge", 25.0)]
    assert rows[2]["hourly_price"] == pytest.approx(8 * 0.17 + 0.0225)
    assert rows[2]["cost_per_100k"] == pytest.approx((8 * 0.17 + 0.0225) / (8 * 25.0 * 3600) * 100_000, abs=1e-4)


def test_an_elastic_inference_fleet_shares_ec2s_endpoint_and_keeps_cleanup_off_it(aws: dict[str, Any]) -> None:
    ec2, iam, cli = aws["ec2"], aws["iam"], aws["cli"]
    out = _create(aws, "ei", "-m", "squeezenet", "--eia", "medium", "--min", "1")
    assert out["accelerator"] == "eia1.medium" and out["instance_type"] == "m5.large"
    assert any("retired" in w for w in out["warnings"])
    [template] = ec2.describe_launch_templates(Filters=[{"Name": f"tag:{FLEET}", "Values": ["ei"]}])["LaunchTemplates"]
    data = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
        "LaunchTemplateVersions"][0]["LaunchTemplateData"]
    assert data["ElasticInferenceAccelerators"] == [{"Type": "eia1.medium", "Count": 1}]
    ei_sg = ec2.describe_security_groups(Filters=[{"Name": "tag:mmsctl:component", "Values": ["ei-security-group"]}])[
        "SecurityGroups"][0]["GroupId"]
    assert data["SecurityGroupIds"] == [_groups(aws, "ei")["fleet-instance-security-group"]["GroupId"], ei_sg]
    assert sorted(iam.list_role_policies(RoleName="mmsctl-fleet-ei")["PolicyNames"]) == [
        "mmsctl-boot-assets", "mmsctl-boot-status", "mmsctl-complete-lifecycle", "mmsctl-elastic-inference-connect",
        "mmsctl-session-manager"]
    refused = cli("ec2", "cleanup")
    assert refused.code == 9 and "fleet(s) ei use the Elastic Inference endpoint" in refused.stderr
    assert cli("fleet", "destroy", "ei").code == 0
    assert _nothing_tagged(aws, "ei") == []
    assert len(ec2.describe_vpc_endpoints()["VpcEndpoints"]) == 1  # shared with `ec2 launch`: ec2 cleanup's
    cleaned = cli("ec2", "cleanup", "-o", "json")
    assert cleaned.code == 0, cleaned.stderr
    assert sorted(d["kind"] for d in json.loads(cleaned.stdout)["deleted"]) == ["security-group", "vpc-endpoint"]


def test_a_warm_pool_keeps_booted_instances_stopped(aws: dict[str, Any]) -> None:
    cli = aws["cli"]
    out = _create(aws, "warm", "-m", "squeezenet", "--min", "1", "--max", "4", "--warm-pool", "2")
    assert {"kind": "warm-pool", "id": "mmsctl-fleet-warm (2 stopped)"} in out["resources"]
    pool = aws["asg"].describe_warm_pool(AutoScalingGroupName="mmsctl-fleet-warm")["WarmPoolConfiguration"]
    assert (pool["MinSize"], pool["PoolState"], pool["InstanceReusePolicy"]) == (2, "Stopped", {"ReuseOnScaleIn": True})
    desc = json.loads(cli("fleet", "describe", "warm", "-o", "json").stdout)
    assert desc["warm_pool"]["min_size"] == 2 and desc["warm_pool"]["state"] == "Stopped"
    # the hook that makes the pool serve: each instance enters it only after its boot completed the action
    assert desc["lifecycle_hook"]["name"] == "mmsctl-server-ready" and desc["notes"] == []
    table = cli("fleet", "describe", "warm").stdout
    assert re.search(r"Warm pool +2 kept stopped, reused on scale-in; instances: none yet", table)  # moto lists none
    latest = str(desc["launch_templates"][0]["latest_version"])
    assert {i["template_version"] for i in desc["instances"]} <= {latest, "$Latest"} and desc["drift"] == []
    too_big = cli("fleet", "create", "w2", "-m", "squeezenet", "--max", "3", "--warm-pool", "5")
    assert too_big.code == 2 and "a warm pool of 5 must be 0 to the group's max (3) (--warm-pool, --max)" in too_big.stderr
    gone = cli("fleet", "destroy", "warm", "-o", "json")
    assert gone.code == 0, gone.stderr
    assert aws["asg"].describe_auto_scaling_groups(AutoScalingGroupNames=["mmsctl-fleet-warm"])["AutoScalingGroups"] == []
    assert aws["asg"].describe_lifecycle_hooks(AutoScalingGroupName="mmsctl-fleet-warm")["LifecycleHooks"] == []


def test_what_aws_shows_of_the_launch_lifecycle(moto: Moto) -> None:
    """The lifecycle moto does not run (it puts every instance InService at once and lists no warm-pool instance),
    as AWS answers it, through botocore's Stubber (AWS's shapes: botocore's examples, the DescribeWarmPool reference):
    an instance held by the hook (Pending:Wait), one booting into the pool (Warmed:Pending:Wait), one ready and
    stopped there, one whose boot abandoned (Terminating). What `fleet describe` and `--wait` make of them."""
    from botocore.stub import Stubber

    from mmsctl.cli.fleet.commands import _hook_line, _warm_line
    from mmsctl.cloud.aws.session import open_session
    from mmsctl.cloud.fleet import asg
    from mmsctl.cloud.fleet.query import FleetHealth, not_in_service

    template = {"LaunchTemplateId": "lt-0a20c965061f64abc", "LaunchTemplateName": "mmsctl-fleet-g", "Version": "1"}

    def member(iid: str, state: str) -> dict[str, Any]:
        return {"InstanceId": iid, "InstanceType": "c5.xlarge", "AvailabilityZone": "us-east-1a",
                "LifecycleState": state, "HealthStatus": "Healthy", "LaunchTemplate": template,
                "ProtectedFromScaleIn": False}

    session = open_session()
    with Stubber(session.client("autoscaling")) as stub:
        stub.add_response("describe_warm_pool", {
            "WarmPoolConfiguration": {"MinSize": 2, "PoolState": "Stopped",
                                      "InstanceReusePolicy": {"ReuseOnScaleIn": True}},
            "Instances": [member("i-0b5e5e7521cfaa46c", "Warmed:Pending:Wait"),
                          member("i-0e21af9dcfb7aa6bf", "Warmed:Stopped")]}, {"AutoScalingGroupName": "mmsctl-fleet-g"})
        stub.add_response("describe_lifecycle_hooks", {"LifecycleHooks": [{
            "AutoScalingGroupName": "mmsctl-fleet-g", "DefaultResult": "ABANDON", "GlobalTimeout": 172800,
            "HeartbeatTimeout": 1800, "LifecycleHookName": "mmsctl-server-ready",
            "LifecycleTransition": "autoscaling:EC2_INSTANCE_LAUNCHING"}]},
            {"AutoScalingGroupName": "mmsctl-fleet-g", "LifecycleHookNames": ["mmsctl-server-ready"]})
        stub.add_response("describe_auto_scaling_groups", {"AutoScalingGroups": [{
            "AutoScalingGroupName": "mmsctl-fleet-g", "MinSize": 2, "MaxSize": 4, "DesiredCapacity": 3,
            "DefaultCooldown": 300, "AvailabilityZones": ["us-east-1a"], "HealthCheckType": "ELB",
            "CreatedTime": "2026-12-06T05:13:01Z", "LaunchTemplate": template,
            "Instances": [member("i-0598c7d356eba48d7", "InService"), member("i-0c8f3a7e0d5a1b2c3", "Pending:Wait"),
                          member("i-0f3b1c2d4e5f60718", "Terminating")]}]},
            {"AutoScalingGroupNames": ["mmsctl-fleet-g"]})
        pool = asg.warm_pool_of(session, "mmsctl-fleet-g")
        hook = asg.launch_hook_of(session, "mmsctl-fleet-g")
        group = asg.find_group(session, "mmsctl-fleet-g")
        stub.assert_no_pending_responses()
    assert pool is not None and pool["lifecycle"] == {"Warmed:Pending:Wait": 1, "Warmed:Stopped": 1}
    assert _warm_line(pool) == "2 kept stopped, reused on scale-in; instances: 1 Warmed:Pending:Wait, 1 Warmed:Stopped"
    assert hook == {"name": "mmsctl-server-ready", "transition": "autoscaling:EC2_INSTANCE_LAUNCHING",
                    "heartbeat_timeout_s": 1800, "default_result": "ABANDON"}
    assert _hook_line(hook).endswith("after 1800 s without that, ABANDON")
    state = FleetHealth(desired=3, in_service=1, targets=[{"id": "i-0598c7d356eba48d7", "state": "healthy"}],
                        pending=not_in_service(group or {}))
    assert not state.ready and state.not_ready() == [
        "i-0c8f3a7e0d5a1b2c3: Pending:Wait (its boot has not completed the launch hook)",
        "i-0f3b1c2d4e5f60718: Terminating"]
