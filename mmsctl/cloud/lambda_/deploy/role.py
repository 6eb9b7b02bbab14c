"""The function's execution role: created with the least-privilege policy, or its policy brought up to date
(:func:`mmsctl.cloud.aws.service_role.ensure_service_role`)."""

from __future__ import annotations

from mmsctl.cloud.aws import tags
from mmsctl.cloud.aws.service_role import ServiceRole, ensure_service_role
from mmsctl.cloud.lambda_ import policy
from mmsctl.cloud.lambda_ import spec as names
from mmsctl.cloud.lambda_.deploy.target import Target

__all__ = ["ensure_role"]


def ensure_role(t: Target, scope: policy.RoleScope) -> str:
    """The role's ARN. A role of that name mmsctl did not make for this function is refused."""
    role = names.role_name(t.name)
    arn, action = ensure_service_role(t.aws, ServiceRole(
        role, names.ROLE_PATH, policy.trust_policy(), f"mmsctl lambda {t.name}: execution role", names.POLICY_NAME,
        policy.permissions_policy(scope), t.tags("lambda-role"), (tags.LAMBDA, t.name)))
    t.note(action, "iam-role", f"{role} (policy)" if action == "update" else role)
    return arn
