"""After an endpoint runs a new configuration: the configuration and models it left (ours, used by nothing it
runs now) are deleted, and the role is narrowed to what it runs. Never while a change is in progress: SageMaker
must not lose a configuration an endpoint is being moved from."""

from __future__ import annotations

from mmsctl.cloud.sagemaker.deploy.sources import Running
from mmsctl.cloud.sagemaker.deploy.target import Target
from mmsctl.cloud.sagemaker.resources import arn_tags, delete, ours

__all__ = ["retire"]


def _retire(t: Target, kind: str, name: str) -> None:
    if ours(arn_tags(t.aws, t.arn(kind, name)), t.name):  # not made by mmsctl for this endpoint: left alone
        delete(t.aws, kind, name)
        t.note("delete", kind, name)


def retire(t: Target, old: Running, new: Running) -> None:
    """Delete *old*'s configuration and models that *new* does not use."""
    if old.config and old.config != new.config:
        _retire(t, "endpoint-config", old.config)
    for model in old.models:
        if model and model not in new.models:
            _retire(t, "model", model)
