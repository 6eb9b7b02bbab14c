"""``deploy()``: the steps of :mod:`mmsctl.cloud.lambda_.deploy` in order, and what they made.

First the reads that can refuse the deploy (the image is in ECR, no notification of someone
else's on the input bucket overlaps ours), so a refusal changes nothing. Then, in order: the ECR repository (with a pull policy for this function) and the image, the model
bucket holding the archive, the input and output buckets, the dead-letter queue, the role, the log
group, the function, its alias (provisioned concurrency), its reserved concurrency and asynchronous
invocation settings, its URL, the S3 trigger, the keep-warm
schedule, and last the permissions no step kept are dropped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from mmsctl.cloud.aws import tags
from mmsctl.cloud.aws.changes import StoppedPartWay
from mmsctl.cloud.aws.session import AwsSession
from mmsctl.cloud.lambda_ import env, policy
from mmsctl.cloud.lambda_.deploy.alias import current_alias, ensure_provisioned
from mmsctl.cloud.lambda_.deploy.asynchronous import (
    ensure_async_config,
    ensure_concurrency,
    ensure_failure_queue,
    failure_arn,
)
from mmsctl.cloud.lambda_.deploy.buckets import ensure_bucket
from mmsctl.cloud.lambda_.deploy.function import ensure_function
from mmsctl.cloud.lambda_.deploy.image import ensure_image, find_image
from mmsctl.cloud.lambda_.deploy.log_group import ensure_log_group
from mmsctl.cloud.lambda_.deploy.model import ensure_model
from mmsctl.cloud.lambda_.deploy.permissions import Permissions
from mmsctl.cloud.lambda_.deploy.role import ensure_role
from mmsctl.cloud.lambda_.deploy.schedule import ensure_schedule
from mmsctl.cloud.lambda_.deploy.target import Change, Target
from mmsctl.cloud.lambda_.deploy.triggers import check_no_overlap, ensure_trigger
from mmsctl.cloud.lambda_.deploy.url import ensure_url
from mmsctl.cloud.lambda_.resources import function_or_none, ours
from mmsctl.cloud.lambda_.spec import DeploySpec
from mmsctl.errors import CloudError, MmsError

__all__ = ["DeployIncomplete", "DeployResult", "deploy"]


class DeployIncomplete(StoppedPartWay):
    """A function's deploy that stopped part way."""

    reference = "lambda-deploy-incomplete"


@dataclass
class DeployResult:
    """What deploy made or would make (dry run), and where to reach the function."""

    name: str
    region: str
    function_arn: str
    image: str
    role_arn: str
    model: Optional[str]
    model_version: Optional[str]
    url: Optional[str] = None
    url_auth: Optional[str] = None
    schedule: Optional[str] = None
    provisioned: Optional[int] = None
    input: Optional[str] = None
    output: Optional[str] = None
    changes: list[Change] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "region": self.region, "function_arn": self.function_arn, "image": self.image,
            "role_arn": self.role_arn, "model": self.model, "model_version": self.model_version,
            "url": self.url, "url_auth": self.url_auth, "schedule": self.schedule, "provisioned": self.provisioned,
            "input": self.input, "output": self.output, "changes": [c.to_dict() for c in self.changes],
            "warnings": self.warnings,
        }


def _scope(t: Target, model_uri: Optional[str], model_version: Optional[str],
           failure_arn: Optional[str]) -> policy.RoleScope:
    """What the role may touch: the model object, the input prefix, the output prefix."""
    spec = t.spec
    where = env.parse_s3_uri(model_uri) if model_uri else None
    return policy.RoleScope(
        t.partition, t.aws.region, t.account, spec.name,
        model_bucket=where.bucket if where else None, model_key=where.key if where else None,
        model_versioned=bool(model_version), input_bucket=spec.input_bucket, input_prefix=spec.input_prefix,
        output_bucket=spec.output_bucket, output_prefix=spec.output_prefix, failure_arn=failure_arn)


def _variables(spec: DeploySpec, model_uri: Optional[str], model_version: Optional[str],
               account: str) -> dict[str, str]:
    """The function's ``MMSCTL_LAMBDA_*`` environment (the contract in :mod:`mmsctl.cloud.lambda_.env`)."""
    variables: dict[str, str] = {}
    if model_uri:
        variables[env.ENV_MODEL] = model_uri
        if model_version:
            variables[env.ENV_MODEL_VERSION] = model_version
    if spec.fetch_allow:
        variables[env.ENV_FETCH_ALLOW] = spec.fetch_allow
    if spec.input_bucket and spec.output_bucket:
        variables.update({env.ENV_INPUT_BUCKET: spec.input_bucket, env.ENV_OUTPUT_BUCKET: spec.output_bucket,
                          env.ENV_BUCKET_OWNER: account})
        if spec.input_prefix:
            variables[env.ENV_INPUT_PREFIX] = spec.input_prefix
        if spec.output_prefix:
            variables[env.ENV_OUTPUT_PREFIX] = spec.output_prefix
    return variables


def _function_tags(spec: DeploySpec, model_bucket: Optional[str]) -> dict[str, str]:
    """The function's own tags: its model and its buckets (destroy and invoke read them)."""
    extra = {tags.LAMBDA_MODEL: spec.model if "://" in spec.model else Path(spec.model).name}
    if spec.input_bucket and spec.output_bucket:
        extra.update({tags.LAMBDA_INPUT: spec.input_bucket, tags.LAMBDA_OUTPUT: spec.output_bucket})
    if model_bucket:
        extra[tags.LAMBDA_MODEL_BUCKET] = model_bucket
    return extra


def deploy(aws: AwsSession, spec: DeploySpec, *, model_file: Optional[Path] = None,
           sleep: Callable[[float], None] = time.sleep) -> DeployResult:
    """Create or update everything function *spec.name* needs (see the package docstring).

    Args:
        aws: the session (``dry_run`` for a plan: reads are made, changes are only listed).
        spec: a checked :class:`DeploySpec`.
        model_file: the archive to upload (from :func:`~mmsctl.cloud.lambda_.deploy.model.resolve_model_file`),
            unless the model is an ``s3://`` URI or baked into the image.
        sleep: how to wait between polls (tests pass a no-op).

    Raises:
        CloudError: AWS refused a call, or a resource of that name exists and is not ours.
    """
    t = Target(aws, spec, sleep)
    try:
        return _deploy(t, model_file)
    except MmsError as exc:
        made = [c for c in t.changes if c.action == "create"]
        if not made or aws.dry_run:
            raise
        raise DeployIncomplete(spec.name, exc, made) from exc


def _deploy(t: Target, model_file: Optional[Path]) -> DeployResult:
    aws, spec = t.aws, t.spec
    previous = function_or_none(aws, spec.name)
    if previous is not None and not ours(previous.get("Tags"), spec.name):
        raise CloudError(f"function {spec.name} exists and was not deployed by mmsctl (no mmsctl:lambda={spec.name} "
                         "tag); refusing to change it", hint="choose another NAME")
    image = find_image(t)  # reads only: a missing image or a clashing notification changes nothing
    check_no_overlap(t)
    ensure_image(t, image)
    model_uri, model_version, model_bucket = ensure_model(t, model_file)
    if spec.input_bucket and spec.output_bucket:
        ensure_bucket(t, spec.input_bucket, "input-bucket")
        if spec.output_bucket != spec.input_bucket:
            ensure_bucket(t, spec.output_bucket, "output-bucket")
    ensure_failure_queue(t)
    role_arn = ensure_role(t, _scope(t, model_uri, model_version, failure_arn(t)))
    ensure_log_group(t)
    previous_input = ((previous or {}).get("Tags") or {}).get(tags.LAMBDA_INPUT)
    ensure_function(t, image, role_arn, _variables(spec, model_uri, model_version, t.account),
                    _function_tags(spec, model_bucket), previous)
    ensure_provisioned(t, current_alias(t) if previous is not None else None)
    ensure_concurrency(t, previous is not None)
    ensure_async_config(t, previous is not None)
    permissions = Permissions(t)
    url, auth = ensure_url(t, permissions)
    ensure_trigger(t, permissions, previous_input)
    schedule = ensure_schedule(t, permissions)
    permissions.drop_unkept()
    return DeployResult(
        name=spec.name, region=aws.region, function_arn=t.function_arn, image=image, role_arn=role_arn,
        model=model_uri or f"{spec.model} (baked into the image)", model_version=model_version,
        url=url, url_auth=auth, schedule=schedule, provisioned=spec.provisioned,
        input=f"s3://{spec.input_bucket}/{spec.input_prefix}" if spec.input_bucket else None,
        output=f"s3://{spec.output_bucket}/{spec.output_prefix}" if spec.output_bucket else None,
        changes=t.changes, warnings=list(spec.warnings))
