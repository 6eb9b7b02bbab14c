"""The log group SageMaker writes the containers' output to, made first (tagged, with a retention) so the role
needs no right to create log groups."""

from __future__ import annotations

from mmsctl.cloud.sagemaker.deploy.target import Target
from mmsctl.cloud.sagemaker.spec import LOG_RETENTION_DAYS, log_group

__all__ = ["ensure_log_group"]


def ensure_log_group(t: Target) -> str:
    group = log_group(t.name)
    found = t.aws.paginate("logs", "describe_log_groups", "logGroups", logGroupNamePrefix=group)
    if any(g.get("logGroupName") == group for g in found):
        t.note("reuse", "log-group", group)
        return group
    t.aws.call("logs", "create_log_group", logGroupName=group, tags=t.tags("log-group"))
    t.aws.call("logs", "put_retention_policy", logGroupName=group, retentionInDays=LOG_RETENTION_DAYS)
    t.note("create", "log-group", group)
    return group
