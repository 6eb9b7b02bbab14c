"""The function's execution role: created with the least-privilege policy, or its policy brought up to date."""

from __future__ import annotations

import json

from mmsctl.cloud.aws.errors import aws_code
from mmsctl.cloud.aws.iam import policy_text
from mmsctl.cloud.lambda_ import policy
from mmsctl.cloud.lambda_ import spec as names
from mmsctl.cloud.lambda_.deploy.target import Target
from mmsctl.cloud.lambda_.resources import as_dict, ours
from mmsctl.errors import CloudError

__all__ = ["ensure_role"]


def ensure_role(t: Target, scope: policy.RoleScope) -> str:
    """The role's ARN. A role of that name mmsctl did not make for this function is refused."""
    role = names.role_name(t.name)
    doc = policy_text(policy.permissions_policy(scope))
    try:
        found = t.aws.call("iam", "get_role", RoleName=role)["Role"]
    except CloudError as exc:
        if aws_code(exc) != "NoSuchEntity":
            raise
        found = None
    if found is None:
        made = t.aws.call("iam", "create_role", RoleName=role, Path=names.ROLE_PATH,
                          AssumeRolePolicyDocument=policy_text(policy.trust_policy()),
                          Description=f"mmsctl lambda {t.name}: execution role",
                          Tags=[{"Key": k, "Value": v} for k, v in t.tags("lambda-role").items()])
        t.aws.call("iam", "put_role_policy", RoleName=role, PolicyName=names.POLICY_NAME, PolicyDocument=doc)
        t.note("create", "iam-role", role)
        return str(made["Role"]["Arn"]).replace("<account>", t.account)
    if not ours(as_dict(found.get("Tags")), t.name):
        raise CloudError(f"IAM role {role} exists and was not made by mmsctl for {t.name}; refusing to change it")
    current = None
    try:
        current = t.aws.call("iam", "get_role_policy", RoleName=role, PolicyName=names.POLICY_NAME)
    except CloudError as exc:
        if aws_code(exc) != "NoSuchEntity":
            raise
    current_doc = (current or {}).get("PolicyDocument")
    if isinstance(current_doc, str):
        current_doc = json.loads(current_doc)
    if current_doc != json.loads(doc):
        t.aws.call("iam", "put_role_policy", RoleName=role, PolicyName=names.POLICY_NAME, PolicyDocument=doc)
        t.note("update", "iam-role", f"{role} (policy)")
    else:
        t.note("reuse", "iam-role", role)
    return str(found["Arn"])
