"""A record of every AWS call a command makes, so ``--dry-run`` can print them without making them.

In a dry run, reads (Describe*/Get*/List*/Head*/Filter*) still go to AWS, so the plan
reflects what exists; every other call is recorded and answered with a
placeholder (``<new vpc-endpoint>``) that later calls carry along.

Without a region or credentials a dry run cannot look anything up: then reads are
recorded too and answered with placeholders for what a real run would find
(``<AMI from …>``, ``<default VPC>``), and things mmsctl creates when missing
(roles, security groups) are taken to be missing, so the plan shows every call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

__all__ = ["Call", "is_mutating", "missing_code", "operation_name", "placeholder_read", "placeholder_response"]

_READ_PREFIXES = ("describe_", "get_", "list_", "head_", "filter_")
_ELB_ARN = "arn:aws:elasticloadbalancing:<region>:<account>"


def is_mutating(operation: str) -> bool:
    """True for calls that change something (anything but Describe*/Get*/List*/Head*/Filter*)."""
    return not operation.startswith(_READ_PREFIXES)


def operation_name(operation: str) -> str:
    """``run_instances`` -> ``RunInstances`` (the name in AWS's API reference and IAM policies)."""
    return "".join(part.capitalize() for part in operation.split("_"))


@dataclass
class Call:
    """One AWS API call: made, or (dry run) only planned."""

    service: str
    operation: str
    params: dict[str, Any] = field(default_factory=dict)
    executed: bool = True
    #: False for a read a dry run without credentials could not make (its answer is a placeholder).
    looked: bool = True

    def __post_init__(self) -> None:
        # An upload's body is kept as its name and size, read now: the file may be gone when the plan is shown.
        self.params = {k: _body_summary(v) for k, v in self.params.items()}

    @property
    def mutating(self) -> bool:
        return is_mutating(self.operation)

    def to_dict(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "operation": operation_name(self.operation),
            "mutating": self.mutating,
            "executed": self.executed,
            "looked_up": self.looked,
            "parameters": _printable(self.params),
        }

    def summary(self, width: int = 160) -> str:
        """The parameters as compact JSON, cut to *width* characters for a table cell."""
        text = json.dumps(_printable(self.params), separators=(",", ":"), default=str)
        return text if len(text) <= width else text[: width - 1] + "…"


def _printable(params: dict[str, Any]) -> dict[str, Any]:
    """The parameters as a plan shows them (a boot script summarised)."""
    out = dict(params)
    user_data = out.get("UserData")
    if isinstance(user_data, str):
        out["UserData"] = f"<shell script, {len(user_data.splitlines())} lines; see `mmsctl ec2 user-data`>"
    template = out.get("LaunchTemplateData")
    if isinstance(template, dict) and isinstance(template.get("UserData"), str):
        out["LaunchTemplateData"] = {**template, "UserData": _script_summary(template["UserData"])}
    return out


def _body_summary(value: Any) -> Any:
    """A file object (an upload's body) as ``<NAME, N bytes>``, bytes as ``<N bytes>``; anything else as it is."""
    import os

    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    name = getattr(value, "name", None)
    if hasattr(value, "read") and isinstance(name, str):
        try:
            size = os.path.getsize(name)
        except OSError:
            return f"<{os.path.basename(name)}>"
        return f"<{os.path.basename(name)}, {size} bytes>"
    return value


def _script_summary(encoded: str) -> str:
    """A launch template's base64 boot script, summarised like RunInstances' plain one."""
    import base64
    import binascii

    try:
        lines = len(base64.b64decode(encoded, validate=True).decode("utf-8").splitlines())
    except (binascii.Error, UnicodeDecodeError):
        return "<base64 data>"
    return f"<shell script (base64), {lines} lines; see `mmsctl fleet user-data`>"


def _new(kind: str) -> str:
    return f"<new {kind}>"


def placeholder_response(service: str, operation: str, params: dict[str, Any]) -> dict[str, Any]:
    """A stand-in answer for a call a dry run does not make, shaped like AWS's (only the keys we read)."""
    if operation == "create_vpc_endpoint":
        return {"VpcEndpoint": {"VpcEndpointId": _new("vpc-endpoint"), "State": "pending"}}
    if operation == "create_security_group":
        return {"GroupId": _new(f"security-group {params.get('GroupName', '')}".strip())}
    if operation == "create_role":
        name = params.get("RoleName", "")
        path = params.get("Path", "/")
        return {"Role": {"RoleName": name, "Arn": f"arn:aws:iam::<account>:role{path}{name}"}}
    if operation == "create_instance_profile":
        name = params.get("InstanceProfileName", "")
        path = params.get("Path", "/")
        return {"InstanceProfile": {"InstanceProfileName": name,
                                    "Arn": f"arn:aws:iam::<account>:instance-profile{path}{name}", "Roles": []}}
    if operation == "run_instances":
        count = int(params.get("MaxCount", 1))
        return {"Instances": [{"InstanceId": _new(f"instance {i + 1}"), "State": {"Name": "pending"},
                               "InstanceType": params.get("InstanceType"), "ImageId": params.get("ImageId"),
                               "Tags": _instance_tags(params)} for i in range(count)]}
    if operation == "create_launch_template":
        name = params.get("LaunchTemplateName", "")
        return {"LaunchTemplate": {"LaunchTemplateId": _new(f"launch-template {name}"), "LaunchTemplateName": name,
                                   "LatestVersionNumber": 1}}
    if operation == "create_target_group":
        name = params.get("Name", "")
        return {"TargetGroups": [{"TargetGroupName": name,
                                  "TargetGroupArn": f"{_ELB_ARN}:targetgroup/{name}/{_new('id')}"}]}
    if operation == "create_load_balancer":
        name = params.get("Name", "")
        return {"LoadBalancers": [{"LoadBalancerName": name, "Scheme": params.get("Scheme"),
                                   "LoadBalancerArn": f"{_ELB_ARN}:loadbalancer/app/{name}/{_new('id')}",
                                   "DNSName": _new(f"dns name of {name}")}]}
    if operation == "create_listener":
        return {"Listeners": [{"ListenerArn": _new(f"listener {params.get('Protocol', '')}:{params.get('Port', '')}")}]}
    if operation == "put_scaling_policy":
        return {"PolicyARN": _new(f"scaling policy {params.get('PolicyName', '')}")}
    if operation == "terminate_instances":
        return {"TerminatingInstances": [{"InstanceId": i, "CurrentState": {"Name": "shutting-down"}}
                                         for i in params.get("InstanceIds", [])]}
    return {}


def _instance_tags(params: dict[str, Any]) -> list[dict[str, str]]:
    for spec in params.get("TagSpecifications", []):
        if spec.get("ResourceType") == "instance":
            return list(spec.get("Tags", []))
    return []


#: Reads a dry run without credentials answers "not there" (with AWS's error code for it): mmsctl then
#: plans to create what it would create.
_MISSING = {
    "get_role": "NoSuchEntity", "get_instance_profile": "NoSuchEntity", "get_role_policy": "NoSuchEntity",
    "get_function": "ResourceNotFoundException", "get_function_configuration": "ResourceNotFoundException",
    "get_function_url_config": "ResourceNotFoundException", "get_alias": "ResourceNotFoundException",
    "get_policy": "ResourceNotFoundException", "get_function_concurrency": "ResourceNotFoundException",
    "get_function_event_invoke_config": "ResourceNotFoundException",
    "get_provisioned_concurrency_config": "ProvisionedConcurrencyConfigNotFoundException",
    "describe_repositories": "RepositoryNotFoundException", "get_repository_policy": "RepositoryNotFoundException",
    "describe_images": "RepositoryNotFoundException", "list_images": "RepositoryNotFoundException",
    "head_bucket": "404", "get_bucket_tagging": "NoSuchBucket", "get_bucket_location": "NoSuchBucket",
    "get_bucket_notification_configuration": "NoSuchBucket", "get_bucket_versioning": "NoSuchBucket",
    "head_object": "404", "get_object": "NoSuchKey",
    "describe_rule": "ResourceNotFoundException", "list_targets_by_rule": "ResourceNotFoundException",
    "get_queue_url": "AWS.SimpleQueueService.NonExistentQueue",
    # SageMaker says "not there" with a ValidationException ("Could not find endpoint …").
    "describe_endpoint": "ValidationException", "describe_endpoint_config": "ValidationException",
    "describe_model": "ValidationException",
}
_IMAGE_READS = frozenset({"describe_images"})


def missing_code(service: str, operation: str) -> str:
    """AWS's error code for "not there" that a dry run without credentials answers *operation* with."""
    if service == "ec2" and operation in _IMAGE_READS:
        return "InvalidAMIID.NotFound"
    return _MISSING.get(operation, "ResourceNotFoundException")


def _filter(params: dict[str, Any], name: str) -> Any:
    for item in params.get("Filters") or []:
        if item.get("Name") == name and item.get("Values"):
            return item["Values"][0]
    return None


def placeholder_read(service: str, operation: str, params: dict[str, Any]) -> Optional[dict[str, Any]]:
    """What a dry run without credentials takes a read to answer: placeholders for what it would find,
    empty lists for what mmsctl creates when missing; None for a read it takes to find nothing
    (the caller raises "not found")."""
    if operation in _MISSING and not (service == "ec2" and operation in _IMAGE_READS):
        return None
    if operation == "get_parameter":
        return {"Parameter": {"Value": f"<AMI id from {params.get('Name', 'SSM')}>"}}
    if operation == "describe_images":
        return {"Images": [{"ImageId": i, "Name": "<not looked up>"} for i in params.get("ImageIds", [])]}
    if operation == "describe_vpcs":
        ids = params.get("VpcIds") or ["<default VPC>"]
        return {"Vpcs": [{"VpcId": i, "CidrBlock": "<VPC CIDR>", "IsDefault": True} for i in ids]}
    if operation == "describe_subnets":
        if params.get("SubnetIds"):
            return {"Subnets": [{"SubnetId": i, "VpcId": "<VPC of the subnet>", "AvailabilityZone": f"<zone {n}>"}
                                for n, i in enumerate(params["SubnetIds"], 1)]}
        vpc = _filter(params, "vpc-id") or "<default VPC>"
        return {"Subnets": [{"SubnetId": f"<default subnet {n}>", "VpcId": vpc, "AvailabilityZone": f"<zone {n}>"}
                            for n in (1, 2)]}
    if operation == "describe_vpc_endpoint_services":
        return {"ServiceNames": list(params.get("ServiceNames", []))}
    if operation == "get_caller_identity":
        return {"Account": "<account>"}
    if operation == "get_authorization_token":
        return {"authorizationData": [{"proxyEndpoint": "https://<account>.dkr.ecr.<region>.amazonaws.com",
                                       "authorizationToken": ""}]}
    empty = {"describe_security_groups": "SecurityGroups", "describe_vpc_endpoints": "VpcEndpoints",
             "describe_instances": "Reservations", "describe_load_balancers": "LoadBalancers",
             "describe_target_groups": "TargetGroups", "describe_auto_scaling_groups": "AutoScalingGroups",
             "describe_launch_templates": "LaunchTemplates"}
    if operation in empty:
        return {empty[operation]: []}
    return {}
