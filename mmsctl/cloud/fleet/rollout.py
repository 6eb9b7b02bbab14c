"""``fleet rollout``: new models, AMI, instance type or mmsctl version on a running fleet, without downtime.

Blue/green (the default)::

    none ──start──▶ launching ──targets healthy──▶ shifted ──finish──▶ none (old group deleted)
                       │                              │
                       └──────────rollback────────────┴──▶ none (new group deleted, old one serving)

* start: a new launch template version (from the current one, with the new boot script, AMI, type);
  the serving group is pinned to its own version number, the role may complete the launch hook, a
  health check that names a model moves to the server's readiness (it must hold for the old and the
  new model set alike), and a second group (the other of ``NAME``/``NAME-green``) on the new version,
  with the launch hook, is registered with the same target group.
* shifted: only when every instance of the new group is a healthy target, the old group is detached
  from the target group. It keeps running (tagged ``old``) so ``--rollback`` is instant.
* finish deletes the old group; rollback re-attaches it and deletes the new one.

``--strategy rolling`` replaces the instances of the one group in place with an instance refresh
(refresh.py).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from mmsctl.cloud.aws import tags
from mmsctl.cloud.aws.asset_bucket import merge_read_statements
from mmsctl.cloud.aws.errors import ResourceNotFound
from mmsctl.cloud.aws.session import AwsSession, partition
from mmsctl.cloud.fleet import asg, elb, refresh
from mmsctl.cloud.fleet.query import ROLLOUT_ROLE, FleetResources, find_resources
from mmsctl.cloud.instance.server_image import READY_PATH
from mmsctl.cloud.instance.userdata import LifecycleHook, ModelSpec, ServerKind
from mmsctl.errors import CloudError, RequestTimeout, UsageError

__all__ = ["RolloutRequest", "finish", "rollback", "start", "status", "template_models"]

STRATEGIES = ("blue-green", "rolling")
#: Instance refresh: the share of the group kept in service while instances are replaced.
DEFAULT_MIN_HEALTHY = 90
#: The AMI's python3 the wheels are built for when the fleet does not record one (fleet create's default).
INSTANCE_PYTHON = "3.10"


@dataclass
class RolloutRequest:
    """What ``fleet rollout NAME`` was asked to change (None: keep the current one)."""

    name: str
    models: list[ModelSpec] = field(default_factory=list)
    instance_type: Optional[str] = None
    ami: Optional[str] = None
    pip_spec: Optional[str] = None
    #: The new AMI's python3 (wheels are built for it); None: the one the fleet records.
    instance_python: Optional[str] = None
    strategy: str = "blue-green"
    min_healthy: int = DEFAULT_MIN_HEALTHY
    timeout: float = 1200.0
    #: blue/green: after the shift, watch the new group this long and finish if it stayed healthy.
    auto_finish_s: Optional[float] = None
    #: rolling: the pause at each checkpoint (None: refresh.CHECKPOINT_DELAY_S).
    checkpoint_delay_s: Optional[float] = None

    @property
    def checkpoint_delay(self) -> int:
        """The rolling refresh's pause at each checkpoint, in whole seconds (AWS's unit)."""
        return int(round(refresh.CHECKPOINT_DELAY_S if self.checkpoint_delay_s is None else self.checkpoint_delay_s))

    def check(self) -> None:
        if self.strategy not in STRATEGIES:
            raise UsageError(f"unknown rollout strategy {self.strategy!r}; choose {' or '.join(STRATEGIES)}",
                             param="strategy")
        if self.auto_finish_s is not None and (self.strategy != "blue-green" or not 0 <= self.auto_finish_s <= 86400):
            raise UsageError("auto-finish is for a blue/green rollout, after 0 s to a day", param="auto_finish_s")
        if self.checkpoint_delay_s is not None and (
                self.strategy != "rolling" or not 0 <= self.checkpoint_delay_s <= refresh.MAX_CHECKPOINT_DELAY_S):
            raise UsageError(f"a checkpoint delay is for a rolling rollout, 0 s to "
                             f"{refresh.MAX_CHECKPOINT_DELAY_S // 3600} hours", param="checkpoint_delay_s")
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


def render_template_data(aws: AwsSession, found: FleetResources, req: RolloutRequest,
                         current: dict[str, Any], group: str) -> dict[str, Any]:
    """What changes in the new template version: the boot script for the models, AMI, type, completing the
    launch hook of *group* (the group the version is for), the one place a rollout renders user data; the
    rest is copied from the current version by AWS."""
    from mmsctl.cloud.instance.accelerators import choose
    from mmsctl.cloud.instance.server_image import server_image

    group_tags = tags.as_dict(found.group.get("Tags") if found.group else None)
    label = group_tags.get(tags.ACCELERATOR, "none")
    accelerator = choose(None, label) if label.startswith("eia") else choose(label, None)
    server: ServerKind = "mms" if group_tags.get(tags.SERVER) == "mms" else "mmsctl"
    models = req.models or _models_of(group_tags)
    staged_models, ref = _assets_ref(aws, found, req, models, server)
    image = server_image(aws, accelerator, models=staged_models, server=server,
                         ami=req.ami or current.get("ImageId"),
                         instance_type=req.instance_type or current.get("InstanceType"),
                         pip_spec=req.pip_spec, management_host="0.0.0.0", assets=ref,
                         lifecycle_hook=LifecycleHook(group, asg.LAUNCH_HOOK))
    return {"ImageId": image.ami.image_id, "InstanceType": image.instance_type,
            "UserData": image.user_data_base64(), "_models": ",".join(m.arg for m in models)}


def _models_of(group_tags: dict[str, str]) -> list[ModelSpec]:
    from mmsctl.cloud.instance.userdata import parse_models

    return parse_models([m for m in group_tags.get(tags.MODELS, "").split(",") if m])


def _assets_ref(aws: AwsSession, found: FleetResources, req: RolloutRequest, models: list[ModelSpec],
                server: ServerKind) -> tuple[list[ModelSpec], Any]:
    """Stage the rollout's models and wheels in the fleet's asset prefix (only what changed is uploaded), as
    ``fleet create`` does; none for MMS or an explicit pip spec (those install from the package index)."""
    if server != "mmsctl" or req.pip_spec:
        return models, None
    from mmsctl.cloud.instance.assets import assets_ref, plan_assets, stage_assets
    from mmsctl.cloud.instance.wheelhouse import build_wheelhouse, check_python

    recorded = tags.as_dict((found.group or {}).get("Tags")).get(tags.INSTANCE_PYTHON)
    python = check_python(req.instance_python or recorded or INSTANCE_PYTHON)
    wheelhouse = None if aws.dry_run else build_wheelhouse(python)
    plan = plan_assets(models, found.names.asset_prefix, wheelhouse=wheelhouse, dry_run=aws.dry_run)
    ref = assets_ref(aws, plan, python)
    if not aws.dry_run:
        _grant_assets(aws, found, stage_assets(aws, plan, python, [], []).policy)
    return plan.models, ref


def _grant_assets(aws: AwsSession, found: FleetResources, new: dict[str, Any]) -> None:
    """Let the role read what the new version boots from, and still what the serving group's version boots
    from: its scale-outs and a rollback launch that version until the rollout finishes.

    The role's ``mmsctl-boot-assets`` becomes *new* plus the ``s3://`` models of the serving group (its
    ``mmsctl:models`` tag) that the current document names; older generations are dropped, so the document
    does not grow with each rollout.
    """
    from mmsctl.cloud.fleet.create import ASSETS_POLICY_NAME

    serving = {f"arn:{partition(aws.region)}:s3:::{m.location.removeprefix('s3://')}"
               for m in _models_of(tags.as_dict((found.group or {}).get("Tags"))) if m.kind == "s3"}
    try:
        have = aws.call("iam", "get_role_policy", RoleName=found.names.role,
                        PolicyName=ASSETS_POLICY_NAME).get("PolicyDocument") or {}
    except ResourceNotFound:
        have = {}
    have = json.loads(have) if isinstance(have, str) else have
    wanted = merge_read_statements(new, have, keep=serving)
    if wanted != have:
        aws.call("iam", "put_role_policy", RoleName=found.names.role, PolicyName=ASSETS_POLICY_NAME,
                 PolicyDocument=json.dumps(wanted))


def _pin(aws: AwsSession, found: FleetResources) -> tuple[str, str]:
    """Pin the serving group to the number of the version it runs (an instance refresh rolls back only to a
    version number; scale-outs keep booting what it runs); (template id, that version)."""
    template = found.launch_templates[0]
    template_id = str(template["LaunchTemplateId"])
    group = found.group or {}
    current = str((group.get("LaunchTemplate") or {}).get("Version") or "$Latest")
    if not current.isdigit():
        current = str(template.get("DefaultVersionNumber" if current == "$Default" else "LatestVersionNumber"))
        aws.call("autoscaling", "update_auto_scaling_group", AutoScalingGroupName=group["AutoScalingGroupName"],
                 LaunchTemplate={"LaunchTemplateId": template_id, "Version": current})
    return template_id, current


def _new_version(aws: AwsSession, found: FleetResources, req: RolloutRequest, template_id: str, current: str,
                 for_group: str) -> tuple[str, dict[str, Any]]:
    """The new version, for *for_group*: (its number, the current version as AWS describes it)."""
    versions = aws.call("ec2", "describe_launch_template_versions", LaunchTemplateId=template_id,
                        Versions=[current])["LaunchTemplateVersions"]
    described = dict(versions[0]) if versions else {}
    data = render_template_data(aws, found, req, described.get("LaunchTemplateData") or {}, for_group)
    models = data.pop("_models")
    answer = aws.call("ec2", "create_launch_template_version", LaunchTemplateId=template_id, SourceVersion=current,
                      VersionDescription=f"{asg.LAUNCH_HOOK_MARK}; mmsctl rollout: {models}"[:255],
                      LaunchTemplateData=data)
    version = str((answer.get("LaunchTemplateVersion") or {}).get("VersionNumber", "<new version>"))
    return version, described


def _grant_lifecycle(aws: AwsSession, found: FleetResources) -> None:
    """The role's permission to complete the launch hook, for a fleet made before it had one (else a no-op)."""
    from mmsctl.cloud.fleet.create import LIFECYCLE_POLICY_NAME, lifecycle_policy

    wanted = lifecycle_policy(aws, found.names)
    try:
        have = aws.call("iam", "get_role_policy", RoleName=found.names.role, PolicyName=LIFECYCLE_POLICY_NAME)
        if have.get("PolicyDocument") == wanted:
            return
    except ResourceNotFound:
        pass
    aws.call("iam", "put_role_policy", RoleName=found.names.role, PolicyName=LIFECYCLE_POLICY_NAME,
             PolicyDocument=json.dumps(wanted))


def _ready_check(aws: AwsSession, found: FleetResources) -> Optional[str]:
    """Move a health check that names a model (``/ping/MODEL``, what fleets were made with before) to the mmsctl
    server's readiness, which holds for any model set; what changed, or None. MMS fleets keep ``/ping``."""
    tg = found.target_group or {}
    path = str(tg.get("HealthCheckPath") or "")
    server = tags.as_dict((found.group or {}).get("Tags")).get(tags.SERVER)
    if server == "mms" or not path.startswith("/ping/"):
        return None
    elb.set_health_check_path(aws, str(tg["TargetGroupArn"]), READY_PATH)
    return f"{path} -> {READY_PATH} (a check that names a model fails every instance whose models drop it)"


def start(aws: AwsSession, req: RolloutRequest, *, sleep: Callable[[float], None] = time.sleep,
          clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Start a rollout; blue/green waits (bounded by ``req.timeout``) for the new group's targets, then shifts.

    Raises:
        CloudError: a rollout is already open (finish or roll it back first).
        RequestTimeout: the new group was not healthy in time; it stays, not serving (``--rollback`` removes it).
    """
    req.check()
    found = _fleet(aws, req.name)
    if found.rollout_group is not None:
        raise CloudError(f"fleet {req.name!r} has a rollout in progress ({_role(found.rollout_group) or 'open'}: "
                         f"group {found.rollout_group['AutoScalingGroupName']})",
                         hint="finish it or roll it back first", params=("finish", "rollback"))
    serving = str((found.group or {})["AutoScalingGroupName"])
    target = serving if req.strategy == "rolling" else found.names.other_group(serving)
    template_id, old = _pin(aws, found)
    new, current = _new_version(aws, found, req, template_id, old, target)
    result: dict[str, Any] = {"name": req.name, "strategy": req.strategy, "template": template_id,
                              "from_version": old, "to_version": new}
    if found.role is not None:
        _grant_lifecycle(aws, found)
    moved = _ready_check(aws, found)  # before any instance of the new version registers with the target group
    if moved:
        result["health_check"] = moved
    if req.strategy == "rolling":
        result.update(refresh.start(aws, serving, template_id, new, min_healthy=req.min_healthy,
                                    checkpoint_delay_s=req.checkpoint_delay, current=current))
        return result
    return _blue_green(aws, found, req, template_id, new, result, sleep, clock)


def _blue_green(aws: AwsSession, found: FleetResources, req: RolloutRequest, template_id: str, new: str,
                result: dict[str, Any], sleep: Callable[[float], None], clock: Callable[[], float]) -> dict[str, Any]:
    """The second group on the new version, the wait for its targets, the shift (and ``--auto-finish``)."""
    green = _launch_green(aws, found, template_id, new, req)
    result["group"] = green
    _wait_green(aws, found, green, req.timeout, sleep, clock)
    _shift(aws, found, green)
    result["state"] = "shifted"
    result["old_group"] = (found.group or {})["AutoScalingGroupName"]
    if req.auto_finish_s is not None and not aws.dry_run:
        unhealthy = _watch(aws, found, green, req.auto_finish_s, sleep, clock)
        if unhealthy is None:
            result.update(finish(aws, req.name, sleep=sleep), auto_finished=True)
        else:
            result["auto_finish"] = f"not finished: {unhealthy}; the old group is kept for a rollback"
    return result


def _watch(aws: AwsSession, found: FleetResources, green: str, seconds: float,
           sleep: Callable[[float], None], clock: Callable[[], float]) -> Optional[str]:
    """Watch the new group serve for *seconds*; None if its targets stayed healthy, else what went wrong."""
    end = clock() + seconds
    while True:
        healthy, desired = group_health(aws, found, green)
        if healthy < max(desired, 1):
            return f"{healthy} of {desired} targets of {green} healthy"
        left = end - clock()
        if left <= 0:
            return None
        sleep(min(15.0, left))


def _launch_green(aws: AwsSession, found: FleetResources, template_id: str, version: str,
                  req: RolloutRequest) -> str:
    """The second group: same subnets, sizes, grace, warm pool and target group, on the new version, with the
    launch hook from its first instance; its name."""
    group = found.group or {}
    old_name = str(group["AutoScalingGroupName"])
    green = found.names.other_group(old_name)
    group_tags = {k: v for k, v in tags.as_dict(group.get("Tags")).items() if not k.startswith("aws:")}
    group_tags[ROLLOUT_ROLE] = "launching"
    if req.models:
        group_tags[tags.MODELS] = ",".join(m.arg for m in req.models)
    if req.instance_type:
        group_tags[tags.INSTANCE_TYPE] = req.instance_type
    if req.instance_python:
        group_tags[tags.INSTANCE_PYTHON] = req.instance_python
    group_tags.pop(refresh.INSTANCE_REFRESH, None)
    asg.create_group(aws, name=green, launch_template_id=template_id, version=version,
                     subnet_ids=[s for s in str(group.get("VPCZoneIdentifier") or "").split(",") if s],
                     target_group_arn=str((found.target_group or {})["TargetGroupArn"]),
                     min_size=int(group["MinSize"]), max_size=int(group["MaxSize"]),
                     desired=int(group["DesiredCapacity"]), grace_s=int(group.get("HealthCheckGracePeriod") or 0),
                     group_tags=group_tags)
    warm = asg.warm_pool_of(aws, old_name)
    if warm and warm.get("min_size"):
        asg.put_warm_pool(aws, green, int(warm["min_size"]))
    for policy in found.policies:
        config = policy.get("TargetTrackingConfiguration") or {}
        spec = config.get("PredefinedMetricSpecification") or {}
        asg.put_request_tracking_policy(aws, group=green, name=str(policy["PolicyName"]),
                                        resource_label=str(spec.get("ResourceLabel", "")),
                                        requests_per_minute=float(config.get("TargetValue", 600.0)),
                                        warmup_s=int(policy.get("EstimatedInstanceWarmup") or 0))
    return green


def group_health(aws: AwsSession, found: FleetResources, group_name: str) -> tuple[int, int]:
    """(healthy targets among the group's instances, the group's desired size)."""
    group = asg.find_group(aws, group_name) or {}
    ids = {str(i["InstanceId"]) for i in group.get("Instances", [])}
    targets = elb.target_health(aws, str((found.target_group or {})["TargetGroupArn"]))
    healthy = sum(1 for t in targets if str(t["id"]) in ids and t.get("state") == "healthy")
    return healthy, int(group.get("DesiredCapacity") or 0)


def _wait_green(aws: AwsSession, found: FleetResources, green: str, timeout: float,
                sleep: Callable[[float], None], clock: Callable[[], float]) -> None:
    if aws.dry_run:
        return
    deadline, delay = clock() + timeout, 5.0
    while True:
        healthy, desired = group_health(aws, found, green)
        if healthy >= max(desired, 1):
            return
        left = deadline - clock()
        if left <= 0:
            raise RequestTimeout(f"fleet {found.name}: the new group {green} has {healthy} of {desired} targets "
                                 f"healthy after {timeout:g}s; traffic was not shifted",
                                 hint="the rollout's status shows it; rolling back removes it (finishing is "
                                      "refused until it serves)", params=("show_status", "rollback"))
        sleep(min(delay, left))
        delay = min(delay * 1.5, 15.0)


def _shift(aws: AwsSession, found: FleetResources, green: str) -> None:
    """Detach the old group from the target group (its instances drain, keep running) and mark both groups."""
    old = str((found.group or {})["AutoScalingGroupName"])
    tg_arn = str((found.target_group or {})["TargetGroupArn"])
    aws.call("autoscaling", "detach_load_balancer_target_groups", AutoScalingGroupName=old, TargetGroupARNs=[tg_arn])
    _tag(aws, old, "old")
    aws.call("autoscaling", "delete_tags", Tags=[{"ResourceId": green, "ResourceType": "auto-scaling-group",
                                                  "Key": ROLLOUT_ROLE}])


def _tag(aws: AwsSession, group: str, role: str) -> None:
    aws.call("autoscaling", "create_or_update_tags", Tags=[{
        "ResourceId": group, "ResourceType": "auto-scaling-group", "Key": ROLLOUT_ROLE, "Value": role,
        "PropagateAtLaunch": False}])


def _open(aws: AwsSession, name: str) -> FleetResources:
    found = _fleet(aws, name)
    if found.rollout_group is None:
        raise CloudError(f"fleet {name!r} has no rollout in progress",
                         hint="the rollout's status shows its groups", param="show_status")
    return found


def finish(aws: AwsSession, name: str, *, sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """Delete the old group once traffic was shifted; refused while the new group does not serve yet."""
    found = _open(aws, name)
    other = found.rollout_group or {}
    if _role(other) != "old":
        raise CloudError(f"fleet {name!r}: the new group {other['AutoScalingGroupName']} does not serve yet",
                         hint="wait for its targets, or roll back", param="rollback")
    version = str(((found.group or {}).get("LaunchTemplate") or {}).get("Version") or "")
    if version.isdigit():  # what the fleet runs is now the template's default (what `ec2` tools show)
        aws.call("ec2", "modify_launch_template", LaunchTemplateId=str(found.launch_templates[0]["LaunchTemplateId"]),
                 DefaultVersion=version)
    asg.delete_group(aws, str(other["AutoScalingGroupName"]), sleep=sleep)
    return {"name": name, "state": "finished", "version": version, "deleted_group": other["AutoScalingGroupName"],
            "group": (found.group or {}).get("AutoScalingGroupName")}


def rollback(aws: AwsSession, name: str, *, sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """Put the old group back behind the target group and delete the new one."""
    found = _open(aws, name)
    other = found.rollout_group or {}
    serving = found.group or {}
    if _role(other) == "old":  # traffic was shifted: the old group is the other one
        old, new = str(other["AutoScalingGroupName"]), str(serving["AutoScalingGroupName"])
        tg_arn = str((found.target_group or {})["TargetGroupArn"])
        aws.call("autoscaling", "attach_load_balancer_target_groups", AutoScalingGroupName=old,
                 TargetGroupARNs=[tg_arn])
        aws.call("autoscaling", "delete_tags", Tags=[{"ResourceId": old, "ResourceType": "auto-scaling-group",
                                                      "Key": ROLLOUT_ROLE}])
    else:  # still launching: the serving group never stopped serving
        old, new = str(serving["AutoScalingGroupName"]), str(other["AutoScalingGroupName"])
    asg.delete_group(aws, new, sleep=sleep)
    return {"name": name, "state": "rolled-back", "deleted_group": new, "group": old}


def status(aws: AwsSession, name: str) -> dict[str, Any]:
    """The rollout's state and both groups' template versions and healthy targets."""
    found = _fleet(aws, name)
    groups = [g for g in (found.group, found.rollout_group) if g]
    role = _role(found.rollout_group)
    state = {None: "none", "launching": "launching", "old": "shifted"}.get(role, str(role))
    rows = []
    for g in groups:
        healthy, desired = group_health(aws, found, str(g["AutoScalingGroupName"]))
        rows.append({"group": g["AutoScalingGroupName"], "role": _role(g) or "serving",
                     "template_version": (g.get("LaunchTemplate") or {}).get("Version"),
                     "desired": desired, "healthy": healthy,
                     "models": tags.as_dict(g.get("Tags")).get(tags.MODELS)})
    result: dict[str, Any] = {"name": name, "state": state, "groups": rows}
    serving = found.group or {}
    refresh_id = tags.as_dict(serving.get("Tags")).get(refresh.INSTANCE_REFRESH)
    if refresh_id:  # the instance refresh the last rolling rollout started
        result["instance_refresh"] = refresh.last_refresh(aws, str(serving["AutoScalingGroupName"]), refresh_id)
    return result


def template_models(name: str, region: Optional[str]) -> list[str]:
    """The models (as given) that fleet *name*'s serving group boots: what a rollout keeps."""
    from mmsctl.cloud.aws.session import open_session

    found = find_resources(open_session(region=region), name)
    return [m for m in tags.as_dict((found.group or {}).get("Tags")).get(tags.MODELS, "").split(",") if m]
