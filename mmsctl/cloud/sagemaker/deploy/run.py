"""``deploy()``: the steps of :mod:`mmsctl.cloud.sagemaker.deploy` in order, and what they made.

First the reads that can refuse the deploy (an endpoint of that name that is not ours, the image not in ECR
or in another region, model data of yours that is missing or elsewhere), so a refusal changes nothing. Then:
the model data, the role (it may also read what the endpoint runs now, while it moves), the log group, the
model, the configuration, the endpoint (created, or moved to the new configuration) and the wait for
InService, then what the move left behind, the role narrowed to what the endpoint runs, and scaling.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from mmsctl.cloud.aws.changes import StoppedPartWay
from mmsctl.cloud.aws.session import AwsSession, dns_suffix
from mmsctl.cloud.sagemaker import contract, policy
from mmsctl.cloud.sagemaker.deploy.config import ensure_config, variants
from mmsctl.cloud.sagemaker.deploy.endpoint import WAIT_TIMEOUT_S, check_in_service, ensure_endpoint
from mmsctl.cloud.sagemaker.deploy.image import pin_image
from mmsctl.cloud.sagemaker.deploy.log_group import ensure_log_group
from mmsctl.cloud.sagemaker.deploy.model import container, ensure_model
from mmsctl.cloud.sagemaker.deploy.model_data import check_object, ensure_model_data
from mmsctl.cloud.sagemaker.deploy.retire import retire
from mmsctl.cloud.sagemaker.deploy.role import ensure_role
from mmsctl.cloud.sagemaker.deploy.scaling import drop_scaling, ensure_scaling, scaling_of
from mmsctl.cloud.sagemaker.deploy.sources import Running, running
from mmsctl.cloud.sagemaker.deploy.target import Change, Target
from mmsctl.cloud.sagemaker.model_data import ModelData
from mmsctl.cloud.sagemaker.resources import arn_tags, describe, ours
from mmsctl.cloud.sagemaker.spec import DeploySpec
from mmsctl.errors import CloudError, MmsError

__all__ = ["DeployIncomplete", "DeployResult", "deploy", "invocations_url", "role_scope"]


class DeployIncomplete(StoppedPartWay):
    """A endpoint's deploy that stopped part way."""

    reference = "sagemaker-deploy-incomplete"


@dataclass
class DeployResult:
    """What deploy made or would make (dry run), and where to reach the endpoint."""

    name: str
    region: str
    endpoint_arn: str
    url: str
    image: str
    model_data: Optional[str]
    model: str
    config: str
    role_arn: str
    status: Optional[str] = None
    changes: list[Change] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "region": self.region, "endpoint_arn": self.endpoint_arn, "url": self.url,
                "image": self.image, "model_data": self.model_data, "model": self.model, "config": self.config,
                "role_arn": self.role_arn, "status": self.status, "changes": [c.to_dict() for c in self.changes],
                "warnings": self.warnings}


def invocations_url(region: str, endpoint: str) -> str:
    """The runtime API's URL for the endpoint (SigV4, service ``sagemaker``)."""
    return f"https://runtime.sagemaker.{region}.{dns_suffix(region)}/endpoints/{endpoint}/invocations"


def role_scope(t: Target, *sources: Running, alarms: tuple[str, ...] = ()) -> policy.RoleScope:
    """What the role may touch: every image and model data object of *sources*, and *alarms*."""
    repos = sorted({r for s in sources for r in s.repositories})
    objects = sorted({o for s in sources for o in s.objects})
    return policy.RoleScope(t.partition, t.aws.region, t.account, t.name, tuple(repos), tuple(objects), alarms)


def _environment(spec: DeploySpec) -> dict[str, str]:
    environment = {}
    if spec.workers is not None:
        environment[contract.ENV_WORKERS] = str(spec.workers)
    if spec.timeout_s is not None:
        environment[contract.ENV_TIMEOUT] = str(spec.timeout_s)
    return environment


def deploy(aws: AwsSession, spec: DeploySpec, *, model_data: Optional[ModelData] = None,
           sleep: Callable[[float], None] = time.sleep, progress: Optional[Callable[[str], None]] = None,
           wait_s: Optional[float] = WAIT_TIMEOUT_S) -> DeployResult:
    """Create or update everything endpoint *spec.name* needs (see the module docstring).

    Args:
        model_data: the packed model (:func:`mmsctl.cloud.sagemaker.model_data.pack`), unless the model is an
            ``s3://`` object or baked into the image.
        progress: told each status of the endpoint while it is waited for.
        wait_s: how long to wait for InService (None: not at all).

    Raises:
        CloudError: AWS refused a call, or a resource of that name exists and is not ours.
        DeployIncomplete: a step failed after others made something.
    """
    t = Target(aws, spec.name, sleep=sleep, progress=progress)
    try:
        return _deploy(t, spec, model_data, wait_s)
    except MmsError as exc:
        if not t.made() or aws.dry_run:
            raise
        raise DeployIncomplete(spec.name, exc, t.made()) from exc


def _deploy(t: Target, spec: DeploySpec, data: Optional[ModelData], wait_s: Optional[float]) -> DeployResult:
    aws = t.aws
    previous = describe(aws, "endpoint", spec.name)
    if previous is not None and not ours(arn_tags(aws, previous["EndpointArn"]), spec.name):
        raise CloudError(f"endpoint {spec.name} exists and was not deployed by mmsctl (no mmsctl:sagemaker="
                         f"{spec.name} tag); refusing to change it", hint="choose another NAME")
    check_in_service(t, previous)
    image, parts = pin_image(t, spec.image)
    model_uri = check_object(t, spec.model) if spec.model and spec.model.startswith("s3://") else None
    old = running(aws, previous.get("EndpointConfigName") if previous else None)
    scaling = scaling_of(aws, spec.name) if previous is not None else None
    if data is not None:
        model_uri = ensure_model_data(t, data)
    new = Running(repositories=[f"{parts.account}/{parts.repository}"], objects=[model_uri] if model_uri else [])
    role_arn = ensure_role(t, role_scope(t, old, new))
    ensure_log_group(t)
    model = ensure_model(t, container(image, model_uri, _environment(spec)), role_arn)
    production = variants(spec, model)
    config = ensure_config(t, production)
    new.config, new.models = config, [model]
    moving = previous is not None and previous.get("EndpointConfigName") != config
    if moving and scaling is not None and (spec.serverless or any(
            v.get("InstanceType") != spec.instance_type for v in old.variants)):
        drop_scaling(t, scaling)  # SageMaker refuses a new instance type (or none: serverless) under scaling
        scaling = None
    ensure_endpoint(t, config, previous, wait_s=wait_s)
    if moving and wait_s is not None and not aws.dry_run:
        retire(t, old, new)
        ensure_role(t, role_scope(t, new))
    if wait_s is not None:
        ensure_scaling(t, spec, scaling)
    return DeployResult(spec.name, aws.region, t.arn("endpoint", spec.name), invocations_url(aws.region, spec.name),
                        image, model_uri, model, config, role_arn,
                        status=None if aws.dry_run or wait_s is None else "InService", changes=t.changes,
                        warnings=list(spec.warnings))
