"""``mmsctl ec2 launch``: find or create what the instances need, then run them with the boot script.

Every function takes an :class:`~mmsctl.cloud.aws.session.AwsSession` and returns plain data; the
CLI renders it. What launch makes carries ``mmsctl:managed=true``: only that is ever terminated or
deleted (:mod:`.destroy`).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from mmsctl.cloud.aws import tags
from mmsctl.cloud.aws.errors import ElasticInferenceRetired
from mmsctl.cloud.aws.network import Placement, resolve_placement
from mmsctl.cloud.aws.security_groups import check_ssh_sources, ensure_security_group
from mmsctl.cloud.aws.session import AwsSession
from mmsctl.cloud.aws.undo import undo
from mmsctl.cloud.ec2.assets import LaunchAssets, launch_name, plan_launch_assets, stage_launch_assets
from mmsctl.cloud.ec2.query import instance_row
from mmsctl.cloud.ec2.spec import LaunchRequest, LaunchResult
from mmsctl.cloud.instance.accelerators import check_ei_region
from mmsctl.cloud.instance.ei import check_ei_service, ensure_ei_instance_profile, ensure_ei_network
from mmsctl.cloud.instance.server_image import INFERENCE_PORT, METADATA_OPTIONS, ServerImage, server_image
from mmsctl.errors import CloudError, MmsError, UsageError

__all__ = ["SERVER_SG_NAME", "launch"]

SERVER_SG_NAME = "mmsctl-server"


def launch(aws: AwsSession, req: LaunchRequest, *, sleep: Callable[[float], None] = time.sleep) -> LaunchResult:
    """Find or create what the instances need, then run them with the boot script.

    A launch that fails after it made something (an endpoint EC2 will not make, a refused RunInstances)
    deletes what it made before it raises (never what it found and reused), and its error says what went
    and what stays.

    Raises:
        UnsupportedRegion: Elastic Inference in a region where it never existed.
        ElasticInferenceRetired: the region no longer offers EI's endpoint service (asked before anything is made).
        CloudError: AWS refused a call (credentials, access, quota, …).
    """
    choice = req.accelerator
    if req.count < 1:
        raise UsageError("count must be at least 1", param="count")
    req.allow_cidrs = check_ssh_sources(req.allow_cidrs, allow_world=req.allow_world_ssh, param="allow_cidrs")
    if choice.is_ei and not aws.region.startswith("<"):
        check_ei_region(aws.region)  # before the wheels and the models are prepared here
    if choice.is_ei:
        check_ei_service(aws)
    name = launch_name(req.name, req.models)
    assets = plan_launch_assets(aws, name, req.models, req.instance_python) if req.uses_assets else None
    image = server_image(aws, choice, models=assets.plan.models if assets else req.models, server=req.server,
                         ami=req.ami, instance_type=req.instance_type, pip_spec=req.pip_spec,
                         assets=assets.ref if assets else None)
    placement = resolve_placement(aws, req.subnet)
    created: list[str] = []
    reused: list[str] = []
    try:
        params = _prepare(aws, req, name, assets, image, placement, created, reused)
        reservation = _run_instances(aws, params, ei=choice.is_ei, sleep=sleep)
    except MmsError as exc:
        raise _undone(aws, exc, created, sleep) from exc.__cause__
    rows = [instance_row(i) for i in reservation.get("Instances", [])]
    return LaunchResult(rows, image.ami, placement, image.instance_type, choice.label, created, reused,
                        image.warnings)


def _prepare(aws: AwsSession, req: LaunchRequest, name: str, assets: Optional[LaunchAssets], image: ServerImage,
             placement: Placement, created: list[str], reused: list[str]) -> dict[str, Any]:
    """Find or create the groups, EI's endpoint, the assets and the role; the RunInstances parameters."""
    choice = req.accelerator
    server_sg = ensure_security_group(
        aws, placement, name=SERVER_SG_NAME, component=tags.SERVER_SECURITY_GROUP,
        description="mmsctl: model server inference API and SSH",
        ports=(INFERENCE_PORT, 22), cidrs=tuple(req.allow_cidrs or [placement.vpc_cidr]),
        created=created, reused=reused,
    )
    group_ids = [server_sg]
    params: dict[str, Any] = {}
    if choice.is_ei:
        ei = ensure_ei_network(aws, placement, created, reused)
        group_ids.append(ei.security_group_id)
        params["ElasticInferenceAccelerators"] = image.ei_request()
        if assets is None:  # with assets the launch's own role carries the EI policy
            params["IamInstanceProfile"] = {"Arn": ensure_ei_instance_profile(aws, created, reused)}
    if assets is not None:
        params["IamInstanceProfile"] = {"Arn": stage_launch_assets(aws, assets, ei=choice.is_ei, created=created,
                                                                   reused=reused)}
    instance_tags = tags.base_tags(tags.INSTANCE, name, {
        tags.ACCELERATOR: choice.label,
        tags.MODELS: ",".join(m.arg for m in req.models),
        tags.SERVER: req.server,
    })
    params.update(
        ImageId=image.ami.image_id, InstanceType=image.instance_type, MinCount=req.count, MaxCount=req.count,
        SubnetId=placement.subnet_id, SecurityGroupIds=group_ids, UserData=image.user_data,
        MetadataOptions=dict(METADATA_OPTIONS),
        TagSpecifications=[tags.tag_spec("instance", instance_tags),
                           tags.tag_spec("volume", tags.base_tags("volume", name))],
    )
    if req.key_name:
        params["KeyName"] = req.key_name
    return params


def _undone(aws: AwsSession, exc: MmsError, created: list[str], sleep: Callable[[float], None]) -> MmsError:
    """*exc*, after deleting what this launch made; its message says what went and what stays."""
    if aws.dry_run or not created:
        return exc
    removed, kept = undo(aws, created, sleep=sleep)
    said = [exc.message]
    if removed:
        said.append(f"removed what this launch made: {', '.join(removed)}")
    if kept:
        said.append(f"kept: {', '.join(kept)} (the next launch reuses them; `mmsctl ec2 cleanup` removes all but "
                    "the asset bucket once no mmsctl instance runs)")
    exc.message = "; ".join(said)
    return exc


def _run_instances(aws: AwsSession, params: dict[str, Any], *, ei: bool,
                   sleep: Callable[[float], None]) -> dict[str, Any]:
    # A new instance profile takes a few seconds to reach EC2 (IAM is eventually consistent).
    delay = 2.0
    for attempt in range(8):
        try:
            return aws.call("ec2", "run_instances", **params)
        except CloudError as exc:
            if "iamInstanceProfile" in exc.message and attempt < 7:
                sleep(delay)
                delay = min(delay * 1.5, 10.0)
                continue
            if ei and ("ElasticInference" in exc.message or "eia" in exc.message.lower()):
                raise ElasticInferenceRetired(f"{exc.message} (Elastic Inference was retired in April 2024)"
                                              ) from exc
            raise
    raise AssertionError("unreachable")  # pragma: no cover
