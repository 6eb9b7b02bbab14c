"""The function's log group, made before the function so it carries our tags and retention."""

from __future__ import annotations

from mmsctl.cloud.lambda_ import spec as names
from mmsctl.cloud.lambda_.deploy.target import Target

__all__ = ["ensure_log_group"]


def ensure_log_group(t: Target) -> None:
    group = names.log_group_name(t.name)
    found = t.aws.call("logs", "describe_log_groups", logGroupNamePrefix=group).get("logGroups", [])
    if any(g.get("logGroupName") == group for g in found):
        t.note("reuse", "log-group", group)
        return
    t.aws.call("logs", "create_log_group", logGroupName=group, tags=t.tags("log-group"))
    t.aws.call("logs", "put_retention_policy", logGroupName=group, retentionInDays=names.LOG_RETENTION_DAYS)
    t.note("create", "log-group", group)
