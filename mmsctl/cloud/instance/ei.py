"""Find or create what an Elastic Inference instance needs, in the subnet's VPC.

The EI setup guide spreads this over a dozen console steps:

1. a security group that lets the instances reach the endpoint on 443;
2. the interface VPC endpoint ``com.amazonaws.<region>.elastic-inference.runtime``
   with private DNS, so the EI client library finds the service inside the VPC;
3. an IAM role + instance profile allowing ``elastic-inference:Connect``.

Each step first looks for an existing resource (ours by tag, or for the
endpoint anyone's) and creates only what is missing, tagged ``mmsctl:*``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mmsctl.cloud.aws import tags
from mmsctl.cloud.aws.errors import ElasticInferenceRetired
from mmsctl.cloud.aws.iam import ensure_instance_role
from mmsctl.cloud.aws.network import Placement
from mmsctl.cloud.aws.security_groups import ensure_security_group
from mmsctl.cloud.aws.session import AwsSession
from mmsctl.errors import CloudError

__all__ = [
    "EI_POLICY",
    "EI_ROLE_NAME",
    "EiNetwork",
    "EiResources",
    "ensure_ei_network",
    "ensure_ei_resources",
    "ei_service_name",
    "fleets_using_ei",
]

EI_ROLE_NAME = "mmsctl-ei"
EI_PROFILE_NAME = "mmsctl-ei"
IAM_PATH = "/mmsctl/"
EI_SG_NAME = "mmsctl-ei-endpoint"
EI_POLICY_NAME = "mmsctl-elastic-inference-connect"

# The policy from the EI developer guide ("Configuring an instance role with an EI policy").
EI_POLICY: dict[str, Any] = {
    "Version": "2012-10-17",
    "Statement": [{
        "Effect": "Allow",
        "Action": ["elastic-inference:Connect", "iam:List*", "iam:Get*", "ec2:Describe*", "ec2:Get*"],
        "Resource": "*",
    }],
}
_LIVE_ENDPOINT_STATES = ("pendingAcceptance", "pending", "available", "modifying")


def ei_service_name(region: str) -> str:
    return f"com.amazonaws.{region}.elastic-inference.runtime"


@dataclass
class EiResources:
    """The endpoint, group and instance profile an EI instance uses, and which of them this run created."""

    endpoint_id: str
    security_group_id: str
    instance_profile_arn: str
    instance_profile_name: str
    created: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)


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


def ensure_ei_resources(aws: AwsSession, placement: Placement) -> EiResources:
    """Find or create the EI security group, VPC endpoint, role and instance profile."""
    created: list[str] = []
    reused: list[str] = []
    network = ensure_ei_network(aws, placement, created, reused)
    profile_name, profile_arn = _ensure_instance_profile(aws, created, reused)
    return EiResources(network.endpoint_id, network.security_group_id, profile_arn, profile_name, created, reused)


def ensure_ei_network(aws: AwsSession, placement: Placement, created: list[str], reused: list[str]) -> EiNetwork:
    """Find or create the EI security group and VPC endpoint (a fleet brings its own role)."""
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
        if "InvalidServiceName" in exc.message:
            raise ElasticInferenceRetired(f"{aws.region} no longer offers {service}: {exc.message} "
                                          "(Elastic Inference was retired in April 2024)") from exc
        raise
    endpoint_id = str(endpoint["VpcEndpointId"])
    created.append(f"vpc endpoint {endpoint_id} ({service}, private DNS)")
    return endpoint_id


def _ensure_instance_profile(aws: AwsSession, created: list[str], reused: list[str]) -> tuple[str, str]:
    arn = ensure_instance_role(
        aws, role_name=EI_ROLE_NAME, profile_name=EI_PROFILE_NAME, path=IAM_PATH,
        description="mmsctl: lets EC2 instances connect to Elastic Inference accelerators",
        role_tags=tags.base_tags(tags.EI_ROLE, EI_ROLE_NAME),
        profile_tags=tags.base_tags(tags.EI_INSTANCE_PROFILE, EI_PROFILE_NAME),
        policies={EI_POLICY_NAME: EI_POLICY}, created=created, reused=reused,
    )
    return EI_PROFILE_NAME, arn
