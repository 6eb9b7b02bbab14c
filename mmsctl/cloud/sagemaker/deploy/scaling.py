"""Scaling of a real-time endpoint: its one variant as an Application Auto Scaling target between ``--min`` and
``--max`` instances, with target tracking on ``SageMakerVariantInvocationsPerInstance`` (invocations per
instance per minute: ``--target-requests-per-instance`` × 60). Not asked for: both removed."""

from __future__ import annotations

from typing import Any, Optional

from mmsctl.cloud.sagemaker.deploy.target import Target
from mmsctl.cloud.sagemaker.spec import VARIANT, DeploySpec

__all__ = ["DIMENSION", "NAMESPACE", "drop_scaling", "ensure_scaling", "policy_name", "resource_id", "scaling_of",
           "set_instances"]

NAMESPACE = "sagemaker"
DIMENSION = "sagemaker:variant:DesiredInstanceCount"
METRIC = "SageMakerVariantInvocationsPerInstance"
#: Application Auto Scaling's defaults for SageMaker variants (seconds).
SCALE_IN_COOLDOWN_S = 300
SCALE_OUT_COOLDOWN_S = 60


def resource_id(endpoint: str) -> str:
    return f"endpoint/{endpoint}/variant/{VARIANT}"


def policy_name(endpoint: str) -> str:
    return f"mmsctl-sagemaker-{endpoint}-invocations"


def scaling_of(aws: Any, endpoint: str) -> Optional[dict[str, Any]]:
    """The variant's scalable target with its policies (``Policies``), or None."""
    found = aws.call("application-autoscaling", "describe_scalable_targets", ServiceNamespace=NAMESPACE,
                     ResourceIds=[resource_id(endpoint)], ScalableDimension=DIMENSION).get("ScalableTargets") or []
    if not found:
        return None
    policies = aws.call("application-autoscaling", "describe_scaling_policies", ServiceNamespace=NAMESPACE,
                        ResourceId=resource_id(endpoint), ScalableDimension=DIMENSION).get("ScalingPolicies") or []
    return {**found[0], "Policies": policies}


def drop_scaling(t: Target, current: Optional[dict[str, Any]]) -> None:
    """The variant's policies and scalable target removed (before a change SageMaker refuses under scaling)."""
    if current is None:
        return
    for found in current.get("Policies", []):
        t.aws.call("application-autoscaling", "delete_scaling_policy", PolicyName=found["PolicyName"],
                   ServiceNamespace=NAMESPACE, ResourceId=resource_id(t.name), ScalableDimension=DIMENSION)
    t.aws.call("application-autoscaling", "deregister_scalable_target", ServiceNamespace=NAMESPACE,
               ResourceId=resource_id(t.name), ScalableDimension=DIMENSION)
    t.note("delete", "scaling", resource_id(t.name))


def _policy_config(spec: DeploySpec) -> dict[str, Any]:
    return {"TargetValue": round(spec.target_rps * 60, 3),
            "PredefinedMetricSpecification": {"PredefinedMetricType": METRIC},
            "ScaleInCooldown": SCALE_IN_COOLDOWN_S, "ScaleOutCooldown": SCALE_OUT_COOLDOWN_S}


def ensure_scaling(t: Target, spec: DeploySpec, current: Optional[dict[str, Any]]) -> None:
    """Scaling as asked (after the endpoint is InService: the variant must exist), or none."""
    if spec.serverless or not spec.scaled:
        drop_scaling(t, current)
        return
    low = spec.count if spec.min_count is None else spec.min_count
    wanted = _policy_config(spec)
    same_target = current is not None and (current.get("MinCapacity"), current.get("MaxCapacity")) == (
        low, spec.max_count)
    policies = (current or {}).get("Policies", [])
    same_policy = any(p.get("PolicyName") == policy_name(t.name) and _same(p, wanted) for p in policies)
    if same_target and same_policy:
        t.note("reuse", "scaling", f"{resource_id(t.name)} {low}-{spec.max_count}")
        return
    # Tags go with the target's creation only: AWS refuses them on a target that exists (TagResource's job),
    # and the target mmsctl registered carries them from then on.
    tagged: dict[str, Any] = {"Tags": t.tags("scaling")} if current is None else {}
    t.aws.call("application-autoscaling", "register_scalable_target", ServiceNamespace=NAMESPACE,
               ResourceId=resource_id(t.name), ScalableDimension=DIMENSION, MinCapacity=low,
               MaxCapacity=spec.max_count, **tagged)
    t.aws.call("application-autoscaling", "put_scaling_policy", PolicyName=policy_name(t.name),
               ServiceNamespace=NAMESPACE, ResourceId=resource_id(t.name), ScalableDimension=DIMENSION,
               PolicyType="TargetTrackingScaling", TargetTrackingScalingPolicyConfiguration=wanted)
    t.note("update" if current else "create", "scaling",
           f"{resource_id(t.name)} {low}-{spec.max_count}, {wanted['TargetValue']:g} invocations/min per instance")


def _same(found: dict[str, Any], wanted: dict[str, Any]) -> bool:
    config = found.get("TargetTrackingScalingPolicyConfiguration") or {}
    return (config.get("TargetValue"), (config.get("PredefinedMetricSpecification") or {}).get(
        "PredefinedMetricType")) == (wanted["TargetValue"], METRIC)


def set_instances(aws: Any, endpoint: str, count: int) -> None:
    """The variant's desired instance count (UpdateEndpointWeightsAndCapacities), within the scaling range where
    there is one (target tracking may move it again).

    Raises:
        UsageError: a count out of the range, or a serverless endpoint (no instances).
    """
    from mmsctl.cloud.sagemaker.resources import describe
    from mmsctl.cloud.sagemaker.spec import MAX_INSTANCES
    from mmsctl.errors import UsageError

    found = describe(aws, "endpoint", endpoint) or {}
    variant: dict[str, Any] = next(iter(found.get("ProductionVariants") or []), {})
    if variant.get("CurrentServerlessConfig"):
        raise UsageError(f"{endpoint} is serverless: it has no instances to scale")
    current = scaling_of(aws, endpoint)
    low, high = (current["MinCapacity"], current["MaxCapacity"]) if current else (1, MAX_INSTANCES)
    if not low <= count <= high:
        raise UsageError(f"{endpoint} scales between {low} and {high} instances, not {count}")
    aws.call("sagemaker", "update_endpoint_weights_and_capacities", EndpointName=endpoint,
             DesiredWeightsAndCapacities=[{"VariantName": VARIANT, "DesiredInstanceCount": count}])
