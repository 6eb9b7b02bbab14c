"""The IAM role and instance profile an instance runs with: find-or-create, and delete; and how every policy
document mmsctl writes is versioned and sent (:data:`POLICY_VERSION`, :func:`policy_text`).

``ec2 launch --eia`` shares one role (``/mmsctl/mmsctl-ei``); each fleet has its own
(``/mmsctl-fleet/mmsctl-fleet-NAME``). Both are a role EC2 may assume, inline
policies written with PutRolePolicy (idempotent, so a run also repairs a policy
someone edited), and an instance profile holding the role.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional

from mmsctl.cloud.aws import tags
from mmsctl.cloud.aws.errors import ResourceNotFound
from mmsctl.cloud.aws.session import AwsSession
from mmsctl.cloud.aws.made import Made

__all__ = [
    "EC2_TRUST",
    "POLICY_VERSION",
    "SESSION_MANAGER_POLICY",
    "delete_instance_profile",
    "delete_role",
    "ensure_instance_role",
    "find",
    "policy_text",
]

#: The policy language version every document mmsctl writes declares.
POLICY_VERSION = "2012-10-17"


def policy_text(policy: Mapping[str, Any]) -> str:
    """A policy document as compact JSON, as IAM stores it."""
    return json.dumps(policy, separators=(",", ":"))


EC2_TRUST: dict[str, Any] = {
    "Version": POLICY_VERSION,
    "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
}

# What SSM Session Manager needs on the instance (the Session Manager guide's minimal instance
# policy), so `aws ssm start-session … AWS-StartPortForwardingSession` reaches the management
# port without opening SSH.
SESSION_MANAGER_POLICY: dict[str, Any] = {
    "Version": POLICY_VERSION,
    "Statement": [{
        "Effect": "Allow",
        "Action": ["ssm:UpdateInstanceInformation", "ssmmessages:CreateControlChannel",
                   "ssmmessages:CreateDataChannel", "ssmmessages:OpenControlChannel",
                   "ssmmessages:OpenDataChannel"],
        "Resource": "*",
    }],
}


def ensure_instance_role(
    aws: AwsSession,
    *,
    role_name: str,
    profile_name: str,
    path: str,
    description: str,
    role_tags: Mapping[str, str],
    profile_tags: Mapping[str, str],
    policies: Mapping[str, Mapping[str, Any]],
    created: list[str],
    reused: list[str],
) -> str:
    """The role (with *policies* inline) and its instance profile, created where missing; the profile's ARN."""
    try:
        aws.call("iam", "get_role", RoleName=role_name)
        reused.append(f"iam role {role_name}")
    except ResourceNotFound:
        aws.call("iam", "create_role", RoleName=role_name, Path=path, AssumeRolePolicyDocument=json.dumps(EC2_TRUST),
                 Description=description, Tags=tags.tag_list(role_tags))
        created.append(Made(f"iam role {role_name}", kind="iam-role", id=role_name))
    for policy_name, document in policies.items():
        aws.call("iam", "put_role_policy", RoleName=role_name, PolicyName=policy_name,
                 PolicyDocument=json.dumps(document))
    try:
        profile = aws.call("iam", "get_instance_profile", InstanceProfileName=profile_name)["InstanceProfile"]
        reused.append(f"instance profile {profile_name}")
    except ResourceNotFound:
        profile = aws.call("iam", "create_instance_profile", InstanceProfileName=profile_name, Path=path,
                           Tags=tags.tag_list(profile_tags))["InstanceProfile"]
        created.append(Made(f"instance profile {profile_name}", kind="instance-profile", id=profile_name))
    if not any(r.get("RoleName") == role_name for r in profile.get("Roles", [])):
        aws.call("iam", "add_role_to_instance_profile", InstanceProfileName=profile_name, RoleName=role_name)
    return str(profile["Arn"])


def find(aws: AwsSession, kind: str, name: str) -> Optional[dict[str, Any]]:
    """Role (*kind* ``role``) or instance profile *name* with its tags (the List* calls do not
    return tags); None when it is not there."""
    try:
        if kind == "role":
            return dict(aws.call("iam", "get_role", RoleName=name)["Role"])
        return dict(aws.call("iam", "get_instance_profile", InstanceProfileName=name)["InstanceProfile"])
    except ResourceNotFound:
        return None


def delete_instance_profile(aws: AwsSession, name: str, roles: list[str]) -> None:
    """Take *roles* out of the instance profile, then delete it."""
    for role in roles:
        aws.call("iam", "remove_role_from_instance_profile", InstanceProfileName=name, RoleName=role)
    aws.call("iam", "delete_instance_profile", InstanceProfileName=name)


def delete_role(aws: AwsSession, name: str) -> None:
    """Delete a role after its inline and attached policies (IAM refuses a role that still has any)."""
    for policy in aws.paginate("iam", "list_role_policies", "PolicyNames", RoleName=name):
        aws.call("iam", "delete_role_policy", RoleName=name, PolicyName=policy)
    for attached in aws.paginate("iam", "list_attached_role_policies", "AttachedPolicies", RoleName=name):
        aws.call("iam", "detach_role_policy", RoleName=name, PolicyArn=attached["PolicyArn"])
    aws.call("iam", "delete_role", RoleName=name)
