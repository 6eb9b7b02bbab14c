"""``sagemaker destroy NAME``: everything deploy and update made for the endpoint, in reverse order.

Scaling (its policy, then the scalable target), the endpoint (then waited for until it is gone: SageMaker
must not lose a configuration while an endpoint still uses it), every configuration and model tagged for
it, the rollback alarms, the role and its policy, the model data under ``sagemaker/NAME/`` in the asset bucket.
**Data stays**: the log group, which holds the containers' output, is kept (and named) unless
``--delete-data``. Only what carries ``mmsctl:sagemaker=NAME`` is touched; a second destroy finds nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from mmsctl.cloud.aws import asset_bucket, iam, tags
from mmsctl.cloud.aws.errors import aws_code
from mmsctl.cloud.aws.log_group import log_group_tags
from mmsctl.cloud.aws.session import AwsSession
from mmsctl.cloud.sagemaker import alarms
from mmsctl.cloud.sagemaker.deploy.scaling import drop_scaling, scaling_of
from mmsctl.cloud.sagemaker.deploy.target import Target
from mmsctl.cloud.sagemaker.resources import arn_tags, delete, describe, ours
from mmsctl.cloud.sagemaker.spec import check_name, log_group, model_prefix, role_name
from mmsctl.errors import CloudError, RequestTimeout

__all__ = ["DestroyResult", "destroy", "log_group_bytes"]

GONE_TIMEOUT_S = 900.0


@dataclass
class DestroyResult:
    name: str
    deleted: list[dict[str, str]] = field(default_factory=list)
    kept: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "deleted": self.deleted, "kept": self.kept}


def _wait_gone(t: Target, timeout: float = GONE_TIMEOUT_S) -> None:
    delay, waited = 2.0, 0.0
    while describe(t.aws, "endpoint", t.name) is not None:
        if waited >= timeout:
            raise RequestTimeout(f"endpoint {t.name} is still being deleted after {timeout:g} s",
                                 hint=f"run `mmsctl sagemaker destroy {t.name}` again later to finish")
        t.sleep(delay)
        waited += delay
        delay = min(delay * 1.5, 15.0)


def _endpoint(t: Target) -> None:
    found = describe(t.aws, "endpoint", t.name)
    if found is None or not ours(arn_tags(t.aws, found["EndpointArn"]), t.name):
        return
    drop_scaling(t, scaling_of(t.aws, t.name))
    t.aws.call("sagemaker", "delete_endpoint", EndpointName=t.name)
    t.note("delete", "endpoint", t.name)
    if not t.aws.dry_run:
        _wait_gone(t)


def _tagged(t: Target, kind: str) -> list[str]:
    """Configurations (``endpoint-config``) or models (``model``) named ``NAME-…`` and tagged for this endpoint."""
    operation, key, name_key = {"endpoint-config": ("list_endpoint_configs", "EndpointConfigs", "EndpointConfigName"),
                                "model": ("list_models", "Models", "ModelName")}[kind]
    found = t.aws.paginate("sagemaker", operation, key, NameContains=t.name)
    names = [str(f[name_key]) for f in found if str(f[name_key]).startswith(f"{t.name}-")]
    return [n for n in names if ours(arn_tags(t.aws, t.arn(kind, n)), t.name)]


def _configs_and_models(t: Target) -> None:
    for kind in ("endpoint-config", "model"):
        for name in _tagged(t, kind):
            delete(t.aws, kind, name)
            t.note("delete", kind, name)


def _role(t: Target) -> None:
    role = role_name(t.name)
    found = iam.find(t.aws, "role", role)
    if found is None or not ours(tags.as_dict(found.get("Tags")), t.name):
        return
    iam.delete_role(t.aws, role)
    t.note("delete", "iam-role", role)


def log_group_bytes(aws: AwsSession, name: str) -> int:
    """What the endpoint's log group stores, in bytes (-1: there is none)."""
    group = log_group(name)
    for found in aws.paginate("logs", "describe_log_groups", "logGroups", logGroupNamePrefix=group):
        if found.get("logGroupName") == group:
            return int(found.get("storedBytes") or 0)
    return -1


def _logs(t: Target, result: DestroyResult, delete_data: bool) -> None:
    group = log_group(t.name)
    stored = log_group_bytes(t.aws, t.name)
    if stored < 0:
        return
    if not ours(log_group_tags(t.aws, group), t.name):
        result.kept.append({"kind": "log-group", "id": group, "why": f"not tagged {tags.SAGEMAKER}={t.name}"})
        return
    if not delete_data:
        result.kept.append({"kind": "log-group", "id": group, "why": f"data is kept: {stored} bytes of logs"})
        return
    try:
        t.aws.call("logs", "delete_log_group", logGroupName=group)
    except CloudError as exc:
        if aws_code(exc) != "ResourceNotFoundException":
            raise
        return
    t.note("delete", "log-group", group)


def destroy(aws: AwsSession, name: str, *, delete_data: bool = False,
            sleep: Callable[[float], None] = time.sleep) -> DestroyResult:
    """Remove endpoint *name* and what was made for it (see the module docstring)."""
    check_name(name)
    t = Target(aws, name, sleep=sleep)
    result = DestroyResult(name)
    _endpoint(t)
    _configs_and_models(t)
    for alarm in alarms.delete_alarms(aws, name):
        t.note("delete", "alarm", alarm)
    _role(t)
    bucket, removed = asset_bucket.delete_owned_prefix(aws, model_prefix(name))
    if removed:
        t.note("delete", "model-data", f"s3://{bucket}/{model_prefix(name)} ({removed} object versions)")
    _logs(t, result, delete_data)
    result.deleted = [{"kind": c.kind, "id": c.id} for c in t.changes]
    return result
