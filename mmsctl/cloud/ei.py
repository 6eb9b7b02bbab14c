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

import json
from dataclasses import dataclass, field
from typing import Any, Optional

from mmsctl.cloud import tags
from mmsctl.cloud._session import AwsSession
from mmsctl.cloud.errors import ResourceNotFound
from mmsctl.cloud.network import Placement
from mmsctl.errors import CloudError

__all__ = [
    "EI_POLICY",
    "EI_ROLE_NAME",
    "EiResources",
    "ensure_ei_resources",
    "ensure_security_group",
    "ei_service_name",
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
EC2_TRUST: dict[str, Any] = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
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


def ensure_ei_resources(aws: AwsSession, placement: Placement) -> EiResources:
    """Find or create the EI security group, VPC endpoint, role and instance profile."""
    created: list[str] = []
    reused: list[str] = []
    sg_id = ensure_security_group(
        aws, placement, name=EI_SG_NAME, component=tags.EI_SECURITY_GROUP,
        description="mmsctl: HTTPS from the VPC to the Elastic Inference endpoint",
        ports=(443,), cidrs=(placement.vpc_cidr,), created=created, reused=reused,
    )
    endpoint_id = _ensure_endpoint(aws, placement, sg_id, created, reused)
    profile_name, profile_arn = _ensure_instance_profile(aws, created, reused)
    return EiResources(endpoint_id, sg_id, profile_arn, profile_name, created, reused)


def ensure_security_group(
    aws: AwsSession,
    placement: Placement,
    *,
    name: str,
    component: str,
    description: str,
    ports: tuple[int, ...],
    cidrs: tuple[str, ...],
    created: list[str],
    reused: list[str],
) -> str:
    """Our group *component* in the VPC (created if missing), with TCP *ports* open to *cidrs*."""
    found = aws.call("ec2", "describe_security_groups", Filters=[
        {"Name": "vpc-id", "Values": [placement.vpc_id]}, *tags.managed_filter(component),
    ])["SecurityGroups"]
    if found:
        group = found[0]
        group_id = str(group["GroupId"])
        reused.append(f"security group {group_id} ({name})")
        existing = _open_rules(group.get("IpPermissions", []))
    else:
        group_id = str(aws.call(
            "ec2", "create_security_group", GroupName=name, Description=description, VpcId=placement.vpc_id,
            TagSpecifications=[tags.tag_spec("security-group", tags.base_tags(component, name))],
        )["GroupId"])
        created.append(f"security group {group_id} ({name})")
        existing = set()
    missing = [(port, cidr) for port in ports for cidr in cidrs if (port, cidr) not in existing]
    if missing:
        aws.call("ec2", "authorize_security_group_ingress", GroupId=group_id, IpPermissions=[
            {"IpProtocol": "tcp", "FromPort": port, "ToPort": port,
             "IpRanges": [{"CidrIp": cidr, "Description": f"mmsctl: {description.split(': ', 1)[-1]}"}]}
            for port, cidr in missing
        ])
    return group_id


def _open_rules(permissions: list[dict[str, Any]]) -> set[tuple[int, str]]:
    rules = set()
    for perm in permissions:
        if perm.get("IpProtocol") not in ("tcp", "-1"):
            continue
        for rng in perm.get("IpRanges", []):
            low, high = perm.get("FromPort", 0), perm.get("ToPort", 65535)
            for port in (443, 22, 8080, 8081, 8082):
                if low <= port <= high:
                    rules.add((port, rng.get("CidrIp", "")))
    return rules


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
            raise CloudError(f"{aws.region} no longer offers {service}: {exc.message}",
                             hint="Elastic Inference was retired in April 2024; use --accelerator inf2|g4dn|g5|none"
                             ) from exc
        raise
    endpoint_id = str(endpoint["VpcEndpointId"])
    created.append(f"vpc endpoint {endpoint_id} ({service}, private DNS)")
    return endpoint_id


def _ensure_instance_profile(aws: AwsSession, created: list[str], reused: list[str]) -> tuple[str, str]:
    role_tags = tags.tag_list(tags.base_tags(tags.EI_ROLE, EI_ROLE_NAME))
    try:
        aws.call("iam", "get_role", RoleName=EI_ROLE_NAME)
        reused.append(f"iam role {EI_ROLE_NAME}")
    except ResourceNotFound:
        aws.call("iam", "create_role", RoleName=EI_ROLE_NAME, Path=IAM_PATH,
                 AssumeRolePolicyDocument=json.dumps(EC2_TRUST),
                 Description="mmsctl: lets EC2 instances connect to Elastic Inference accelerators",
                 Tags=role_tags)
        created.append(f"iam role {EI_ROLE_NAME}")
    # put_role_policy is idempotent: it also repairs a policy someone edited.
    aws.call("iam", "put_role_policy", RoleName=EI_ROLE_NAME, PolicyName=EI_POLICY_NAME,
             PolicyDocument=json.dumps(EI_POLICY))
    profile: Optional[dict[str, Any]]
    try:
        profile = aws.call("iam", "get_instance_profile", InstanceProfileName=EI_PROFILE_NAME)["InstanceProfile"]
        reused.append(f"instance profile {EI_PROFILE_NAME}")
    except ResourceNotFound:
        profile = aws.call("iam", "create_instance_profile", InstanceProfileName=EI_PROFILE_NAME, Path=IAM_PATH,
                           Tags=tags.tag_list(tags.base_tags(tags.EI_INSTANCE_PROFILE, EI_PROFILE_NAME))
                           )["InstanceProfile"]
        created.append(f"instance profile {EI_PROFILE_NAME}")
    assert profile is not None
    if not any(r.get("RoleName") == EI_ROLE_NAME for r in profile.get("Roles", [])):
        aws.call("iam", "add_role_to_instance_profile", InstanceProfileName=EI_PROFILE_NAME, RoleName=EI_ROLE_NAME)
    return EI_PROFILE_NAME, str(profile["Arn"])
