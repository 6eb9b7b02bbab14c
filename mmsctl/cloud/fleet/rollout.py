"""``fleet rollout``: new models, AMI, instance type or mmsctl version on a running fleet, without downtime.

Blue/green (the default)::

    none ──start──▶ launching ──targets healthy──▶ shifted ──finish──▶ none (old group deleted)
                       │                              │
                       └──────────rollback────────────┴──▶ none (new group deleted, old one serving)

* start: a new launch template version (from the current one, with the new boot script, AMI, type);
  the serving group is pinned to its own version number, and a second group (the other of
  ``NAME``/``NAME-green``) on the new version is registered with the same target group.
* shifted: only when every instance of the new group is a healthy target, the old group is detached
  from the target group. It keeps running (tagged ``old``) so ``--rollback`` is instant.
* finish deletes the old group; rollback re-attaches it and deletes the new one.

``--strategy rolling`` replaces the instances of the one group in place with an instance refresh.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from mmsctl.cloud.aws import tags
from mmsctl.cloud.aws.errors import ResourceNotFound
from mmsctl.cloud.aws.session import AwsSession
from mmsctl.cloud.fleet import asg, elb
from mmsctl.cloud.fleet.names import FleetNames
from mmsctl.cloud.fleet.query import ROLLOUT_ROLE, FleetResources, find_resources
from mmsctl.cloud.instance.userdata import ModelSpec, ServerKind
from mmsctl.errors import CloudError, RequestTimeout, UsageError

__all__ = ["RolloutRequest", "finish", "rollback", "start", "status"]

STRATEGIES = ("blue-green", "rolling")
#: Instance refresh: the share of the group kept in service while instances are replaced.
DEFAULT_MIN_HEALTHY = 90
#: Instance refresh pauses at these shares of the group replaced (the last must be 100).
CHECKPOINTS = [50, 100]


@dataclass
class RolloutRequest:
    """What ``fleet rollout NAME`` was asked to change (None: keep the current one)."""

    name: str
    models: list[ModelSpec] = field(default_factory=list)
    instance_type: Optional[str] = None
    ami: Optional[str] = None
    pip_spec: Optional[str] = None
    strategy: str = "blue-green"
    min_healthy: int = DEFAULT_MIN_HEALTHY
    timeout: float = 1200.0

    def check(self) -> None:
        if self.strategy not in STRATEGIES:
            raise UsageError(f"unknown rollout strategy {self.strategy!r}; choose {' or '.join(STRATEGIES)}",
                             param="strategy")
        if not 0 <= self.min_healthy <= 100:
            raise UsageError("the minimum healthy percentage must be 0 to 100", param="min_healthy")
        if not (self.models or self.instance_type or self.ami or self.pip_spec):
            raise UsageError("nothing to roll out: give models, an instance type, an AMI or a pip spec",
                             params=("models", "instance_type", "ami", "pip_spec"))


def _fleet(aws: AwsSession, name: str) -> FleetResources:
    found = find_resources(aws, name)
    if found.group is None or found.target_group is None or not found.launch_templates:
        raise ResourceNotFound(f"fleet {name!r} has no Auto Scaling group, target group or launch template in "
                               f"{aws.region} (it has: {found.summary()})", hint="`mmsctl fleet list` shows the fleets")
    return found


def _role(group: Optional[dict[str, Any]]) -> Optional[str]:
    return tags.as_dict((group or {}).get("Tags")).get(ROLLOUT_ROLE) if group else None


def render_template_data(aws: AwsSession, found: FleetResources, req: RolloutRequest) -> dict[str, Any]:
    """What changes in the new template version: the boot script for the models, AMI, type (the one place
    a rollout renders user data; the rest is copied from the current version by AWS)."""
    from mmsctl.cloud.instance.accelerators import choose
    from mmsctl.cloud.instance.server_image import server_image

    group_tags = tags.as_dict(found.group.get("Tags") if found.group else None)
    label = group_tags.get(tags.ACCELERATOR, "none")
    accelerator = choose(None, label) if label.startswith("eia") else choose(label, None)
    server: ServerKind = "mms" if group_tags.get(tags.SERVER) == "mms" else "mmsctl"
    models = req.models or _models_of(group_tags)
    image = server_image(aws, accelerator, models=models, server=server, ami=req.ami,
                         instance_type=req.instance_type or group_tags.get(tags.INSTANCE_TYPE),
                         pip_spec=req.pip_spec, management_host="0.0.0.0", assets=_assets_ref(aws, found, models))
    return {"ImageId": image.ami.image_id, "InstanceType": image.instance_type,
            "UserData": image.user_data_base64(), "_models": ",".join(m.arg for m in models)}


def _models_of(group_tags: dict[str, str]) -> list[ModelSpec]:
    from mmsctl.cloud.instance.userdata import parse_models

    return parse_models([m for m in group_tags.get(tags.MODELS, "").split(",") if m])


def _assets_ref(aws: AwsSession, found: FleetResources, models: list[ModelSpec]) -> Any:
    """Where the boot script fetches models and wheels: the fleet's asset prefix (staged by ``fleet create``)."""
    try:
        from mmsctl.cloud.aws.asset_bucket import bucket_name
        from mmsctl.cloud.instance.userdata import AssetsRef
    except ImportError:  # pragma: no cover - assets not built in this tree
        return None
    if aws.dry_run:
        return None
    return AssetsRef(bucket_name(aws.account_id(), aws.region), found.names.asset_prefix, aws.region, "3.10")


def _new_version(aws: AwsSession, found: FleetResources, req: RolloutRequest) -> tuple[str, str, str]:
    """Pin the serving group to its version, then make the new one: (template id, old version, new version)."""
    template = found.launch_templates[0]
    template_id = str(template["LaunchTemplateId"])
    group = found.group or {}
    current = str((group.get("LaunchTemplate") or {}).get("Version") or "$Latest")
    if not current.isdigit():
        current = str(template.get("LatestVersionNumber"))
        aws.call("autoscaling", "update_auto_scaling_group", AutoScalingGroupName=group["AutoScalingGroupName"],
                 LaunchTemplate={"LaunchTemplateId": template_id, "Version": current})
    data = render_template_data(aws, found, req)
    models = data.pop("_models")
    answer = aws.call("ec2", "create_launch_template_version", LaunchTemplateId=template_id, SourceVersion=current,
                      VersionDescription=f"mmsctl rollout: {models}"[:255], LaunchTemplateData=data)
    version = str(answer["LaunchTemplateVersion"]["VersionNumber"])
    return template_id, current, version
