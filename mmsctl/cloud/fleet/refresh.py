"""``fleet rollout --strategy rolling``: the one group's instance refresh onto a new launch template version.

The refresh replaces instances in batches, keeping ``MinHealthyPercentage`` of the group in service,
pauses ``CheckpointDelay`` at each checkpoint, and rolls back (AutoRollback) when it fails. A rollback
goes back to the version the group was on, which must be a version number (the rollout pins it first).

The group's launch hook holds each new instance until its server is ready. A group made by an mmsctl
without the hook gets it before the refresh only when the version it runs completes the hook too: an
instance of an older version would wait the whole heartbeat and be abandoned, and an AutoRollback
launches exactly those.
"""

from __future__ import annotations

from typing import Any, Optional

from mmsctl.cloud.aws.session import AwsSession
from mmsctl.cloud.fleet import asg

__all__ = ["CHECKPOINTS", "CHECKPOINT_DELAY_S", "INSTANCE_REFRESH", "MAX_CHECKPOINT_DELAY_S", "last_refresh",
           "start", "start_refresh"]

#: Instance refresh pauses at these shares of the group replaced (the last must be 100).
CHECKPOINTS = [50, 100]
#: The pause at each checkpoint (without CheckpointDelay AWS pauses an hour). Long enough to watch the new
#: half take real traffic: the balancer marks a member unhealthy after 3 failed checks 15 s apart, the group
#: replaces it, and a model that fails under load shows within minutes. Short enough that the two pauses add
#: 20 minutes to a rollout, not two hours.
CHECKPOINT_DELAY_S = 600
#: The longest pause accepted (AWS allows 172800 s; a pause of more than a day is a typo or a forgotten flag).
MAX_CHECKPOINT_DELAY_S = 86400
#: Tag on a group a rolling rollout refreshes: the instance refresh's id, which ``--status`` describes.
INSTANCE_REFRESH = "mmsctl:instance-refresh"


def start_refresh(aws: AwsSession, group: str, template_id: str, version: str, min_healthy: int,
                  checkpoint_delay_s: int = CHECKPOINT_DELAY_S) -> str:
    """The group's instance refresh onto *version*, rolled back by AWS if it fails; its id."""
    answer = aws.call(
        "autoscaling", "start_instance_refresh", AutoScalingGroupName=group, Strategy="Rolling",
        DesiredConfiguration={"LaunchTemplate": {"LaunchTemplateId": template_id, "Version": version}},
        Preferences={"MinHealthyPercentage": min_healthy, "CheckpointPercentages": list(CHECKPOINTS),
                     "CheckpointDelay": checkpoint_delay_s, "AutoRollback": True, "SkipMatching": True})
    return str(answer.get("InstanceRefreshId", ""))


def start(aws: AwsSession, group: str, template_id: str, version: str, *, min_healthy: int,
          checkpoint_delay_s: int, current: dict[str, Any]) -> dict[str, Any]:
    """The launch hook where it is safe (module docstring), then the refresh; what a rollout reports.

    *current* is the launch template version the group runs (from DescribeLaunchTemplateVersions).
    """
    result: dict[str, Any] = {"group": group}
    if asg.launch_hook_of(aws, group) is None:
        if asg.completes_hook(current.get("VersionDescription")):
            asg.put_launch_hook(aws, group)
            result["lifecycle_hook"] = f"added {asg.LAUNCH_HOOK} to {group}"
        else:
            result["lifecycle_hook"] = (
                f"not added: {group}'s instances run a version whose boot does not complete a lifecycle hook, "
                "and a rollback would launch those; the next rollout adds it (a blue/green rollout adds it now)")
    result["instance_refresh"] = start_refresh(aws, group, template_id, version, min_healthy, checkpoint_delay_s)
    result["checkpoints"] = f"{', '.join(f'{c}%' for c in CHECKPOINTS)}, each a {checkpoint_delay_s} s pause"
    result["checkpoint_delay_s"] = checkpoint_delay_s
    aws.call("autoscaling", "create_or_update_tags", Tags=[{
        "ResourceId": group, "ResourceType": "auto-scaling-group", "Key": INSTANCE_REFRESH,
        "Value": result["instance_refresh"] or "<new instance refresh>", "PropagateAtLaunch": False}])
    result["state"] = "refreshing"
    return result


def last_refresh(aws: AwsSession, group: str, refresh_id: str) -> Optional[dict[str, Any]]:
    """The instance refresh a rolling rollout started on *group*: its status, progress and preferences."""
    answer = aws.call("autoscaling", "describe_instance_refreshes", AutoScalingGroupName=group,
                      InstanceRefreshIds=[refresh_id])
    for item in answer.get("InstanceRefreshes") or []:
        prefs = item.get("Preferences") or {}
        return {"id": item.get("InstanceRefreshId"), "status": item.get("Status"),
                "status_reason": item.get("StatusReason"), "percent_complete": item.get("PercentageComplete"),
                "instances_to_update": item.get("InstancesToUpdate"),
                "checkpoints": prefs.get("CheckpointPercentages"), "checkpoint_delay_s": prefs.get("CheckpointDelay"),
                "min_healthy": prefs.get("MinHealthyPercentage"), "auto_rollback": prefs.get("AutoRollback"),
                "to_version": ((item.get("DesiredConfiguration") or {}).get("LaunchTemplate") or {}).get("Version")}
    return None
