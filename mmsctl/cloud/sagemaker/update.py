"""``sagemaker update NAME --model …``: the endpoint moved to a new model by SageMaker's own blue/green.

A new model (the new data, the image the endpoint runs unless ``--image`` says another) and a new endpoint
configuration with the same variant, then UpdateEndpoint keeping the variant's properties (the instance count
scaling has reached: a model change is the one change SageMaker allows under auto scaling). With
``--canary PERCENT`` the update is a deployment guardrail: that share of the new fleet takes traffic first for
``--bake`` seconds, watched by the endpoint's rollback alarms (:mod:`.alarms`), then the rest; an alarm in
ALARM rolls it back. Refused before any change: an endpoint that is not InService (SageMaker takes one change
at a time), and a canary on a serverless endpoint or on Inf1 instances (SageMaker's guardrails do not run there).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from mmsctl.cloud.aws.session import AwsSession
from mmsctl.cloud.sagemaker import alarms
from mmsctl.cloud.sagemaker.deploy.config import ensure_config
from mmsctl.cloud.sagemaker.deploy.endpoint import WAIT_TIMEOUT_S, EndpointBusy, check_in_service, ensure_endpoint
from mmsctl.cloud.sagemaker.deploy.image import pin_image
from mmsctl.cloud.sagemaker.deploy.model import container, ensure_model
from mmsctl.cloud.sagemaker.deploy.model_data import check_object, ensure_model_data
from mmsctl.cloud.sagemaker.deploy.retire import retire
from mmsctl.cloud.sagemaker.deploy.role import ensure_role
from mmsctl.cloud.sagemaker.deploy.run import DeployIncomplete, DeployResult, invocations_url, role_scope
from mmsctl.cloud.sagemaker.deploy.sources import Running, running
from mmsctl.cloud.sagemaker.deploy.target import Target
from mmsctl.cloud.sagemaker.model_data import ModelData
from mmsctl.cloud.sagemaker.resources import EndpointNotFound, arn_tags, describe, ours
from mmsctl.cloud.sagemaker.spec import check_name
from mmsctl.errors import CloudError, MmsError, UsageError

__all__ = ["EndpointBusy", "UpdateSpec", "canary_deployment", "update"]

#: The variant properties a new configuration carries over (instances or serverless, and the weight).
_KEPT = ("VariantName", "InstanceType", "InitialInstanceCount", "InitialVariantWeight", "ServerlessConfig")
MAX_BAKE_S = 3600
#: How long a canary is watched when no bake time is given.
DEFAULT_BAKE_S = 600


@dataclass
class UpdateSpec:
    """One update as asked for."""

    name: str
    model: Optional[str]
    image: Optional[str] = None
    canary_percent: Optional[int] = None
    #: None: :data:`DEFAULT_BAKE_S` with a canary; given without one, refused (nothing would be baked).
    bake_s: Optional[int] = None
    max_latency_ms: Optional[float] = None

    @property
    def bake(self) -> int:
        return DEFAULT_BAKE_S if self.bake_s is None else self.bake_s

    def check(self) -> "UpdateSpec":
        check_name(self.name)
        if not self.model and not self.image:
            raise UsageError("name the new model (or a new image)", params=("model", "image"))
        if self.canary_percent is not None and not 1 <= self.canary_percent <= 50:
            raise UsageError(f"canary {self.canary_percent}%: 1 to 50 percent of the new fleet (SageMaker's canary "
                             "is at most half of it)", param="canary_percent")
        if self.bake_s is not None and self.canary_percent is None:
            raise UsageError("a bake time is how long a canary is watched: it goes with a canary",
                             params=("bake_s", "canary_percent"))
        if not 0 <= self.bake <= MAX_BAKE_S:
            raise UsageError(f"bake must be from 0 to {MAX_BAKE_S} seconds", param="bake_s")
        if self.canary_percent is None and self.max_latency_ms is not None:
            raise UsageError("a latency ceiling sets a rollback alarm: it goes with a canary",
                             params=("max_latency_ms", "canary_percent"))
        if self.max_latency_ms is not None and not 0 < self.max_latency_ms <= 60_000:
            raise UsageError("the latency ceiling must be over 0 and at most 60000 ms", param="max_latency_ms")
        return self


def canary_deployment(percent: int, bake_s: int, alarm_names: tuple[str, ...]) -> dict[str, Any]:
    """UpdateEndpoint's DeploymentConfig: blue/green with a canary of *percent*, baked *bake_s*, alarms watching."""
    return {"BlueGreenUpdatePolicy": {
        "TrafficRoutingConfiguration": {"Type": "CANARY", "WaitIntervalInSeconds": bake_s,
                                        "CanarySize": {"Type": "CAPACITY_PERCENT", "Value": percent}},
        "TerminationWaitInSeconds": 0,
        "MaximumExecutionTimeoutInSeconds": max(600, min(28800, 2 * bake_s + 3600))},
        "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": a} for a in alarm_names]}}


def _current(t: Target) -> dict[str, Any]:
    """The endpoint, ours and InService, or a refusal."""
    previous = describe(t.aws, "endpoint", t.name)
    if previous is None:
        raise EndpointNotFound(t.name, t.aws.region)
    if not ours(arn_tags(t.aws, previous["EndpointArn"]), t.name):
        raise CloudError(f"endpoint {t.name} was not deployed by mmsctl; refusing to change it")
    check_in_service(t, previous)
    return previous


def update(aws: AwsSession, spec: UpdateSpec, *, model_data: Optional[ModelData] = None,
           sleep: Callable[[float], None] = time.sleep, progress: Optional[Callable[[str], None]] = None,
           wait_s: Optional[float] = WAIT_TIMEOUT_S) -> DeployResult:
    """Move endpoint *spec.name* to the new model (see the module docstring).

    Raises:
        EndpointNotFound: no such endpoint. EndpointBusy: it is not InService.
        RolledBack: the update did not take. DeployIncomplete: a step failed after others made something.
    """
    t = Target(aws, spec.name, sleep=sleep, progress=progress)
    try:
        return _update(t, spec, model_data, wait_s)
    except MmsError as exc:
        if not t.made() or aws.dry_run or isinstance(exc, (EndpointBusy, EndpointNotFound)):
            raise
        raise DeployIncomplete(spec.name, exc, t.made()) from exc


def _check_canary(variants: list[dict[str, Any]]) -> None:
    """Refuse a canary SageMaker would not run: on a serverless variant (no instances to take a share of), or on
    Inf1 instances (SageMaker then shifts all traffic at once, with no baking and no rollback)."""
    if any("ServerlessConfig" in v for v in variants):
        raise UsageError("deployment guardrails (a canary) are for endpoints on instances, not serverless ones",
                         param="canary_percent")
    inf1 = sorted({str(v["InstanceType"]) for v in variants if str(v.get("InstanceType", "")).startswith("ml.inf1.")})
    if inf1:
        raise UsageError(f"deployment guardrails (a canary) do not run on Inf1 instances ({', '.join(inf1)}): "
                         "SageMaker would shift all traffic at once, with no baking and no rollback",
                         param="canary_percent")


def _update(t: Target, spec: UpdateSpec, data: Optional[ModelData], wait_s: Optional[float]) -> DeployResult:
    previous = _current(t)
    old = running(t.aws, previous.get("EndpointConfigName"))
    if spec.canary_percent is not None:
        _check_canary(old.variants)
    first = describe(t.aws, "model", old.models[0]) if old.models else None
    primary = (first or {}).get("PrimaryContainer") or {}
    image, parts = pin_image(t, spec.image or str(primary.get("Image", "")))
    model_uri = primary.get("ModelDataUrl")
    if spec.model and spec.model.startswith("s3://"):
        model_uri = check_object(t, spec.model)
    elif data is not None:
        model_uri = ensure_model_data(t, data)
    watch = alarms.ensure_alarms(t.aws, t.name, spec.max_latency_ms) if spec.canary_percent is not None else ()
    new = Running(repositories=[f"{parts.account}/{parts.repository}"], objects=[model_uri] if model_uri else [])
    role_arn = ensure_role(t, role_scope(t, old, new, alarms=watch))
    model = ensure_model(t, container(image, model_uri, dict(primary.get("Environment") or {})), role_arn)
    production = [{**{k: v[k] for k in _KEPT if k in v}, "ModelName": model} for v in old.variants]
    config = ensure_config(t, production)
    new.config, new.models = config, [model]
    deployment = canary_deployment(spec.canary_percent, spec.bake, watch) if spec.canary_percent else None
    ensure_endpoint(t, config, previous, retain=True, deployment=deployment, wait_s=wait_s)
    if wait_s is not None and not t.aws.dry_run and config != old.config:
        retire(t, old, new)
        ensure_role(t, role_scope(t, new, alarms=tuple(alarms.alarms_of(t.aws, t.name))))
    return DeployResult(spec.name, t.aws.region, t.arn("endpoint", spec.name),
                        invocations_url(t.aws.region, spec.name), image, model_uri, model, config, role_arn,
                        status=None if t.aws.dry_run or wait_s is None else "InService", changes=t.changes)
