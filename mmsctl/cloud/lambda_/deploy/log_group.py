"""The function's log group, made before the function so it carries our tags and retention
(:func:`mmsctl.cloud.aws.log_group.ensure_log_group`)."""

from __future__ import annotations

from mmsctl.cloud.aws import log_group as logs
from mmsctl.cloud.aws import tags
from mmsctl.cloud.lambda_ import spec as names
from mmsctl.cloud.lambda_.deploy.target import Target

__all__ = ["ensure_log_group"]


def ensure_log_group(t: Target) -> None:
    group = names.log_group_name(t.name)
    action, noted = logs.ensure_log_group(t.aws, group, tags=t.tags("log-group"), retention_days=names.LOG_RETENTION_DAYS,
                                          owner=(tags.LAMBDA, t.name))
    t.note(action, "log-group", noted)
