"""Asynchronous invocations: the dead-letter queue (when no destination is given), reserved concurrency,
and the event invoke config (retries, event age, failure destination). Flags are the desired state:
a cap or config not asked for any more is removed."""

from __future__ import annotations

from typing import Any, Optional

from mmsctl.cloud.aws.errors import aws_code
from mmsctl.cloud.lambda_.deploy.target import Target
from mmsctl.cloud.lambda_.failures import default_queue_name
from mmsctl.errors import CloudError

__all__ = ["ensure_async_config", "ensure_concurrency", "ensure_failure_queue", "failure_arn"]

_QUEUE_MISSING = ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist")
_RETENTION_S = str(14 * 86400)  # SQS's longest: time to look at what failed
_DEFAULT_RETRIES, _DEFAULT_AGE_S = 2, 21600  # Lambda's own defaults


def failure_arn(t: Target) -> Optional[str]:
    destination = t.spec.failure_destination
    return destination.resolved_arn(t.partition, t.aws.region, t.account) if destination else None


def ensure_failure_queue(t: Target) -> None:
    """Our dead-letter queue, tagged, when the pipeline has no destination of the user's."""
    if t.spec.on_failure is not None or not t.spec.s3_trigger:
        return
    name = default_queue_name(t.name)
    try:
        url = t.aws.call("sqs", "get_queue_url", QueueName=name)["QueueUrl"]
    except CloudError as exc:
        if aws_code(exc) not in _QUEUE_MISSING:
            raise
    else:
        tags = t.aws.call("sqs", "list_queue_tags", QueueUrl=url).get("Tags") or {}
        if tags.get("mmsctl:lambda") != t.name:
            raise CloudError(f"queue {name} exists and was not made by mmsctl for {t.name}; refusing to use it",
                             hint="pass a destination of your own for failed events")
        t.note("reuse", "sqs-queue", name)
        return
    t.aws.call("sqs", "create_queue", QueueName=name, tags=t.tags("failure-queue"),
               Attributes={"MessageRetentionPeriod": _RETENTION_S, "SqsManagedSseEnabled": "true"})
    t.note("create", "sqs-queue", name)


def ensure_concurrency(t: Target, existed: bool) -> None:
    """Reserved concurrency as asked (a cap on the function's share of the account), or none."""
    wanted = t.spec.max_concurrency
    current = None
    if existed:  # a function made by this very run (or only planned) has none yet
        current = t.aws.call("lambda", "get_function_concurrency", FunctionName=t.name).get("ReservedConcurrentExecutions")
    if current == wanted:
        if wanted is not None:
            t.note("reuse", "reserved-concurrency", f"{t.name} = {wanted}")
        return
    if wanted is None:
        t.aws.call("lambda", "delete_function_concurrency", FunctionName=t.name)
        t.note("delete", "reserved-concurrency", t.name)
        return
    t.aws.call("lambda", "put_function_concurrency", FunctionName=t.name, ReservedConcurrentExecutions=wanted)
    t.note("update", "reserved-concurrency", f"{t.name} = {wanted}")


def _wanted_config(t: Target) -> Optional[dict[str, Any]]:
    spec = t.spec
    arn = failure_arn(t)
    if arn is None and spec.retries is None and spec.event_age_s is None:
        return None
    return {"MaximumRetryAttempts": _DEFAULT_RETRIES if spec.retries is None else spec.retries,
            "MaximumEventAgeInSeconds": spec.event_age_s or _DEFAULT_AGE_S,
            "DestinationConfig": {"OnFailure": {"Destination": arn}} if arn else {"OnFailure": {}}}


def ensure_async_config(t: Target, existed: bool) -> None:
    """The event invoke config: retries, event age and the failure destination (after the role may send there)."""
    wanted = _wanted_config(t)
    current: Optional[dict[str, Any]] = None
    try:
        if existed:
            current = t.aws.call("lambda", "get_function_event_invoke_config", FunctionName=t.name, **t.qualified())
    except CloudError as exc:
        if aws_code(exc) != "ResourceNotFoundException":
            raise
    if wanted is None:
        if current is not None:
            t.aws.call("lambda", "delete_function_event_invoke_config", FunctionName=t.name, **t.qualified())
            t.note("delete", "async-invoke-config", t.name)
        return
    if current is not None and _same(current, wanted):
        t.note("reuse", "async-invoke-config", t.name)
        return
    if current is not None:
        # Put replaces the config on AWS; moto 5 appends and keeps answering with the first one, so
        # the old one goes first (for the few milliseconds between, Lambda's defaults apply).
        t.aws.call("lambda", "delete_function_event_invoke_config", FunctionName=t.name, **t.qualified())
    t.aws.call("lambda", "put_function_event_invoke_config", FunctionName=t.name, **t.qualified(), **wanted)
    destination = (wanted["DestinationConfig"].get("OnFailure") or {}).get("Destination") or "no destination"
    t.note("create" if current is None else "update", "async-invoke-config",
           f"retries {wanted['MaximumRetryAttempts']}, age {wanted['MaximumEventAgeInSeconds']} s, "
           f"failures -> {destination}")


def _same(current: dict[str, Any], wanted: dict[str, Any]) -> bool:
    on_failure = ((current.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
    return (current.get("MaximumRetryAttempts"), current.get("MaximumEventAgeInSeconds"), on_failure) == (
        wanted["MaximumRetryAttempts"], wanted["MaximumEventAgeInSeconds"],
        wanted["DestinationConfig"]["OnFailure"].get("Destination"))
