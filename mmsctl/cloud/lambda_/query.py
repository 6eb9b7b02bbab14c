"""``mmsctl lambda list`` and ``describe``: the functions mmsctl deployed, and one in full."""

from __future__ import annotations

import json
from typing import Any, Optional

from mmsctl.cloud.aws.errors import aws_code
from mmsctl.cloud.aws.session import AwsSession
from mmsctl.cloud.aws.tags import LAMBDA, LAMBDA_INPUT, LAMBDA_MODEL, LAMBDA_OUTPUT
from mmsctl.cloud.lambda_ import env
from mmsctl.cloud.lambda_ import spec as names
from mmsctl.cloud.lambda_.resources import function_or_none, ours
from mmsctl.errors import CloudError, NotFoundError

__all__ = ["describe_function", "list_functions"]


def _row(config: dict[str, Any], tags: dict[str, str]) -> dict[str, Any]:
    variables = (config.get("Environment") or {}).get("Variables") or {}
    return {
        "name": config.get("FunctionName"),
        "state": config.get("State") or "Active",
        "memory": config.get("MemorySize"),
        "timeout": config.get("Timeout"),
        "model": tags.get(LAMBDA_MODEL),
        "model_uri": variables.get(env.ENV_MODEL),
        "model_version": variables.get(env.ENV_MODEL_VERSION),
        "input": _where(tags.get(LAMBDA_INPUT), variables.get(env.ENV_INPUT_PREFIX)),
        "output": _where(tags.get(LAMBDA_OUTPUT), variables.get(env.ENV_OUTPUT_PREFIX)),
        "last_modified": config.get("LastModified"),
        "arn": config.get("FunctionArn"),
    }


def _where(bucket: Optional[str], prefix: Optional[str]) -> Optional[str]:
    return f"s3://{bucket}/{prefix or ''}" if bucket else None


def list_functions(aws: AwsSession) -> list[dict[str, Any]]:
    """The functions in this region tagged ``mmsctl:lambda``, by name."""
    tagged = aws.paginate("resourcegroupstaggingapi", "get_resources", "ResourceTagMappingList",
                          TagFilters=[{"Key": LAMBDA}], ResourceTypeFilters=["lambda:function"])
    by_arn = {str(r["ResourceARN"]): {t["Key"]: t["Value"] for t in r.get("Tags", [])} for r in tagged}
    rows = []
    for config in aws.paginate("lambda", "list_functions", "Functions"):
        found = by_arn.get(str(config.get("FunctionArn")))
        if found is not None and ours(found, str(config.get("FunctionName"))):
            rows.append(_row(config, found))
    rows.sort(key=lambda r: str(r["name"]))
    return rows


def describe_function(aws: AwsSession, name: str) -> dict[str, Any]:
    """Everything deploy set up for *name*: function, image, role, URL, trigger, schedule, permissions, tags.

    Raises:
        NotFoundError: no function of that name (exit 3).
        CloudError: the function was not deployed by mmsctl.
    """
    names.check_function_name(name)
    found = function_or_none(aws, name)
    if found is None:
        raise NotFoundError(f"no function {name} in {aws.region}", hint="`mmsctl lambda list` shows mmsctl's functions")
    tags = found.get("Tags") or {}
    if not ours(tags, name):
        raise CloudError(f"function {name} was not deployed by mmsctl (no {LAMBDA}={name} tag)")
    config = found["Configuration"]
    info = _row(config, tags)
    info.update(image=(found.get("Code") or {}).get("ImageUri"), role=config.get("Role"),
                package=config.get("PackageType"), architectures=config.get("Architectures"))
    info["url"], info["url_auth"], info["cors"] = _url(aws, name)
    info["asynchronous"] = _asynchronous(aws, name)
    info["s3_trigger"] = _trigger(aws, name, tags.get(LAMBDA_INPUT))
    info["schedule"] = _schedule(aws, name)
    info["permissions"] = _permissions(aws, name)
    info["log_group"] = names.log_group_name(name)
    info["tags"] = tags
    return info


def _url(aws: AwsSession, name: str) -> tuple[Optional[str], Optional[str], Optional[list[str]]]:
    """The URL, its auth type and the origins CORS lets call it."""
    qualifiers: tuple[dict[str, Any], ...] = ({}, {"Qualifier": names.ALIAS})
    for qualifier in qualifiers:
        try:
            url = aws.call("lambda", "get_function_url_config", FunctionName=name, **qualifier)
            return url.get("FunctionUrl"), url.get("AuthType"), (url.get("Cors") or {}).get("AllowOrigins")
        except CloudError as exc:
            if aws_code(exc) != "ResourceNotFoundException":
                raise
    return None, None, None


def _asynchronous(aws: AwsSession, name: str) -> dict[str, Any]:
    """Reserved concurrency, retries, event age and failure destination of asynchronous invocations."""
    cap = aws.call("lambda", "get_function_concurrency", FunctionName=name).get("ReservedConcurrentExecutions")
    out: dict[str, Any] = {"max_concurrency": cap}
    try:
        config = aws.call("lambda", "get_function_event_invoke_config", FunctionName=name)
    except CloudError as exc:
        if aws_code(exc) != "ResourceNotFoundException":
            raise
        return out
    out.update(retries=config.get("MaximumRetryAttempts"), max_event_age_s=config.get("MaximumEventAgeInSeconds"),
               on_failure=((config.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination"))
    return out


def _trigger(aws: AwsSession, name: str, bucket: Optional[str]) -> Optional[list[str]]:
    if not bucket:
        return None
    try:
        config = aws.call("s3", "get_bucket_notification_configuration", Bucket=bucket)
    except CloudError as exc:
        if aws_code(exc) in ("NoSuchBucket", "404"):
            return None
        raise
    out = []
    for entry in config.get("LambdaFunctionConfigurations", []):
        if str(entry.get("Id", "")).startswith(names.notification_prefix(name)):
            rules = {r["Name"].lower(): r["Value"] for r in entry.get("Filter", {}).get("Key", {}).get("FilterRules", [])}
            out.append(f"s3://{bucket}/{rules.get('prefix', '')}*{rules.get('suffix', '')}")
    return out or None


def _schedule(aws: AwsSession, name: str) -> Optional[str]:
    try:
        rule = aws.call("events", "describe_rule", Name=names.rule_name(name))
    except CloudError as exc:
        if aws_code(exc) == "ResourceNotFoundException":
            return None
        raise
    return f"{rule.get('ScheduleExpression')} ({rule.get('State')})"


def _permissions(aws: AwsSession, name: str) -> list[str]:
    try:
        policy = json.loads(aws.call("lambda", "get_policy", FunctionName=name)["Policy"])
    except CloudError as exc:
        if aws_code(exc) == "ResourceNotFoundException":
            return []
        raise
    out = []
    for s in policy.get("Statement", []):
        principal = s.get("Principal")
        if isinstance(principal, dict):
            principal = principal.get("Service") or principal.get("AWS")
        out.append(f"{s.get('Sid')}: {s.get('Action')} by {principal}")
    return out
