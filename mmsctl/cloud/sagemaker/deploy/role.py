"""The endpoint's execution role: created with the least-privilege policy, or its policy brought up to date."""

from __future__ import annotations

import json

from mmsctl.cloud.aws.errors import ResourceNotFound
from mmsctl.cloud.aws.iam import policy_text
from mmsctl.cloud.sagemaker import policy
from mmsctl.cloud.sagemaker.deploy.target import Target
from mmsctl.cloud.sagemaker.resources import ours, tag_dict
from mmsctl.cloud.sagemaker.spec import ROLE_PATH, role_name
from mmsctl.errors import CloudError

__all__ = ["POLICY_NAME", "ensure_role"]

POLICY_NAME = "mmsctl-sagemaker-endpoint"


def ensure_role(t: Target, scope: policy.RoleScope) -> str:
    """The role's ARN. A role of that name mmsctl did not make for this endpoint is refused."""
    role = role_name(t.name)
    doc = policy_text(policy.permissions_policy(scope))
    try:
        found = t.aws.call("iam", "get_role", RoleName=role)["Role"]
    except ResourceNotFound:
        made = t.aws.call("iam", "create_role", RoleName=role, Path=ROLE_PATH,
                          AssumeRolePolicyDocument=policy_text(policy.trust_policy()),
                          Description=f"mmsctl sagemaker {t.name}: execution role", Tags=t.tag_list("role"))
        t.aws.call("iam", "put_role_policy", RoleName=role, PolicyName=POLICY_NAME, PolicyDocument=doc)
        t.note("create", "iam-role", role)
        return str(made["Role"]["Arn"]).replace("<account>", t.account)
    if not ours(tag_dict(found.get("Tags")), t.name):
        raise CloudError(f"IAM role {role} exists and was not made by mmsctl for {t.name}; refusing to change it",
                         hint="choose another NAME")
    try:
        current = t.aws.call("iam", "get_role_policy", RoleName=role, PolicyName=POLICY_NAME).get("PolicyDocument")
    except ResourceNotFound:
        current = None
    if isinstance(current, str):
        current = json.loads(current)
    if current != json.loads(doc):
        t.aws.call("iam", "put_role_policy", RoleName=role, PolicyName=POLICY_NAME, PolicyDocument=doc)
        t.note("update", "iam-role", f"{role} (policy)")
    else:
        t.note("reuse", "iam-role", role)
    return str(found["Arn"])
