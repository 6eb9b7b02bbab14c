"""The endpoint's execution role: created with the least-privilege policy, or its policy brought up to date
(:func:`mmsctl.cloud.aws.service_role.ensure_service_role`)."""

from __future__ import annotations

from mmsctl.cloud.aws import tags
from mmsctl.cloud.aws.service_role import ServiceRole, ensure_service_role
from mmsctl.cloud.sagemaker import policy
from mmsctl.cloud.sagemaker.deploy.target import Target
from mmsctl.cloud.sagemaker.spec import ROLE_PATH, role_name

__all__ = ["POLICY_NAME", "ensure_role"]

POLICY_NAME = "mmsctl-sagemaker-endpoint"


def ensure_role(t: Target, scope: policy.RoleScope) -> str:
    """The role's ARN. A role of that name mmsctl did not make for this endpoint is refused. A change to the role
    marks the target (:attr:`Target.role_changed`): SageMaker may not see it at once."""
    role = role_name(t.name)
    arn, action = ensure_service_role(t.aws, ServiceRole(
        role, ROLE_PATH, policy.trust_policy(), f"mmsctl sagemaker {t.name}: execution role", POLICY_NAME,
        policy.permissions_policy(scope), t.tags("role"), (tags.SAGEMAKER, t.name)))
    t.note(action, "iam-role", f"{role} (policy)" if action == "update" else role)
    t.role_changed = t.role_changed or action != "reuse"
    return arn
