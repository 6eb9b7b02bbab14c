"""Find or create what an Elastic Inference instance needs, in the subnet's VPC.

The EI setup guide spreads this over a dozen console steps:

1. a security group that lets the instances reach the endpoint on 443;
2. the interface VPC endpoint ``com.amazonaws.<region>.elastic-inference.runtime``
   with private DNS, so the EI client library finds the service inside the VPC;
3. an IAM role + instance profile allowing ``elastic-inference:Connect``.

First it asks EC2 whether the region still offers that endpoint service (EI is retired), before anything is
made. Each step then looks for an existing resource (ours by tag, or for the endpoint anyone's) and creates
only what is missing, tagged ``mmsctl:*``; what it creates is listed as a
:class:`~mmsctl.cloud.aws.undo.Made`, so a launch that fails later can take it back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mmsctl.cloud.aws import tags
from mmsctl.cloud.aws.errors import ElasticInferenceRetired, aws_code
from mmsctl.cloud.aws.iam import ensure_instance_role
from mmsctl.cloud.aws.network import Placement
from mmsctl.cloud.aws.security_groups import ensure_security_group
from mmsctl.cloud.aws.session import AwsSession, partition
from mmsctl.cloud.aws.made import Made
from mmsctl.errors import CloudError

__all__ = [
    "EI_POLICY_NAME",
    "EI_ROLE_NAME",
    "EiNetwork",
    "check_ei_service",
    "ei_policy",
    "ei_service_name",
    "ensure_ei_instance_profile",
    "ensure_ei_network",
    "fleets_using_ei",
]

EI_ROLE_NAME = "mmsctl-ei"
EI_PROFILE_NAME = "mmsctl-ei"
IAM_PATH = "/mmsctl/"
EI_SG_NAME = "mmsctl-ei-endpoint"
EI_POLICY_NAME = "mmsctl-elastic-inference-connect"

_LIVE_ENDPOINT_STATES = ("pendingAcceptance", "pending", "available", "modifying")


def ei_service_name(region: str) -> str:
    return f"com.amazonaws.{region}.elastic-inference.runtime"


def ei_policy(aws: AwsSession) -> dict[str, Any]:
    """``elastic-inference:Connect`` on this account's accelerators in this region, and nothing else.

    Connect's resource is the accelerator (the Service Authorization Reference, "Amazon Elastic Inference").
    The EI guide's instance policy ("Configuring an instance role with an EI policy") also grants ``iam:List*``,
    ``iam:Get*``, ``ec2:Describe*`` and ``ec2:Get*`` on ``*`` without saying what on the instance calls them;
    nothing mmsctl installs there calls IAM or EC2, and they would let each instance read every role, policy
    and EC2 resource of the account, so they are left out.
    """
    accelerators = (f"arn:{partition(aws.region)}:elastic-inference:{aws.region}:{aws.account_id()}"
                    ":elastic-inference-accelerator/*")
    return {"Version": "2012-10-17", "Statement": [{
        "Sid": "ElasticInferenceConnect", "Effect": "Allow", "Action": "elastic-inference:Connect",
        "Resource": accelerators}]}


def check_ei_service(aws: AwsSession) -> None:
    """The region still offers EI's endpoint service (DescribeVpcEndpointServices), asked before anything is made.

    Raises:
        ElasticInferenceRetired: EC2 does not know the service (``InvalidServiceName``: EI was retired).
    """
    service = ei_service_name(aws.region)
    try:
        names = aws.call("ec2", "describe_vpc_endpoint_services", ServiceNames=[service]).get("ServiceNames", [])
    except CloudError as exc:
        if aws_code(exc) != "InvalidServiceName":
            raise
        names = []
        reason = exc.message
    else:
        reason = f"DescribeVpcEndpointServices does not list {service}"
    if service not in names:
        raise ElasticInferenceRetired(
            f"Elastic Inference is retired: {aws.region} no longer offers {service} ({reason})",
            hint="choose another accelerator: inf2, g5 or none (docs/ec2.md, \"Honest about Elastic Inference\")")


@dataclass
class EiNetwork:
    """The endpoint and its group: what an EI instance needs besides its role."""

    endpoint_id: str
    security_group_id: str


def fleets_using_ei(aws: AwsSession) -> list[str]:
    """The fleets whose instances use the EI endpoint and group (their Auto Scaling groups' tags say so).

    ``ec2 cleanup`` must not delete what they use; read here, beside what made it, so ec2 needs nothing of fleet.
    """
    groups = aws.paginate("autoscaling", "describe_auto_scaling_groups", "AutoScalingGroups",
                          Filters=[{"Name": "tag-key", "Values": [tags.FLEET]}])
    return sorted(tags.as_dict(g.get("Tags")).get(tags.FLEET, "?") for g in groups
                  if tags.as_dict(g.get("Tags")).get(tags.ACCELERATOR, "").startswith("eia"))


def ensure_ei_network(aws: AwsSession, placement: Placement, created: list[str], reused: list[str]) -> EiNetwork:
    """Find or create the EI security group and VPC endpoint (a fleet brings its own role), once EC2 has said
    that the region offers the endpoint service."""
    check_ei_service(aws)
    sg_id = ensure_security_group(
        aws, placement, name=EI_SG_NAME, component=tags.EI_SECURITY_GROUP,
        description="mmsctl: HTTPS from the VPC to the Elastic Inference endpoint",
        ports=(443,), cidrs=(placement.vpc_cidr,), created=created, reused=reused,
    )
    return EiNetwork(_ensure_endpoint(aws, placement, sg_id, created, reused), sg_id)


def _ensure_endpoint(aws: AwsSession, placement: Placement, sg_id: str,
                     created: list[str], reused: list[str]) -> str:
    service = ei_service_name(aws.region)
    endpoints = aws.call("ec2", "describe_vpc_endpoints", Filters=[
        {"Name": "vpc-id", "Values": [placement.vpc_id]},
        {"Name": "service-name", "Values": [service]},
    ])["VpcEndpoints"]
    live = [e for e in endpoints if e.get("State", "available") in _LIVE_ENDPOINT_STATES]
    if live:
        # Prefer ours; an endpoint made by someone else is used as it is and never tagged or deleted.
        live.sort(key=lambda e: tags.as_dict(e.get("Tags")).get(tags.MANAGED) != "true")
        endpoint_id = str(live[0]["VpcEndpointId"])
        reused.append(f"vpc endpoint {endpoint_id} ({service})")
        return endpoint_id
    try:
        endpoint = aws.call(
            "ec2", "create_vpc_endpoint", VpcEndpointType="Interface", VpcId=placement.vpc_id, ServiceName=service,
            SubnetIds=[placement.subnet_id], SecurityGroupIds=[sg_id], PrivateDnsEnabled=True,
            TagSpecifications=[tags.tag_spec("vpc-endpoint", tags.base_tags(tags.EI_ENDPOINT, "mmsctl-ei"))],
        )["VpcEndpoint"]
    except CloudError as exc:
        if aws_code(exc) == "InvalidServiceName":
            raise ElasticInferenceRetired(f"{aws.region} no longer offers {service}: {exc.message} "
                                          "(Elastic Inference was retired in April 2024)") from exc
        raise
    endpoint_id = str(endpoint["VpcEndpointId"])
    created.append(Made(f"vpc endpoint {endpoint_id} ({service}, private DNS)", kind="vpc-endpoint",
                        id=endpoint_id))
    return endpoint_id


def ensure_ei_instance_profile(aws: AwsSession, created: list[str], reused: list[str]) -> str:
    """The shared EI role and instance profile ``/mmsctl/mmsctl-ei`` (for an instance that has no role of its own:
    ``ec2 launch --pip-spec`` or ``--server mms``); the profile's ARN."""
    return ensure_instance_role(
        aws, role_name=EI_ROLE_NAME, profile_name=EI_PROFILE_NAME, path=IAM_PATH,
        description="mmsctl: lets EC2 instances connect to Elastic Inference accelerators",
        role_tags=tags.base_tags(tags.EI_ROLE, EI_ROLE_NAME),
        profile_tags=tags.base_tags(tags.EI_INSTANCE_PROFILE, EI_PROFILE_NAME),
        policies={EI_POLICY_NAME: ei_policy(aws)}, created=created, reused=reused,
    )
