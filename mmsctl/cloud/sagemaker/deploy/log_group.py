"""The log group SageMaker writes the containers' output to (:func:`mmsctl.cloud.aws.log_group.ensure_log_group`):
made first, tagged, with a retention, so the role needs no right to create log groups."""

from __future__ import annotations

from mmsctl.cloud.aws import log_group as logs
from mmsctl.cloud.aws import tags
from mmsctl.cloud.sagemaker.deploy.target import Target
from mmsctl.cloud.sagemaker.spec import LOG_RETENTION_DAYS, log_group

__all__ = ["ensure_log_group"]


def ensure_log_group(t: Target) -> str:
    group = log_group(t.name)
    action, noted = logs.ensure_log_group(t.aws, group, tags=t.tags("log-group"), retention_days=LOG_RETENTION_DAYS,
                                          owner=(tags.SAGEMAKER, t.name))
    t.note(action, "log-group", noted)
    return group
