"""What ``ec2 launch`` puts in the asset bucket, and the role that lets its instances read exactly that.

One prefix and one role per launch name (``ec2/NAME/``, role and instance profile
``mmsctl-ec2-NAME`` under ``/mmsctl-ec2/``): instances of one name share them; ``ec2 cleanup``
removes them once no mmsctl instance is left (:mod:`.destroy`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

from mmsctl.cloud.aws import tags
from mmsctl.cloud.aws.iam import SESSION_MANAGER_POLICY, ensure_instance_role
from mmsctl.cloud.aws.session import AwsSession
from mmsctl.cloud.instance.assets import AssetPlan, assets_ref, plan_assets, stage_assets
from mmsctl.cloud.instance.boot_status import BOOT_STATUS_POLICY_NAME, boot_status_policy
from mmsctl.cloud.instance.ei import EI_POLICY_NAME, ei_policy
from mmsctl.cloud.instance.userdata import AssetsRef, ModelSpec
from mmsctl.cloud.instance.wheelhouse import build_wheelhouse, check_python
from mmsctl.errors import UsageError

__all__ = ["IAM_PATH", "LaunchAssets", "asset_prefix", "launch_name", "plan_launch_assets", "role_name",
           "stage_launch_assets"]

IAM_PATH = "/mmsctl-ec2/"
ASSETS_POLICY_NAME = "mmsctl-boot-assets"
SESSION_MANAGER_POLICY_NAME = "mmsctl-session-manager"
ROLE_COMPONENT = "ec2-role"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,52}$")  # the role name is mmsctl-ec2-NAME, 64 at most


def role_name(name: str) -> str:
    return f"mmsctl-ec2-{name}"


def asset_prefix(name: str) -> str:
    return f"ec2/{name}/"


@dataclass
class LaunchAssets:
    """The plan (uploaded by :func:`stage_launch_assets`) and where the boot script fetches it."""

    name: str
    plan: AssetPlan
    ref: AssetsRef


def plan_launch_assets(aws: AwsSession, name: str, models: list[ModelSpec],
                       python: str) -> LaunchAssets:
    """Pack the models and build the wheels here, before any EC2 call (a plan builds no wheels)."""
    if not _NAME_RE.match(name):
        raise UsageError(f"name {name!r}: letters, digits, '.', '_' and '-', at most 53, for its role and prefix",
                         param="name")
    python = check_python(python)
    wheelhouse = None if aws.dry_run else build_wheelhouse(python)
    plan = plan_assets(models, asset_prefix(name), wheelhouse=wheelhouse, dry_run=aws.dry_run)
    return LaunchAssets(name, plan, assets_ref(aws, plan, python))


def stage_launch_assets(aws: AwsSession, assets: LaunchAssets, *, ei: bool, created: list[str],
                        reused: list[str]) -> str:
    """Upload what changed, then the launch's role (read its prefix, tag itself with its boot status; EI when
    asked); the profile's ARN."""
    staged = stage_assets(aws, assets.plan, assets.ref.python, created, reused)
    (created if staged.uploaded else reused).append(f"assets s3://{staged.ref.bucket}/{assets.plan.prefix}: {len(staged.uploaded)} uploaded, "
                   f"{len(staged.unchanged)} unchanged")
    policies: dict[str, Any] = {SESSION_MANAGER_POLICY_NAME: SESSION_MANAGER_POLICY, ASSETS_POLICY_NAME: staged.policy,
                                BOOT_STATUS_POLICY_NAME: boot_status_policy(
                                    aws.region, {"Name": assets.name, tags.MANAGED: "true"})}
    if ei:
        policies[EI_POLICY_NAME] = ei_policy(aws)
    role = role_name(assets.name)
    owned = tags.base_tags(ROLE_COMPONENT, role)
    return ensure_instance_role(aws, role_name=role, profile_name=role, path=IAM_PATH,
                                description=f"mmsctl ec2 launch {assets.name}: read its boot assets",
                                role_tags=owned, profile_tags=owned, policies=policies,
                                created=created, reused=reused)


def launch_name(given: Optional[str], models: list[ModelSpec]) -> str:
    """The Name tag, role and prefix of a launch: the one given, else ``mmsctl-MODELS``."""
    return given or "mmsctl-" + ("-".join(m.name for m in models[:2]) or "server")
