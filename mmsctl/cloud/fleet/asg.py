"""EC2 Auto Scaling for a fleet: the group over the subnets, its target-tracking policy on
requests per target, resizing, and deletion that waits until the instances are gone."""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Optional

from mmsctl.cloud.aws.session import AwsSession
from mmsctl.errors import CloudError

__all__ = [
    "HEALTH_GRACE_S",
    "MAX_GROUP_SIZE",
    "create_group",
    "delete_group",
    "delete_policy",
    "find_group",
    "groups_tagged",
    "policies_of",
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
#: The health-check grace (and policy warm-up): twice the measured boot, so a slow boot is not killed,
#: instead of the fixed 600 s used before the boot was measured. ``--health-check-grace`` overrides it.
HEALTH_GRACE_S = 2 * (BOOT_TO_PING_S + INSTANCE_START_S)


def create_group(aws: AwsSession, *, name: str, launch_template_id: str, subnet_ids: list[str],
                 target_group_arn: str, min_size: int, max_size: int, desired: int, grace_s: int,
                 group_tags: Mapping[str, str]) -> None:
    """The group: instances from the launch template's latest version, registered with the target
    group, and replaced when the *load balancer's* health check fails (``HealthCheckType=ELB``)."""
    aws.call(
        "autoscaling", "create_auto_scaling_group", AutoScalingGroupName=name,
        LaunchTemplate={"LaunchTemplateId": launch_template_id, "Version": "$Latest"},
        MinSize=min_size, MaxSize=max_size, DesiredCapacity=desired,
        VPCZoneIdentifier=",".join(subnet_ids), TargetGroupARNs=[target_group_arn],
        HealthCheckType="ELB", HealthCheckGracePeriod=grace_s,
        Tags=[{"ResourceId": name, "ResourceType": "auto-scaling-group", "Key": k, "Value": str(v)[:256],
               "PropagateAtLaunch": False} for k, v in group_tags.items()],
    )


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
    """The group's warm pool configuration and its instances' count, or None."""
    answer = aws.call("autoscaling", "describe_warm_pool", AutoScalingGroupName=group)
    config = answer.get("WarmPoolConfiguration")
    if not config:
        return None
    return {"min_size": config.get("MinSize"), "state": config.get("PoolState"),
            "reuse_on_scale_in": (config.get("InstanceReusePolicy") or {}).get("ReuseOnScaleIn"),
            "instances": len(answer.get("Instances") or [])}


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
