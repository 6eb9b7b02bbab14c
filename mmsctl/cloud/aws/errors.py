"""The AWS failures users hit, each as one line, and the one place botocore errors are translated.

    CloudError (mmsctl.errors)          exit 9
    ├── NoCredentials                   no key, profile or role found
    ├── AccessDenied                    AccessDenied / UnauthorizedOperation
    ├── QuotaExceeded                   InstanceLimitExceeded / VcpuLimitExceeded / *LimitExceeded
    ├── UnknownRegion                   a region name AWS does not know
    │   └── NoRegion                        no region at all
    ├── UnsupportedRegion               Elastic Inference never existed there
    ├── ResourceNotFound                an instance/AMI/parameter that is not there
    └── ElasticInferenceRetired         EC2 refused an Elastic Inference accelerator or endpoint

    ContainerToolError (MmsError)       exit 1   no docker/podman, or its daemon is not running

This module imports no botocore: :func:`translate` is handed botocore's exception types by the
one door to boto3 (:func:`mmsctl.cloud.aws.session.translate_error`), so it stays light.
"""

from __future__ import annotations

from types import ModuleType
from typing import Optional

from mmsctl.errors import CloudError, MmsError, causes

__all__ = [
    "AccessDenied",
    "ContainerToolError",
    "ElasticInferenceRetired",
    "NoCredentials",
    "NoRegion",
    "QuotaExceeded",
    "ResourceNotFound",
    "UnknownRegion",
    "UnsupportedRegion",
    "aws_code",
    "translate",
]


class NoCredentials(CloudError):
    """boto3's credential chain found nothing."""

    reference = "cloud-no-credentials"


class AccessDenied(CloudError):
    """The credentials are valid but the policy does not allow the call."""

    reference = "cloud-access-denied"


class QuotaExceeded(CloudError):
    """An EC2 or IAM limit stops the call."""

    reference = "cloud-quota"


class UnknownRegion(CloudError):
    """A region name AWS does not know (or none configured)."""

    reference = "cloud-region"


class NoRegion(UnknownRegion):
    """No region configured at all (the CLI says how to give one)."""

    reference = "cloud-no-region"


class ElasticInferenceRetired(CloudError):
    """AWS refused an Elastic Inference accelerator or endpoint: the service was retired in April 2024."""

    reference = "cloud-ei-retired"


class UnsupportedRegion(CloudError):
    """A real region where the asked-for service never existed."""

    reference = "cloud-unsupported-region"


class ResourceNotFound(CloudError):
    """An instance, AMI or parameter that is not there."""

    reference = "cloud-not-found"


class ContainerToolError(MmsError):
    """Building or pushing an image needs docker or podman, and a running daemon."""

    reference = "container-tool"


_ACCESS = ("AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnrecognizedClientException",
           "InvalidClientTokenId", "AuthFailure", "SignatureDoesNotMatch", "ExpiredToken", "ExpiredTokenException")
_QUOTA = ("InstanceLimitExceeded", "VcpuLimitExceeded", "LimitExceeded", "VpcEndpointLimitExceeded",
          "SecurityGroupLimitExceeded", "RulesPerSecurityGroupLimitExceeded", "MaxSpotInstanceCountExceeded",
          "InsufficientInstanceCapacity")
_NOT_FOUND_SUFFIXES = (".NotFound", ".Malformed", "NotFound", "ParameterNotFound", "NoSuchEntity")


def _call_name(service: str, operation: str) -> str:
    camel = "".join(part.capitalize() for part in operation.split("_"))
    return f"{service} {camel}" if service else camel


def aws_code(exc: BaseException) -> str:
    """AWS's error code (``NoSuchBucket``, ``404``…) behind a translated error, or ''."""
    for cause in causes(exc):
        response = getattr(cause, "response", None)
        if isinstance(response, dict):
            return str((response.get("Error") or {}).get("Code", ""))
    return ""


def translate(exc: BaseException, bce: ModuleType, *, service: str = "", operation: str = "") -> Optional[CloudError]:
    """The :class:`CloudError` for a botocore exception, or None if *exc* is not one of botocore's.

    Callers go through :func:`mmsctl.cloud.aws.session.translate_error`, which passes *bce*.

    Args:
        exc: what a boto3 call raised.
        bce: ``botocore.exceptions`` (given by the session module, the only one importing botocore).
        service: the service name (``ec2``), for the message.
        operation: the snake-case operation (``run_instances``), for the message.
    """
    call = _call_name(service, operation)
    if isinstance(exc, (bce.NoCredentialsError, bce.PartialCredentialsError)):
        return NoCredentials(
            "no AWS credentials found (run `aws configure` or set AWS_PROFILE)",
            hint="mmsctl uses boto3's usual chain: env vars, ~/.aws/credentials, SSO, instance role",
        )
    if isinstance(exc, bce.ProfileNotFound):
        return NoCredentials(f"AWS profile not found: {exc.kwargs.get('profile', '')}",
                             hint="list profiles with `aws configure list-profiles`")
    if isinstance(exc, bce.NoRegionError):
        return NoRegion("no AWS region configured")
    if isinstance(exc, (bce.SSOTokenLoadError, bce.UnauthorizedSSOTokenError, bce.TokenRetrievalError)):
        return NoCredentials(f"AWS SSO session expired or missing: {exc}", hint="run `aws sso login`")
    if isinstance(exc, bce.EndpointConnectionError):
        return CloudError(f"cannot reach AWS for {call}: {exc.kwargs.get('endpoint_url', exc)}",
                          hint="check the region name and your network or proxy settings")
    if isinstance(exc, bce.ParamValidationError):
        return CloudError(f"{call}: invalid request: {exc}")
    if isinstance(exc, bce.ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", "Unknown"))
        message = str(error.get("Message", "")).strip() or code
        if code in _ACCESS:
            return AccessDenied(f"access denied: {call}: {message}",
                                hint="the IAM policy of these credentials must allow this action")
        if code in _QUOTA or code.endswith("LimitExceeded"):
            return QuotaExceeded(f"quota exceeded: {call}: {message}",
                                 hint="ask for a higher limit in the Service Quotas console")
        if code.endswith(_NOT_FOUND_SUFFIXES):
            return ResourceNotFound(f"{call}: {message}")
        return CloudError(f"{call} failed: {code}: {message}")
    if isinstance(exc, bce.BotoCoreError) or type(exc).__module__.startswith("botocore."):
        # e.g. ResponseParserError: the endpoint answered with something that is not AWS's format.
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return CloudError(f"{call} failed: {first}")
    return None
