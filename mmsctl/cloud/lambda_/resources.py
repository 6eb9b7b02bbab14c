"""Reading and tagging the resources of one Lambda deployment, service by service.

Six services keep tags in five shapes; this module hides that. A resource is *ours*
when it carries ``mmsctl:lambda=NAME``: only ours are ever changed in place or
deleted; anything else with the same name is reused as it is, or refused.
"""

from __future__ import annotations

import re
import time
from typing import Any, Callable, Mapping, Optional

from mmsctl.cloud.aws import tags
from mmsctl.cloud.aws.errors import aws_code
from mmsctl.cloud.aws.session import AwsSession
from mmsctl.errors import CloudError

__all__ = [
    "NotOurAccount",
    "bucket_tags",
    "function_or_none",
    "lambda_tags",
    "ours",
    "tag_value",
    "wait_function_ready",
]

_TAG_VALUE = re.compile(r"[^\w .:/=+\-@]")


def tag_value(text: str) -> str:
    """A value every service accepts as a tag (Lambda's character set is the narrowest), ≤ 256 characters."""
    return _TAG_VALUE.sub("_", text)[:256]


def lambda_tags(name: str, component: str, extra: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """The tags of one resource of deployment *name*."""
    values = {tags.LAMBDA: name, **{k: tag_value(v) for k, v in (extra or {}).items()}}
    return tags.base_tags(component, f"mmsctl-lambda-{name}", values)


def ours(found: Optional[Mapping[str, str]], name: str) -> bool:
    return bool(found) and found.get(tags.LAMBDA) == name  # type: ignore[union-attr]


class NotOurAccount(CloudError):
    """A bucket of that name exists in another account (bucket names are global)."""

    reference = "lambda-bucket-other-account"


def bucket_tags(aws: AwsSession, bucket: str) -> Optional[dict[str, str]]:
    """The bucket's tags ({} if none); None if the bucket does not exist.

    Both calls name this account as the owner (``ExpectedBucketOwner``): S3 answers 403 for a bucket
    of another account even where that account lets this one in, so a bucket that is not the
    account's is never taken for one of its own.

    Raises:
        NotOurAccount: the bucket belongs to another account (403).
        CloudError: S3 failed.
    """
    owner: dict[str, Any] = {"ExpectedBucketOwner": aws.account_id()}
    try:
        aws.call("s3", "head_bucket", Bucket=bucket, **owner)
    except CloudError as exc:
        code = aws_code(exc)
        if code in ("404", "NoSuchBucket", "NotFound"):
            return None
        if code in ("403", "AccessDenied"):
            raise NotOurAccount(f"bucket {bucket} exists and is not this account's (S3 answered 403)",
                                hint="bucket names are global: choose another name") from exc
        raise
    try:
        return tags.as_dict(aws.call("s3", "get_bucket_tagging", Bucket=bucket, **owner).get("TagSet"))
    except CloudError as exc:
        if aws_code(exc) == "NoSuchTagSet":
            return {}
        raise


def function_or_none(aws: AwsSession, name: str) -> Optional[dict[str, Any]]:
    """``GetFunction``'s answer (Configuration, Code, Tags), or None if there is no such function."""
    try:
        return aws.call("lambda", "get_function", FunctionName=name)
    except CloudError as exc:
        if aws_code(exc) == "ResourceNotFoundException":
            return None
        raise


def wait_function_ready(aws: AwsSession, name: str, *, sleep: Callable[[float], None] = time.sleep,
                        timeout: float = 300.0) -> dict[str, Any]:
    """Poll until the function is Active and no update is in progress (Lambda refuses a second change until then).

    Raises:
        CloudError: the function failed, or did not settle within *timeout* seconds.
    """
    delay, waited = 1.0, 0.0
    while True:
        config = aws.call("lambda", "get_function_configuration", FunctionName=name)
        state, update = config.get("State"), config.get("LastUpdateStatus")
        if state == "Failed" or update == "Failed":
            reason = config.get("StateReason") or config.get("LastUpdateStatusReason") or "no reason given"
            raise CloudError(f"function {name} failed: {reason}",
                             hint="an image Lambda cannot pull or start shows here; see `mmsctl lambda logs`")
        if state in (None, "Active", "Inactive") and update in (None, "Successful"):
            return config
        if waited >= timeout:
            raise CloudError(f"function {name} is still {state}/{update} after {timeout:g}s")
        sleep(delay)
        waited += delay
        delay = min(delay * 1.5, 10.0)
