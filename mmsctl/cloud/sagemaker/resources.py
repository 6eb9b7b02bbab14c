"""Reading and tagging the resources of one SageMaker endpoint.

A resource is *ours* when it carries ``mmsctl:sagemaker=NAME``: only ours are ever changed or deleted.
SageMaker says "not there" as ``ValidationException: Could not find endpoint "ARN".`` (model, endpoint
configuration likewise), not with a code of its own; :func:`missing` reads that once for every caller.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from mmsctl.cloud.aws import tags
from mmsctl.cloud.aws.errors import ResourceNotFound, aws_code
from mmsctl.cloud.aws.session import AwsSession
from mmsctl.errors import CloudError, NotFoundError

__all__ = ["EndpointNotFound", "arn_tags", "delete", "describe", "missing", "ours", "sagemaker_tags"]

#: What each kind is described with, and the key of its name.
_DESCRIBE = {"endpoint": ("describe_endpoint", "EndpointName"),
             "endpoint-config": ("describe_endpoint_config", "EndpointConfigName"),
             "model": ("describe_model", "ModelName")}


class EndpointNotFound(NotFoundError):
    """No endpoint of that name (mmsctl's or not) in the region."""

    reference = "sagemaker-endpoint-not-found"

    def __init__(self, endpoint: str, region: Optional[str]) -> None:
        super().__init__(f"no endpoint {endpoint} in {region}")
        self.endpoint = endpoint


def sagemaker_tags(name: str, component: str, extra: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """The tags of one resource of endpoint *name*."""
    return tags.base_tags(component, f"mmsctl-sagemaker-{name}", {tags.SAGEMAKER: name, **(extra or {})})


def ours(found: Optional[Mapping[str, str]], name: str) -> bool:
    return bool(found) and found.get(tags.SAGEMAKER) == name  # type: ignore[union-attr]


def missing(exc: BaseException) -> bool:
    """Whether *exc* is SageMaker's "not there" (or the answer of a dry run that looks nothing up)."""
    message = getattr(exc, "message", str(exc))
    return isinstance(exc, ResourceNotFound) or (aws_code(exc) == "ValidationException" and "Could not find" in message)


def describe(aws: AwsSession, kind: str, name: str) -> Optional[dict[str, Any]]:
    """The description of endpoint, endpoint-config or model *name*, or None when there is none."""
    operation, key = _DESCRIBE[kind]
    params: dict[str, Any] = {key: name}
    try:
        return aws.call("sagemaker", operation, **params)
    except CloudError as exc:
        if missing(exc):
            return None
        raise


def delete(aws: AwsSession, kind: str, name: str) -> None:
    """Delete endpoint-config or model *name*; one already gone is no error."""
    operation, key = {"endpoint-config": ("delete_endpoint_config", "EndpointConfigName"),
                      "model": ("delete_model", "ModelName")}[kind]
    params: dict[str, Any] = {key: name}
    try:
        aws.call("sagemaker", operation, **params)
    except CloudError as exc:
        if not missing(exc):
            raise


def arn_tags(aws: AwsSession, arn: str) -> dict[str, str]:
    """A SageMaker resource's tags ({} in a dry run that looks nothing up)."""
    if aws.unlooked is not None:
        return {}
    return tags.as_dict(aws.paginate("sagemaker", "list_tags", "Tags", ResourceArn=arn))
