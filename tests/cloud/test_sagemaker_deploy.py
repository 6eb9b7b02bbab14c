"""`mmsctl sagemaker deploy` (the real entry point, in-process) against a real moto server.

moto keeps models, endpoint configurations and endpoints (InService at once), scalable targets and
policies, roles, buckets, log groups and ECR images: each test reads back through boto3 what exists after.
"""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.cloud.conftest import Moto, run_cli_here
from tests.cloud.lambda_support import noop_mar, pushed_image, tags_of
from tests.cloud.sagemaker_support import ACCOUNT, IMAGE, NAME, cli, deploy, mar  # noqa: F401 - fixtures


def mutating(result: dict[str, Any]) -> list[str]:
    return [f"{c['service']}.{c['operation']}" for c in result["calls"] if c["mutating"]]


def test_deploy_makes_a_real_time_endpoint_with_scaling_and_a_least_privilege_role(moto: Moto, cli: Any,
                                                                                     mar: Path) -> None:
    digest = pushed_image(NAME)
    out = deploy(cli, "--model", str(mar), "--image", IMAGE, "--count", "2", "--min", "1", "--max", "4",
                 "--target-requests-per-instance", "5", "--workers", "2")
    sm, s3, iam = boto3.client("sagemaker"), boto3.client("s3"), boto3.client("iam")
    assert mutating(out) == [
        "s3.CreateBucket", "s3.PutPublicAccessBlock", "s3.PutBucketEncryption", "s3.PutBucketVersioning",
        "s3.PutBucketTagging", "s3.PutObject", "iam.CreateRole", "iam.PutRolePolicy", "logs.CreateLogGroup",
        "logs.PutRetentionPolicy", "sagemaker.CreateModel", "sagemaker.CreateEndpointConfig",
        "sagemaker.CreateEndpoint", "application-autoscaling.RegisterScalableTarget",
        "application-autoscaling.PutScalingPolicy"]
    # The model: the image pinned to its digest, model.tar.gz in the asset bucket, SageMaker's worker setting.
    model = sm.describe_model(ModelName=out["model"])
    container = model["PrimaryContainer"]
    assert container["Image"] == f"{IMAGE.rsplit(':', 1)[0]}@{digest}"
    bucket, key = out["model_data"].removeprefix("s3://").split("/", 1)
    assert bucket == f"mmsctl-assets-{ACCOUNT}-us-east-1" and key.startswith(f"sagemaker/{NAME}/")
    assert container["ModelDataUrl"] == out["model_data"]
    assert container["Environment"] == {"SAGEMAKER_MODEL_SERVER_WORKERS": "2"}
    # The configuration: one variant on the instances asked for; the endpoint on it, InService.
    config = sm.describe_endpoint_config(EndpointConfigName=out["config"])["ProductionVariants"]
    assert config == [{"VariantName": "AllTraffic", "ModelName": out["model"], "InstanceType": "ml.m5.large",
                       "InitialInstanceCount": 2, "InitialVariantWeight": 1.0}]
    endpoint = sm.describe_endpoint(EndpointName=NAME)
    assert endpoint["EndpointStatus"] == "InService" and endpoint["EndpointConfigName"] == out["config"]
    # Scaling: 1-4 instances, target tracking at 5 requests/s = 300 invocations a minute per instance.
    aas = boto3.client("application-autoscaling")
    target = aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]
    assert [(t["ResourceId"], t["MinCapacity"], t["MaxCapacity"]) for t in target] == [
        (f"endpoint/{NAME}/variant/AllTraffic", 1, 4)]
    policy = aas.describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"][0]
    tracking = policy["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["TargetValue"] == 300.0
    assert tracking["PredefinedMetricSpecification"]["PredefinedMetricType"] == "SageMakerVariantInvocationsPerInstance"
    # The role: SageMaker alone may assume it; it may pull that repository, read that object, write its logs.
    role = iam.get_role(RoleName=f"mmsctl-sagemaker-{NAME}")["Role"]
    assert role["Path"] == "/mmsctl-sagemaker/" and role["Arn"] == model["ExecutionRoleArn"]
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}]
    doc = iam.get_role_policy(RoleName=role["RoleName"], PolicyName="mmsctl-sagemaker-endpoint")["PolicyDocument"]
    assert doc == {"Version": "2012-10-17", "Statement": [
        {"Sid": "PullImage", "Effect": "Allow",
         "Action": ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
         "Resource": [f"arn:aws:ecr:us-east-1:{ACCOUNT}:repository/mmsctl-lambda/{NAME}"]},
        {"Sid": "RegistryLogin", "Effect": "Allow", "Action": ["ecr:GetAuthorizationToken"], "Resource": "*"},
        {"Sid": "OwnLogGroup", "Effect": "Allow",
         "Action": ["logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"],
         "Resource": f"arn:aws:logs:us-east-1:{ACCOUNT}:log-group:/aws/sagemaker/Endpoints/{NAME}:*"},
        {"Sid": "ReadModel", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": [f"arn:aws:s3:::{bucket}/{key}"]},
    ]}
    # Tags on everything.
    tag = {"mmsctl:sagemaker": NAME}
    for arn in (endpoint["EndpointArn"], model["ModelArn"],
                sm.describe_endpoint_config(EndpointConfigName=out["config"])["EndpointConfigArn"]):
        assert tags_of(sm.list_tags(ResourceArn=arn)["Tags"]).items() >= tag.items(), arn
    assert tags_of(iam.list_role_tags(RoleName=role["RoleName"])["Tags"]).items() >= tag.items()
    group = boto3.client("logs").list_tags_log_group(logGroupName=f"/aws/sagemaker/Endpoints/{NAME}")["tags"]
    assert group.items() >= tag.items()
    assert s3.get_object_tagging(Bucket=bucket, Key=key)["TagSet"] == [{"Key": "mmsctl:sagemaker", "Value": NAME}]


def test_model_data_is_the_archive_as_sagemaker_extracts_it(moto: Moto, cli: Any, mar: Path, tmp_path: Path) -> None:
    """model.tar.gz holds the archive under its name (the serve entry finds the manifest one level down),
    reproducibly: the same archive gives the same object, so a second deploy uploads and changes nothing."""
    pushed_image(NAME)
    first = deploy(cli, "--model", str(mar), "--image", IMAGE)
    bucket, key = first["model_data"].removeprefix("s3://").split("/", 1)
    boto3.client("s3").download_file(bucket, key, str(tmp_path / "model.tar.gz"))
    with tarfile.open(tmp_path / "model.tar.gz") as tf:
        names = sorted(m.name for m in tf.getmembers())
        assert all(m.mtime == 0 and m.uid == 0 for m in tf.getmembers())
    assert "noop/MAR-INF/MANIFEST.json" in names and "noop/noop_service.py" in names
    second = deploy(cli, "--model", str(mar), "--image", IMAGE)
    assert mutating(second) == []
    assert {c["action"] for c in second["changes"]} == {"reuse"}


def test_a_serverless_endpoint(moto: Moto, cli: Any, mar: Path) -> None:
    pushed_image(NAME)
    out = deploy(cli, "--model", str(mar), "--image", IMAGE, "--serverless", "3072", "--max-concurrency", "20")
    variant = boto3.client("sagemaker").describe_endpoint_config(EndpointConfigName=out["config"])[
        "ProductionVariants"][0]
    assert variant["ServerlessConfig"] == {"MemorySizeInMB": 3072, "MaxConcurrency": 20}
    assert "InstanceType" not in variant
    assert boto3.client("application-autoscaling").describe_scalable_targets(
        ServiceNamespace="sagemaker")["ScalableTargets"] == []


def test_another_model_on_a_live_endpoint_plans_an_update_endpoint(moto: Moto, cli: Any, mar: Path,
                                                                  tmp_path: Path) -> None:
    """A deploy with another model on a live endpoint is an UpdateEndpoint (moto has none: the call is pinned in
    tests/cloud/test_sagemaker_update.py); here the image changes nothing else and the plan says so."""
    pushed_image(NAME)
    first = deploy(cli, "--model", str(mar), "--image", IMAGE)
    other = noop_mar(tmp_path, "other")
    proc = cli("sagemaker", "deploy", NAME, "--model", str(other), "--image", IMAGE, "--dry-run", "-o", "json")
    assert proc.code == 0, proc.stderr
    plan = json.loads(proc.stdout)
    updates = [c for c in plan["calls"] if c["operation"] == "UpdateEndpoint"]
    assert updates and updates[0]["parameters"]["EndpointName"] == NAME
    assert updates[0]["parameters"]["EndpointConfigName"] != first["config"]
    assert not any(c["executed"] for c in plan["calls"] if c["mutating"])


@pytest.mark.parametrize("args, line", [
    (("--serverless", "1500"), "serverless memory 1500 MB: SageMaker takes 1024, 2048, 3072, 4096, 5120, 6144 MB "
                               "(--serverless)"),
    (("--serverless", "2048", "--count", "2"), "a serverless endpoint has no instances: an instance type, count, "
                                               "minimum and maximum are for real-time endpoints (--serverless, --count)"),
    (("--serverless", "2048", "--max-concurrency", "500"), "max concurrency 500: 1 to 200 (--max-concurrency)"),
    (("--max-concurrency", "3"), "a maximum concurrency is for serverless endpoints: give their memory too "
                                 "(--max-concurrency, --serverless)"),
    (("--count", "3", "--max", "2"), "instances: need 1 <= minimum (3) <= count (3) <= maximum (2) <= 100 "
                                     "(--min, --count, --max)"),
    (("--min", "1"), "a minimum scales the endpoint: give a maximum too (--min, --max)"),
    (("--instance-type", "m5.large"), "instance type 'm5.large' is not one of SageMaker's (--instance-type)"),
    (("--target-requests-per-instance", "0", "--max", "2"),
     "requests per instance the scaling keeps must be over 0 and at most 10000 (--target-requests-per-instance)"),
    (("--workers", "0"), "workers must be from 1 to 64, not 0 (--workers)"),
    (("--timeout", "0"), "timeout must be from 1 to 3600, not 0 (--timeout)"),
    (("--model-source", "image"), "model source 'image' serves the model baked into the image: name no model "
                                  "(--model, --model-source)"),
    (("--model-source", "ecr"), "model source 'ecr': s3 or image (--model-source)"),
])
def test_bad_flags_are_refused_before_any_aws_call(moto: Moto, cli: Any, mar: Path, args: tuple[str, ...],
                                                   line: str) -> None:
    """One line naming the flags: the core names the arguments (tests/cli/test_hints.py), the CLI their flags."""
    proc = cli("sagemaker", "deploy", NAME, "--model", str(mar), "--image", IMAGE, *args)
    assert proc.code == 2 and proc.stderr.splitlines()[0] == f"error: {line}", proc.stderr
    assert boto3.client("iam").list_roles()["Roles"] == []


def test_no_model_says_both_ways_to_give_one(moto: Moto, cli: Any) -> None:
    proc = cli("sagemaker", "deploy", NAME, "--image", IMAGE)
    assert proc.code == 2 and proc.stderr.splitlines() == [
        "error: no model to serve: name one, or serve the one baked into the image with model source 'image' "
        "(--model, --model-source)"]


def test_bad_names_and_images_are_refused(moto: Moto, cli: Any, mar: Path) -> None:
    proc = cli("sagemaker", "deploy", "Kitten_1", "--model", str(mar), "--image", IMAGE)
    assert proc.code == 2 and "endpoint name 'Kitten_1'" in proc.stderr
    proc = cli("sagemaker", "deploy", NAME, "--model", str(mar), "--image", "docker.io/library/python:3.11")
    assert proc.code == 2 and proc.stderr.splitlines() == [
        "error: image 'docker.io/library/python:3.11' is not an ECR image URI: SageMaker pulls "
        "ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO[:TAG] (--image)",
        "hint: push one with: mmsctl lambda build MODEL --push --name NAME"]


def test_a_missing_image_changes_nothing(moto: Moto, cli: Any, mar: Path) -> None:
    proc = cli("sagemaker", "deploy", NAME, "--model", str(mar), "--image", IMAGE)
    assert proc.code == 2 and proc.stderr.splitlines() == [
        f"error: image {IMAGE} is not in ECR: nothing was changed (--image)",
        "hint: build and push it: mmsctl lambda build MODEL --push --name NAME"]
    assert boto3.client("iam").list_roles()["Roles"] == []
    assert boto3.client("s3").list_buckets()["Buckets"] == []


def test_an_image_in_another_region_is_refused(moto: Moto, cli: Any, mar: Path) -> None:
    """SageMaker pulls the image (and reads the model data) only in the endpoint's own region."""
    other = IMAGE.replace("us-east-1", "eu-west-1")
    proc = cli("sagemaker", "deploy", NAME, "--model", str(mar), "--image", other)
    assert proc.code == 2 and proc.stderr.splitlines() == [
        f"error: image {other} is in eu-west-1, the endpoint in us-east-1: SageMaker pulls only from the "
        "endpoint's own region (--image)", "hint: push the image to us-east-1 too"]


def test_model_data_of_yours_in_another_region_is_refused(moto: Moto, cli: Any) -> None:
    pushed_image(NAME)
    s3 = boto3.client("s3", region_name="eu-west-1")
    s3.create_bucket(Bucket="my-models", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    s3.put_object(Bucket="my-models", Key="model.tar.gz", Body=b"x")
    proc = cli("sagemaker", "deploy", NAME, "--model", "s3://my-models/model.tar.gz", "--image", IMAGE)
    assert proc.code == 2 and proc.stderr.splitlines() == [
        "error: s3://my-models is in eu-west-1, the endpoint in us-east-1: SageMaker reads model data only from "
        "the endpoint's region (--model)"]
    proc = cli("sagemaker", "deploy", NAME, "--model", "s3://my-models/", "--image", IMAGE)
    assert proc.code == 2 and proc.stderr.splitlines() == [
        "error: model 's3://my-models/' is not an S3 object: s3://bucket/model.tar.gz (--model)"]


def test_an_endpoint_not_made_by_mmsctl_is_left_alone(moto: Moto, cli: Any, mar: Path) -> None:
    pushed_image(NAME)
    sm = boto3.client("sagemaker")
    sm.create_model(ModelName="theirs", PrimaryContainer={"Image": IMAGE},
                    ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/theirs")
    sm.create_endpoint_config(EndpointConfigName="theirs", ProductionVariants=[
        {"VariantName": "AllTraffic", "ModelName": "theirs", "InstanceType": "ml.m5.large", "InitialInstanceCount": 1}])
    sm.create_endpoint(EndpointName=NAME, EndpointConfigName="theirs")
    proc = cli("sagemaker", "deploy", NAME, "--model", str(mar), "--image", IMAGE)
    assert proc.code == 9 and "was not deployed by mmsctl" in proc.stderr
    assert sm.describe_endpoint(EndpointName=NAME)["EndpointConfigName"] == "theirs"


def test_dry_run_plans_without_region_or_credentials(moto: Moto, mar: Path) -> None:
    """`--dry-run` is offline: with no credentials deploy lists what it would look up and every change, and
    destroy what it would look for; an update, which plans against what the endpoint runs, says it needs AWS."""
    offline = {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_DEFAULT_REGION": "",
               "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
    proc = run_cli_here(moto, "sagemaker", "deploy", NAME, "--model", str(mar), "--image", IMAGE, "--dry-run",
                        "-o", "json", env=offline)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["looked_up"] is False
    planned = [c["operation"] for c in plan["calls"] if c["mutating"]]
    assert planned[-3:] == ["CreateModel", "CreateEndpointConfig", "CreateEndpoint"]
    assert not any(c["executed"] for c in plan["calls"])
    [put] = [c["parameters"] for c in plan["calls"] if c["operation"] == "PutObject"]
    assert re.fullmatch(r"<model\.tar\.gz, \d+ bytes>", put["Body"]), put["Body"]
    gone = run_cli_here(moto, "sagemaker", "destroy", NAME, "--dry-run", "-o", "json", env=offline)
    assert gone.returncode == 0, gone.stderr
    looked = {c["operation"] for c in json.loads(gone.stdout)["calls"]}
    assert {"DescribeEndpoint", "ListModels", "ListEndpointConfigs", "GetRole"} <= looked
    assert f"destroy deletes only what it finds tagged mmsctl:sagemaker={NAME}" in gone.stderr
    update = run_cli_here(moto, "sagemaker", "update", NAME, "--model", "s3://b/model.tar.gz", "--dry-run", env=offline)
    assert update.returncode == 9 and update.stderr.count("error:") == 1 and "--region" in update.stderr


def test_a_new_instance_type_under_scaling_deregisters_it_before_the_update(moto: Moto, cli: Any, mar: Path) -> None:
    """SageMaker refuses an UpdateEndpoint that changes a scaled variant's instance type ("Update endpoints that
    use auto scaling"): the plan takes the policy and the target away first, and adds them back after."""
    pushed_image(NAME)
    deploy(cli, "--model", str(mar), "--image", IMAGE, "--max", "3")
    proc = cli("sagemaker", "deploy", NAME, "--model", str(mar), "--image", IMAGE, "--max", "3",
               "--instance-type", "ml.c5.large", "--dry-run", "-o", "json")
    assert proc.code == 0, proc.stderr
    planned = [c["operation"] for c in json.loads(proc.stdout)["calls"] if c["mutating"]]
    assert planned.index("DeleteScalingPolicy") < planned.index("DeregisterScalableTarget") < planned.index(
        "UpdateEndpoint")
    same_type = cli("sagemaker", "deploy", NAME, "--model", str(mar), "--image", IMAGE, "--max", "3",
                    "--count", "2", "--dry-run", "-o", "json")
    planned = [c["operation"] for c in json.loads(same_type.stdout)["calls"] if c["mutating"]]
    assert "UpdateEndpoint" in planned and "DeregisterScalableTarget" not in planned  # the count alone: allowed
    serverless = cli("sagemaker", "deploy", NAME, "--model", str(mar), "--image", IMAGE, "--serverless", "2048",
                     "--dry-run", "-o", "json")
    planned = [c["operation"] for c in json.loads(serverless.stdout)["calls"] if c["mutating"]]
    assert planned.index("DeleteScalingPolicy") < planned.index("DeregisterScalableTarget") < planned.index(
        "UpdateEndpoint")  # serverless: no instances, so no instance type either
    assert "RegisterScalableTarget" not in planned


@pytest.mark.parametrize("status, reason, hint", [
    ("Creating", None, "wait until it is InService"),
    ("Failed", "CannotStartContainerError", "remove it first: mmsctl sagemaker destroy"),
])
def test_a_deploy_onto_an_endpoint_not_in_service_is_refused(status: str, reason: Any, hint: str) -> None:
    """moto's endpoints are InService at once: AWS's other states are given to the check directly."""
    from types import SimpleNamespace

    from mmsctl.cloud.sagemaker.deploy.endpoint import EndpointBusy, check_in_service

    t: Any = SimpleNamespace(name=NAME, aws=SimpleNamespace(unlooked=None))
    check_in_service(t, None)
    check_in_service(t, {"EndpointStatus": "InService"})
    with pytest.raises(EndpointBusy, match=f"is {status}") as raised:
        check_in_service(t, {"EndpointStatus": status, "FailureReason": reason})
    assert hint in (raised.value.hint or "")
    assert (reason or "") in str(raised.value)


def _refuses_tags_on_an_existing_target(params: dict[str, Any], **_: Any) -> Any:
    """What Application Auto Scaling answers RegisterScalableTarget with Tags for a target that exists (moto
    accepts it): ValidationException, before the request (*params*: botocore's, its JSON body) reaches moto."""
    from botocore.awsrequest import AWSResponse

    params = json.loads(params["body"])
    existing = boto3.client("application-autoscaling").describe_scalable_targets(
        ServiceNamespace=params["ServiceNamespace"], ResourceIds=[params["ResourceId"]])["ScalableTargets"]
    if not existing or "Tags" not in params:
        return None
    message = ("The scalable target that you tried to tag already exists. To update tags on an existing scalable "
               "target, use the TagResource API.")
    return AWSResponse("https://application-autoscaling", 400, {}, None), {
        "Error": {"Code": "ValidationException", "Message": message}, "ResponseMetadata": {"HTTPStatusCode": 400}}


def test_a_new_scaling_range_on_a_scaled_endpoint_registers_the_target_again_without_tags(
        moto: Moto, cli: Any, mar: Path) -> None:
    """RegisterScalableTarget takes Tags when it creates the target only; a redeploy with another --min/--max
    updates the range with the target's tags left as they are."""
    from mmsctl.cloud.aws.session import open_session
    from mmsctl.cloud.sagemaker.deploy.scaling import ensure_scaling, resource_id, scaling_of
    from mmsctl.cloud.sagemaker.deploy.target import Target
    from mmsctl.cloud.sagemaker.spec import DeploySpec

    pushed_image(NAME)
    deploy(cli, "--model", str(mar), "--image", IMAGE, "--min", "1", "--max", "3")
    aws = open_session()
    aws.client("application-autoscaling").meta.events.register(
        "before-call.application-autoscaling.RegisterScalableTarget", _refuses_tags_on_an_existing_target)
    t = Target(aws, NAME)
    spec = DeploySpec(NAME, str(mar), IMAGE, count=2, min_count=2, max_count=5).check()
    ensure_scaling(t, spec, scaling_of(aws, NAME))
    aas = boto3.client("application-autoscaling")
    found = aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]
    assert [(f["ResourceId"], f["MinCapacity"], f["MaxCapacity"]) for f in found] == [(resource_id(NAME), 2, 5)]
    assert [c.action for c in t.changes] == ["update"]


_PARTITIONS = [("us-east-1", "aws", "amazonaws.com"), ("cn-north-1", "aws-cn", "amazonaws.com.cn"),
               ("us-gov-west-1", "aws-us-gov", "amazonaws.com"), ("us-iso-east-1", "aws-iso", "c2s.ic.gov"),
               ("us-isob-east-1", "aws-iso-b", "sc2s.sgov.gov"), ("eu-isoe-west-1", "aws-iso-e", "cloud.adc-e.uk"),
               ("us-isof-south-1", "aws-iso-f", "csp.hci.ic.gov"), ("eusc-de-east-1", "aws-eusc", "amazonaws.eu")]


@pytest.mark.parametrize("region, part, domain", _PARTITIONS)
def test_the_pinned_image_and_the_url_keep_the_partitions_domain(region: str, part: str, domain: str) -> None:
    """Each partition's ARNs and endpoints under its own name and domain (botocore's partitions, as AWS lists
    them): an image URI of the region's domain is taken and pinned under it; the same path under another
    partition's domain is no ECR image."""
    from mmsctl.cloud.aws.session import partition
    from mmsctl.cloud.lambda_.spec import ecr_uri
    from mmsctl.cloud.sagemaker.deploy.run import invocations_url
    from mmsctl.cloud.sagemaker.spec import NotAnEcrImage, parse_image

    assert partition(region) == part
    digest = "sha256:" + "a" * 64
    image = parse_image(f"{ACCOUNT}.dkr.ecr.{region}.{domain}/team/kitten:v1")
    assert image.pinned(digest) == f"{ACCOUNT}.dkr.ecr.{region}.{domain}/team/kitten@{digest}"
    assert invocations_url(region, NAME) == f"https://runtime.sagemaker.{region}.{domain}/endpoints/{NAME}/invocations"
    assert ecr_uri(f"{ACCOUNT}.dkr.ecr.{region}.{domain}/team/kitten:v1") == (ACCOUNT, region, "team/kitten", "v1")
    wrong = "amazonaws.com.cn" if domain != "amazonaws.com.cn" else "amazonaws.com"
    with pytest.raises(NotAnEcrImage):
        parse_image(f"{ACCOUNT}.dkr.ecr.{region}.{wrong}/team/kitten:v1")
    assert ecr_uri(f"{ACCOUNT}.dkr.ecr.{region}.{wrong}/team/kitten:v1") is None


_NOT_YET = {
    "create_model": f"Access denied for repository: mmsctl-lambda/{NAME} in registry ID: {ACCOUNT}. Please check if "
                    f"your ECR repository and image exist and role arn:aws:iam::{ACCOUNT}:role/mmsctl-sagemaker/"
                    f"mmsctl-sagemaker-{NAME} has proper pull permissions for SageMaker: "
                    "ecr:BatchCheckLayerAvailability, ecr:BatchGetImage, ecr:GetDownloadUrlForLayer",
    "create_endpoint_config": "Please make sure all images included in the model for the production variant "
                              "AllTraffic exist, and that the execution role used to create the model has "
                              "permissions to access them.",
}


@pytest.mark.parametrize("operation", sorted(_NOT_YET))
@pytest.mark.parametrize("role_changed", [True, False])
def test_a_refusal_while_the_role_change_propagates_is_tried_again(moto: Moto, operation: str,
                                                                    role_changed: bool) -> None:
    """Right after the role was made or its policy widened SageMaker may not see it yet and refuses the model or
    the configuration (ValidationException, AWS's messages); the call is tried again, bounded. With the role as it
    was, the same refusal is final at once (the Stubber has one answer: a retry would fail the test)."""
    from botocore.stub import Stubber

    from mmsctl.cloud.aws.session import open_session
    from mmsctl.cloud.sagemaker.deploy.config import ensure_config
    from mmsctl.cloud.sagemaker.deploy.model import ensure_model
    from mmsctl.cloud.sagemaker.deploy.target import Target
    from mmsctl.errors import CloudError

    aws = open_session()
    t = Target(aws, NAME, sleep=lambda s: None)
    t.role_changed = role_changed
    gone = "Could not find model \"x\"."
    with Stubber(aws.client("sagemaker")) as stub:
        describe = "describe_model" if operation == "create_model" else "describe_endpoint_config"
        stub.add_client_error(describe, service_error_code="ValidationException", service_message=gone)
        stub.add_client_error(operation, service_error_code="ValidationException", service_message=_NOT_YET[operation])
        if role_changed:
            arn = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:x/m"
            answer = {"ModelArn": arn} if operation == "create_model" else {"EndpointConfigArn": arn}
            stub.add_response(operation, answer)
            if operation == "create_model":
                ensure_model(t, {"Image": IMAGE}, f"arn:aws:iam::{ACCOUNT}:role/r")
            else:
                ensure_config(t, [{"VariantName": "AllTraffic", "ModelName": "m"}])
            assert [c.action for c in t.changes] == ["create"]
        else:
            with pytest.raises(CloudError, match="ValidationException"):
                if operation == "create_model":
                    ensure_model(t, {"Image": IMAGE}, f"arn:aws:iam::{ACCOUNT}:role/r")
                else:
                    ensure_config(t, [{"VariantName": "AllTraffic", "ModelName": "m"}])
        stub.assert_no_pending_responses()
