"""A deployment's CloudWatch Logs group: made before the service writes to it (tagged, with a retention, so the
service's role needs no right to create groups), and its tags read before anything deletes it.

A group of that name that lacks the deployment's owner tag (the service made it, or someone else) is used as it
is and never deleted: destroy keeps it.
"""

from __future__ import annotations

from typing import Mapping, Optional

from mmsctl.cloud.aws.session import AwsSession

__all__ = ["ensure_log_group", "log_group_tags"]


def log_group_tags(aws: AwsSession, group: str) -> Optional[dict[str, str]]:
    """Group *group*'s tags ({} for none), or None when there is no such group."""
    found = [g for g in aws.paginate("logs", "describe_log_groups", "logGroups", logGroupNamePrefix=group)
             if g.get("logGroupName") == group]
    if not found:
        return None
    arn = str(found[0].get("arn", "")).removesuffix(":*")
    if not arn or aws.unlooked is not None:
        return {}
    return dict(aws.call("logs", "list_tags_for_resource", resourceArn=arn).get("tags") or {})


def ensure_log_group(aws: AwsSession, group: str, *, tags: Mapping[str, str], retention_days: int,
                     owner: tuple[str, str]) -> tuple[str, str]:
    """What was done and to what, as a change notes it: ``create`` (tagged, with *retention_days*) or ``reuse``
    (ours; or there without the *owner* tag: used, never changed, and the note says so)."""
    found = log_group_tags(aws, group)
    if found is not None:
        mine = found.get(owner[0]) == owner[1]
        return "reuse", group if mine else f"{group} (not tagged {owner[0]}={owner[1]}: destroy keeps it)"
    aws.call("logs", "create_log_group", logGroupName=group, tags=dict(tags))
    aws.call("logs", "put_retention_policy", logGroupName=group, retentionInDays=retention_days)
    return "create", group
