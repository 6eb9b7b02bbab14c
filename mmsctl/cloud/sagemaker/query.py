"""``sagemaker list`` and ``describe``: the endpoints mmsctl deployed, and one of them in full.

``describe`` joins what SageMaker keeps in four places: the endpoint (status, its variants' current and
desired instances and weights, or their serverless memory and concurrency), its configuration (instance
type), the model (image, model data, environment), Application Auto Scaling (the range and the policy's
target), and CloudWatch (the last hour's invocations, errors and latency: :mod:`.metrics`).
"""

from __future__ import annotations

from typing import Any, Optional

from mmsctl.cloud.aws.session import AwsSession
from mmsctl.cloud.sagemaker import alarms, metrics
from mmsctl.cloud.sagemaker.deploy.run import invocations_url
from mmsctl.cloud.sagemaker.deploy.scaling import scaling_of
from mmsctl.cloud.sagemaker.resources import EndpointNotFound, arn_tags, describe, ours
from mmsctl.cloud.sagemaker.spec import check_name

__all__ = ["EndpointNotFound", "describe_endpoint", "endpoint_status", "list_endpoints", "variant_rows"]


def list_endpoints(aws: AwsSession) -> list[dict[str, Any]]:
    """Every endpoint tagged ``mmsctl:sagemaker``, with its status and dates."""
    rows = []
    for found in aws.paginate("sagemaker", "list_endpoints", "Endpoints", SortBy="Name"):
        owner = arn_tags(aws, found["EndpointArn"]).get("mmsctl:sagemaker")
        if owner != found["EndpointName"]:
            continue
        rows.append({"name": found["EndpointName"], "status": found.get("EndpointStatus"),
                     "created": str(found.get("CreationTime", "")), "modified": str(found.get("LastModifiedTime", ""))})
    return rows


def variant_rows(endpoint: dict[str, Any], config: Optional[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per production variant: instances and weights, or serverless memory and concurrency."""
    types = {v.get("VariantName"): v for v in (config or {}).get("ProductionVariants") or []}
    rows = []
    for v in endpoint.get("ProductionVariants") or []:
        declared = types.get(v.get("VariantName"), {})
        serverless = v.get("CurrentServerlessConfig") or declared.get("ServerlessConfig")
        rows.append({
            "variant": v.get("VariantName"), "model": declared.get("ModelName"),
            "instance_type": None if serverless else declared.get("InstanceType"),
            "instances": None if serverless else v.get("CurrentInstanceCount"),
            "desired_instances": None if serverless else v.get("DesiredInstanceCount"),
            "weight": v.get("CurrentWeight"),
            "serverless_memory": (serverless or {}).get("MemorySizeInMB"),
            "max_concurrency": (serverless or {}).get("MaxConcurrency")})
    return rows


def _scaling_row(aws: AwsSession, name: str) -> Optional[dict[str, Any]]:
    found = scaling_of(aws, name)
    if found is None:
        return None
    policy: dict[str, Any] = next(iter(found.get("Policies") or []), {})
    target = (policy.get("TargetTrackingScalingPolicyConfiguration") or {}).get("TargetValue")
    return {"min": found.get("MinCapacity"), "max": found.get("MaxCapacity"), "policy": policy.get("PolicyName"),
            "target_invocations_per_minute": target}


def describe_endpoint(aws: AwsSession, name: str, *, minutes: int = 60) -> dict[str, Any]:
    """Endpoint *name* in full (see the module docstring).

    Raises:
        EndpointNotFound: there is none of that name.
    """
    check_name(name)
    endpoint = describe(aws, "endpoint", name)
    if endpoint is None:
        raise EndpointNotFound(name, aws.region)
    config_name = endpoint.get("EndpointConfigName")
    config = describe(aws, "endpoint-config", config_name) if config_name else None
    rows = variant_rows(endpoint, config)
    model = describe(aws, "model", rows[0]["model"]) if rows and rows[0]["model"] else None
    container = (model or {}).get("PrimaryContainer") or {}
    return {
        "name": name, "status": endpoint.get("EndpointStatus"), "failure_reason": endpoint.get("FailureReason"),
        "arn": endpoint.get("EndpointArn"), "mmsctl": ours(arn_tags(aws, endpoint["EndpointArn"]), name),
        "url": invocations_url(aws.region, name), "config": config_name, "variants": rows,
        "image": container.get("Image"), "model_data": container.get("ModelDataUrl"),
        "environment": container.get("Environment") or {}, "role": (model or {}).get("ExecutionRoleArn"),
        "scaling": _scaling_row(aws, name), "rollback_alarms": alarms.alarms_of(aws, name),
        "last_hour": metrics.load(aws, name, minutes=minutes).to_dict(),
        "created": str(endpoint.get("CreationTime", "")), "modified": str(endpoint.get("LastModifiedTime", "")),
    }


def endpoint_status(aws: AwsSession, name: str, *, minutes: int = 5) -> dict[str, Any]:
    """What ``top`` shows of an endpoint: status, its variant's instances and scaling range, and the last
    *minutes* of load (CloudWatch's figures come a minute or more late).

    Raises:
        EndpointNotFound: there is none of that name.
    """
    endpoint = describe(aws, "endpoint", name)
    if endpoint is None:
        raise EndpointNotFound(name, aws.region)
    config_name = endpoint.get("EndpointConfigName")
    config = describe(aws, "endpoint-config", config_name) if config_name else None
    return {"name": name, "status": endpoint.get("EndpointStatus"), "url": invocations_url(aws.region, name),
            "variants": variant_rows(endpoint, config), "scaling": _scaling_row(aws, name),
            "load": metrics.load(aws, name, minutes=minutes)}
