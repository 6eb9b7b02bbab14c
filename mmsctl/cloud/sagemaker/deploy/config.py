"""The endpoint configuration: one production variant, on instances or serverless. Its name is a hash of the
variant, so an unchanged one is reused (SageMaker never edits a configuration: an endpoint moves to a new one)."""

from __future__ import annotations

from typing import Any

from mmsctl.cloud.aws.service_role import retry_while_propagating
from mmsctl.cloud.sagemaker.deploy.model import propagating
from mmsctl.cloud.sagemaker.deploy.target import Target
from mmsctl.cloud.sagemaker.resources import describe
from mmsctl.cloud.sagemaker.spec import VARIANT, DeploySpec, config_name

__all__ = ["ensure_config", "variants"]


def variants(spec: DeploySpec, model: str) -> list[dict[str, Any]]:
    """The configuration's ProductionVariants."""
    variant: dict[str, Any] = {"VariantName": VARIANT, "ModelName": model}
    if spec.serverless:
        variant["ServerlessConfig"] = {"MemorySizeInMB": spec.serverless_memory, "MaxConcurrency": spec.max_concurrency}
    else:
        variant.update(InstanceType=spec.instance_type, InitialInstanceCount=spec.count, InitialVariantWeight=1.0)
    return [variant]


def ensure_config(t: Target, production: list[dict[str, Any]]) -> str:
    """The configuration's name, created if there is none of it."""
    name = config_name(t.name, production)
    if describe(t.aws, "endpoint-config", name) is not None:
        t.note("reuse", "endpoint-config", name)
        return name
    retry_while_propagating(lambda: t.aws.call("sagemaker", "create_endpoint_config", EndpointConfigName=name,
                                               ProductionVariants=production, Tags=t.tag_list("endpoint-config")),
                            propagating=propagating(t), sleep=t.sleep)
    t.note("create", "endpoint-config", name)
    return name
