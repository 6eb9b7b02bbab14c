"""EC2 Auto Scaling for a fleet: the group over the subnets with its launch lifecycle hook, its
target-tracking policy on requests per target, the warm pool, resizing, and deletion that waits
until the instances are gone."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Callable, Iterable, Mapping, Optional

from mmsctl.cloud.aws.session import AwsSession
from mmsctl.errors import CloudError

__all__ = [
    "HEALTH_GRACE_S",
    "LAUNCH_HOOK",
    "LAUNCH_HOOK_TIMEOUT_S",
    "MAX_GROUP_SIZE",
    "LAUNCH_HOOK_MARK",
    "complete_lifecycle_policy",
    "completes_hook",
    "create_group",
    "delete_group",
    "delete_policy",
    "find_group",
    "groups_tagged",
    "launch_hook_of",
    "policies_of",
    "put_launch_hook",
    "put_request_tracking_policy",
    "put_warm_pool",
    "set_size",
    "warm_pool_of",
]

#: A ceiling on --min/--max/--desired: far above any model fleet, far below what a typo could cost.
MAX_GROUP_SIZE = 1000
#: Boot script start to the first /ping with assets (bench/boot.py's figure; its target is <= 60 s, apt excluded).
BOOT_TO_PING_S = 60
#: EC2 launch to the boot script starting (instance start, cloud-init): AWS's usual 60-90 s, upper end.
INSTANCE_START_S = 90
#: The health-check grace (and policy warm-up): twice the measured boot, so a slow boot is not killed.
#: ``--health-check-grace`` overrides it.
HEALTH_GRACE_S = 2 * (BOOT_TO_PING_S + INSTANCE_START_S)
#: The EC2_INSTANCE_LAUNCHING hook on every fleet group: AWS holds a launching instance in ``Pending:Wait``
#: (``Warmed:Pending:Wait`` on its way into a warm pool) until its boot script completes the action once the
#: server is ready, so a warm-pool instance is stopped only after its boot, and a member joins the target
#: group only when it serves.
LAUNCH_HOOK = "mmsctl-server-ready"
LAUNCH_TRANSITION = "autoscaling:EC2_INSTANCE_LAUNCHING"
#: The hook's heartbeat: the slowest boot mmsctl makes (apt, then pip from the package index for --pip-spec
#: or MMS: minutes) plus the boot script's own 15-minute wait for the server, so a boot that fails is ended
#: by the script's ABANDON (with its reason in the log) and only a boot that hangs or dies meets this.
LAUNCH_HOOK_TIMEOUT_S = 1800
#: What AWS does when the heartbeat runs out: terminate the instance (and launch another), never let an
#: instance whose boot did not finish serve or go into the warm pool.
LAUNCH_HOOK_DEFAULT = "ABANDON"
#: In the description of every launch template version whose boot completes the launch hook: what tells a
#: rollout that the version a group runs can live with the hook (versions an older mmsctl made cannot).
LAUNCH_HOOK_MARK = f"boot completes {LAUNCH_HOOK}"


def _launch_hook() -> dict[str, Any]:
    return {"LifecycleHookName": LAUNCH_HOOK, "LifecycleTransition": LAUNCH_TRANSITION,
            "HeartbeatTimeout": LAUNCH_HOOK_TIMEOUT_S, "DefaultResult": LAUNCH_HOOK_DEFAULT}


def create_group(aws: AwsSession, *, name: str, launch_template_id: str, subnet_ids: list[str],
                 target_group_arn: str, min_size: int, max_size: int, desired: int, grace_s: int,
                 group_tags: Mapping[str, str], version: str = "$Latest") -> None:
    """The group: instances from the launch template's *version*, registered with the target group,
    replaced when the *load balancer's* health check fails (``HealthCheckType=ELB``), and the launch
    hook made with it, so it holds the very first instance the group launches."""
    aws.call(
        "autoscaling", "create_auto_scaling_group", AutoScalingGroupName=name,
        LaunchTemplate={"LaunchTemplateId": launch_template_id, "Version": version},
        MinSize=min_size, MaxSize=max_size, DesiredCapacity=desired,
        VPCZoneIdentifier=",".join(subnet_ids), TargetGroupARNs=[target_group_arn],
        HealthCheckType="ELB", HealthCheckGracePeriod=grace_s,
        LifecycleHookSpecificationList=[_launch_hook()],
        Tags=[{"ResourceId": name, "ResourceType": "auto-scaling-group", "Key": k, "Value": str(v)[:256],
               "PropagateAtLaunch": False} for k, v in group_tags.items()],
    )


def completes_hook(version_description: Optional[str]) -> bool:
    """Whether a launch template version (by its description) boots instances that complete the launch hook."""
    return LAUNCH_HOOK_MARK in str(version_description or "")


def put_launch_hook(aws: AwsSession, group: str) -> None:
    """The launch hook on a group made without one (by an mmsctl before it), the same as at create."""
    aws.call("autoscaling", "put_lifecycle_hook", AutoScalingGroupName=group, **_launch_hook())


def launch_hook_of(aws: AwsSession, group: str) -> Optional[dict[str, Any]]:
    """The group's launch hook as AWS has it, or None."""
    answer = aws.call("autoscaling", "describe_lifecycle_hooks", AutoScalingGroupName=group,
                      LifecycleHookNames=[LAUNCH_HOOK])
    for hook in answer.get("LifecycleHooks") or []:
        if hook.get("LifecycleHookName") == LAUNCH_HOOK:
            return {"name": LAUNCH_HOOK, "transition": hook.get("LifecycleTransition"),
                    "heartbeat_timeout_s": hook.get("HeartbeatTimeout"), "default_result": hook.get("DefaultResult")}
    return None


def complete_lifecycle_policy(partition: str, region: str, account: str, groups: Iterable[str]) -> dict[str, Any]:
    """The instances' permission to complete their own launch action: ``autoscaling:CompleteLifecycleAction``
    (resource type autoScalingGroup) on exactly the fleet's groups. A group's id is AWS's, unknown before the
    group exists, so it is ``*``; the group's name, region and account are the fleet's."""
    return {"Version": "2012-10-17", "Statement": [{
        "Sid": "CompleteOwnLaunch", "Effect": "Allow", "Action": ["autoscaling:CompleteLifecycleAction"],
        "Resource": [f"arn:{partition}:autoscaling:{region}:{account}:autoScalingGroup:*:autoScalingGroupName/{g}"
                     for g in groups]}]}


def put_request_tracking_policy(aws: AwsSession, *, group: str, name: str, resource_label: str,
                                requests_per_minute: float, warmup_s: int) -> str:
    """Target tracking on ALBRequestCountPerTarget (requests per target per minute); the policy ARN."""
    answer = aws.call(
        "autoscaling", "put_scaling_policy", AutoScalingGroupName=group, PolicyName=name,
        PolicyType="TargetTrackingScaling", EstimatedInstanceWarmup=warmup_s,
        TargetTrackingConfiguration={
            "PredefinedMetricSpecification": {"PredefinedMetricType": "ALBRequestCountPerTarget",
                                              "ResourceLabel": resource_label},
            "TargetValue": float(requests_per_minute),
            "DisableScaleIn": False,
        },
    )
    return str(answer.get("PolicyARN", ""))


def put_warm_pool(aws: AwsSession, group: str, size: int) -> None:
    """*size* instances kept launched, booted and stopped, so a scale-out starts a stopped instance (seconds)
    instead of booting a new one; instances scaled in go back to the pool (their boot is already done)."""
    aws.call("autoscaling", "put_warm_pool", AutoScalingGroupName=group, MinSize=size, PoolState="Stopped",
             InstanceReusePolicy={"ReuseOnScaleIn": True})


def warm_pool_of(aws: AwsSession, group: str) -> Optional[dict[str, Any]]:
    """The group's warm pool configuration, and its instances counted by lifecycle state
    (``Warmed:Pending:Wait`` while one boots, ``Warmed:Stopped`` once it is ready and stopped), or None."""
    answer = aws.call("autoscaling", "describe_warm_pool", AutoScalingGroupName=group)
    config = answer.get("WarmPoolConfiguration")
    if not config:
        return None
    instances = answer.get("Instances") or []
    states = Counter(str(i.get("LifecycleState")) for i in instances)
    return {"min_size": config.get("MinSize"), "state": config.get("PoolState"),
            "reuse_on_scale_in": (config.get("InstanceReusePolicy") or {}).get("ReuseOnScaleIn"),
            "instances": len(instances), "lifecycle": dict(sorted(states.items()))}


def find_group(aws: AwsSession, name: str) -> Optional[dict[str, Any]]:
    groups = aws.call("autoscaling", "describe_auto_scaling_groups", AutoScalingGroupNames=[name])
    found = groups.get("AutoScalingGroups", [])
    return dict(found[0]) if found else None


def groups_tagged(aws: AwsSession, key: str) -> list[dict[str, Any]]:
    """Every group carrying tag *key* (any value)."""
    return aws.paginate("autoscaling", "describe_auto_scaling_groups", "AutoScalingGroups",
                        Filters=[{"Name": "tag-key", "Values": [key]}])


def policies_of(aws: AwsSession, group: str) -> list[dict[str, Any]]:
    return aws.paginate("autoscaling", "describe_policies", "ScalingPolicies", AutoScalingGroupName=group)


def set_size(aws: AwsSession, name: str, *, min_size: int, max_size: int, desired: int) -> None:
    aws.call("autoscaling", "update_auto_scaling_group", AutoScalingGroupName=name,
             MinSize=min_size, MaxSize=max_size, DesiredCapacity=desired)


def delete_policy(aws: AwsSession, group: str, name: str) -> None:
    aws.call("autoscaling", "delete_policy", AutoScalingGroupName=group, PolicyName=name)


def delete_group(aws: AwsSession, name: str, *, sleep: Callable[[float], None] = time.sleep,
                 timeout: float = 900.0, already_deleting: bool = False) -> None:
    """Delete the group and its instances (``ForceDelete``), then wait until AWS no longer lists it,
    so the security groups its instances used can go next. A group already ``Delete in progress``
    (an earlier run that gave up waiting) is only waited for."""
    if not already_deleting:
        aws.call("autoscaling", "delete_auto_scaling_group", AutoScalingGroupName=name, ForceDelete=True)
    if aws.dry_run:
        return
    waited, delay = 0.0, 2.0
    while find_group(aws, name) is not None:
        if waited >= timeout:
            raise CloudError(f"Auto Scaling group {name} is still being deleted after {timeout:g}s",
                             hint="run the command again; it picks up where it stopped")
        sleep(delay)
        waited += delay
        delay = min(delay * 1.5, 15.0)
