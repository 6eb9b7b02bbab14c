"""The S3 trigger: S3's permission to invoke (source bucket and account), then our entries in the input
bucket's notification configuration (one per image suffix), leaving everyone else's as they are."""

from __future__ import annotations

import json
from typing import Any, Optional

from mmsctl.cloud.aws.errors import aws_code
from mmsctl.cloud.lambda_ import spec as names
from mmsctl.cloud.lambda_.deploy.permissions import Permissions
from mmsctl.cloud.lambda_.deploy.target import Target
from mmsctl.errors import CloudError, UsageError, causes

__all__ = ["NOT_VALIDATED", "NotificationNotValidated", "NotificationOverlap", "check_no_overlap", "ensure_trigger"]


class NotificationOverlap(UsageError):
    """Someone else's notification on the input bucket overlaps ours: S3 would refuse the configuration
    half-way through a deploy, so deploy refuses first."""

    reference = "lambda-notification-overlap"


class NotificationNotValidated(CloudError):
    """S3 still could not check that it may invoke the function after every try (InvalidArgument)."""

    reference = "lambda-notification-not-validated"


_SID_S3 = "mmsctl-s3"
#: S3's message (code InvalidArgument) when its test of a destination fails: for a function, until the
#: permission AddPermission just gave s3.amazonaws.com has reached S3, or when there is none.
NOT_VALIDATED = "Unable to validate the following destination configurations"
#: Tries of PutBucketNotificationConfiguration while the permission propagates: waits of 1, 2, 4, 8, then
#: 10 s, about 45 s in all.
_NOTIFY_TRIES = 8


def ensure_trigger(t: Target, permissions: Permissions, previous_input: Optional[str]) -> None:
    """Point the input bucket at the function; a previous input bucket loses our entries."""
    spec = t.spec
    if previous_input and previous_input != spec.input_bucket:
        _set_notifications(t, previous_input, [])
    if not spec.input_bucket:
        return
    permissions.grant(_SID_S3, Action="lambda:InvokeFunction", Principal="s3.amazonaws.com",
                      SourceArn=f"arn:{t.partition}:s3:::{spec.input_bucket}", SourceAccount=t.account)
    ours_now = []
    for suffix in spec.suffixes:
        rules = [{"Name": "suffix", "Value": suffix}]
        if spec.input_prefix:
            rules.insert(0, {"Name": "prefix", "Value": spec.input_prefix})
        ours_now.append({"Id": names.notification_id(t.name, suffix), "LambdaFunctionArn": t.target_arn,
                         "Events": ["s3:ObjectCreated:*"], "Filter": {"Key": {"FilterRules": rules}}})
    _set_notifications(t, spec.input_bucket, ours_now)


def _set_notifications(t: Target, bucket: str, wanted: list[dict[str, Any]]) -> None:
    try:
        current = t.aws.call("s3", "get_bucket_notification_configuration", Bucket=bucket)
    except CloudError as exc:
        if aws_code(exc) in ("NoSuchBucket", "404") and not wanted:
            return
        if not t.aws.dry_run or aws_code(exc) not in ("NoSuchBucket", "404"):
            raise
        current = {}
    config = {k: v for k, v in current.items()
              if k in ("TopicConfigurations", "QueueConfigurations", "LambdaFunctionConfigurations",
                       "EventBridgeConfiguration")}
    prefix = names.notification_prefix(t.name)
    lambdas = config.get("LambdaFunctionConfigurations", [])
    mine = [c for c in lambdas if str(c.get("Id", "")).startswith(prefix)]
    if _normalised(mine) == _normalised(wanted):
        if wanted:
            t.note("reuse", "s3-notification", f"s3://{bucket} ({len(wanted)} suffix filters)")
        return
    config["LambdaFunctionConfigurations"] = [c for c in lambdas if c not in mine] + wanted
    if not config["LambdaFunctionConfigurations"]:
        del config["LambdaFunctionConfigurations"]
    _put_notifications(t, bucket, config)
    action = "delete" if not wanted else ("update" if mine else "create")
    t.note(action, "s3-notification", f"s3://{bucket} ({len(wanted or mine)} suffix filters)")


def _put_notifications(t: Target, bucket: str, config: dict[str, Any]) -> None:
    """PutBucketNotificationConfiguration, tried again while S3 cannot yet validate the function (bounded).

    S3 tests every destination when the configuration is put; a Lambda permission added a moment
    before may not have reached it yet, and S3 then answers InvalidArgument with :data:`NOT_VALIDATED`.

    Raises:
        NotificationNotValidated: still refused after :data:`_NOTIFY_TRIES` tries.
    """
    from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

    retrying = Retrying(retry=retry_if_exception(_not_validated), stop=stop_after_attempt(_NOTIFY_TRIES),
                        wait=wait_exponential(multiplier=1, max=10), sleep=t.sleep, reraise=True)
    try:
        for attempt in retrying:
            with attempt:
                t.aws.call("s3", "put_bucket_notification_configuration", Bucket=bucket,
                           NotificationConfiguration=config)
    except CloudError as exc:
        if not _not_validated(exc):
            raise
        detail = "; ".join(_argument_values(exc)) or NOT_VALIDATED
        raise NotificationNotValidated(
            f"S3 refused the notifications of s3://{bucket} for {t.target_arn} {_NOTIFY_TRIES} times: {detail}",
            hint=f"S3 may invoke the function only through its permission {_SID_S3} (`aws lambda get-policy "
                 f"--function-name {t.name}`), which takes a moment to reach S3: run the deploy again") from exc


def _not_validated(exc: BaseException) -> bool:
    return isinstance(exc, CloudError) and aws_code(exc) == "InvalidArgument" and NOT_VALIDATED in exc.message


def _argument_values(exc: BaseException) -> list[str]:
    """S3's reasons for each refused destination (``ArgumentValue1``…: "Not authorized to invoke function [ARN]")."""
    for cause in causes(exc):
        response = getattr(cause, "response", None)
        if isinstance(response, dict):
            error = response.get("Error") or {}
            return [str(v)[:300] for k, v in sorted(error.items()) if str(k).startswith("ArgumentValue")][:5]
    return []


def _normalised(configs: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps({"Id": c.get("Id"), "Arn": c.get("LambdaFunctionArn"), "Events": sorted(c.get("Events", [])),
                              "Rules": sorted((r["Name"].lower(), r["Value"])
                                              for r in ((c.get("Filter") or {}).get("Key") or {}).get("FilterRules", []))},
                             sort_keys=True) for c in configs)


def check_no_overlap(t: Target) -> None:
    """Refuse (before any change) a notification of someone else's on the input bucket that overlaps ours:
    an object-created event with an overlapping prefix and suffix."""
    spec = t.spec
    if not spec.input_bucket:
        return
    try:
        current = t.aws.call("s3", "get_bucket_notification_configuration", Bucket=spec.input_bucket)
    except CloudError as exc:
        if aws_code(exc) in ("NoSuchBucket", "404"):
            return  # deploy makes the bucket: nothing to clash with
        raise
    mine = names.notification_prefix(t.name)
    for kind, arn_key in (("LambdaFunctionConfigurations", "LambdaFunctionArn"), ("QueueConfigurations", "QueueArn"),
                          ("TopicConfigurations", "TopicArn")):
        for rule in current.get(kind) or []:
            if str(rule.get("Id", "")).startswith(mine) or not _creates(rule.get("Events") or []):
                continue
            filters = {r["Name"].lower(): r["Value"] for r in ((rule.get("Filter") or {}).get("Key") or {})
                       .get("FilterRules", [])}
            prefix, suffix = filters.get("prefix", ""), filters.get("suffix", "")
            if _prefixes_overlap(prefix, spec.input_prefix) and any(_suffixes_overlap(suffix, s) for s in spec.suffixes):
                raise NotificationOverlap(
                    f"s3://{spec.input_bucket} already sends object-created events for prefix {prefix!r} and suffix "
                    f"{suffix!r} to {rule.get(arn_key, '?')} (rule {rule.get('Id', '?')}); S3 refuses a second "
                    "rule that overlaps it", params=("input_bucket", "input_prefix", "suffixes"),
                    hint="use a prefix or suffixes that do not overlap it, or remove that rule first")


def _creates(events: list[str]) -> bool:
    return any(e == "s3:*" or e.startswith("s3:ObjectCreated") for e in events)


def _prefixes_overlap(a: str, b: str) -> bool:
    return a.startswith(b) or b.startswith(a)


def _suffixes_overlap(a: str, b: str) -> bool:
    return a.endswith(b) or b.endswith(a)
