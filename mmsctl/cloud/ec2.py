"""Launch, list, describe, terminate and clean up the EC2 model servers mmsctl manages.

Every function takes an :class:`~mmsctl.cloud._session.AwsSession` and returns
plain data; the CLI renders it. Instances are found by the ``mmsctl:managed``
tag, and only resources with that tag are ever terminated or deleted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Optional

from mmsctl.cloud import asg, iam, tags
from mmsctl.cloud._session import AwsSession
from mmsctl.cloud.accelerators import AcceleratorChoice
from mmsctl.cloud.ami import AmiChoice
from mmsctl.cloud.ei import IAM_PATH, ensure_ei_resources
from mmsctl.cloud.errors import ElasticInferenceRetired, ResourceNotFound
from mmsctl.cloud.network import Placement, resolve_placement
from mmsctl.cloud.security_groups import delete_security_group, ensure_security_group
from mmsctl.cloud.server_image import INFERENCE_PORT, METADATA_OPTIONS, server_image
from mmsctl.cloud.userdata import ModelSpec, ServerKind
from mmsctl.errors import CloudError, UsageError

__all__ = [
    "CleanupResult",
    "LaunchRequest",
    "LaunchResult",
    "cleanup",
    "describe_instance",
    "launch",
    "list_instances",
    "ssh_config",
    "ssh_host_block",
    "terminate",
    "wait_for_server",
]

SERVER_SG_NAME = "mmsctl-server"
_LIVE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]


@dataclass
class LaunchRequest:
    """What ``mmsctl ec2 launch`` was asked for."""

    accelerator: AcceleratorChoice
    models: list[ModelSpec] = field(default_factory=list)
    instance_type: Optional[str] = None
    subnet: Optional[str] = None
    key_name: Optional[str] = None
    ami: Optional[str] = None
    count: int = 1
    server: ServerKind = "mmsctl"
    allow_cidrs: list[str] = field(default_factory=list)
    name: Optional[str] = None
    pip_spec: Optional[str] = None


@dataclass
class LaunchResult:
    """What a launch made (or, in a dry run, would make)."""

    instances: list[dict[str, Any]]
    ami: AmiChoice
    placement: Placement
    instance_type: str
    accelerator: str
    created: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "instances": self.instances,
            "instance_type": self.instance_type,
            "accelerator": self.accelerator,
            "ami": {"id": self.ami.image_id, "source": self.ami.source, "name": self.ami.name},
            "subnet": self.placement.subnet_id,
            "vpc": self.placement.vpc_id,
            "availability_zone": self.placement.availability_zone,
            "created": self.created,
            "reused": self.reused,
            "warnings": self.warnings,
        }


def launch(aws: AwsSession, req: LaunchRequest, *, sleep: Callable[[float], None] = time.sleep) -> LaunchResult:
    """Find or create what the instances need, then run them with the boot script.

    Raises:
        UnsupportedRegion: Elastic Inference in a region where it never existed.
        CloudError: AWS refused a call (credentials, access, quota, …).
    """
    choice = req.accelerator
    if req.count < 1:
        raise UsageError("count must be at least 1", param="count")
    image = server_image(aws, choice, models=req.models, server=req.server, ami=req.ami,
                         instance_type=req.instance_type, pip_spec=req.pip_spec)
    placement = resolve_placement(aws, req.subnet)
    created: list[str] = []
    reused: list[str] = []
    server_sg = ensure_security_group(
        aws, placement, name=SERVER_SG_NAME, component=tags.SERVER_SECURITY_GROUP,
        description="mmsctl: model server inference API and SSH",
        ports=(INFERENCE_PORT, 22), cidrs=tuple(req.allow_cidrs or [placement.vpc_cidr]),
        created=created, reused=reused,
    )
    group_ids = [server_sg]
    params: dict[str, Any] = {}
    if choice.is_ei:
        ei = ensure_ei_resources(aws, placement)
        created += ei.created
        reused += ei.reused
        group_ids.append(ei.security_group_id)
        params["IamInstanceProfile"] = {"Arn": ei.instance_profile_arn}
        params["ElasticInferenceAccelerators"] = image.ei_request()
    name = req.name or "mmsctl-" + ("-".join(m.name for m in req.models[:2]) or "server")
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
    reservation = _run_instances(aws, params, ei=choice.is_ei, sleep=sleep)
    rows = [_row(i) for i in reservation.get("Instances", [])]
    return LaunchResult(rows, image.ami, placement, image.instance_type, choice.label, created, reused,
                        image.warnings)


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


def _row(instance: dict[str, Any]) -> dict[str, Any]:
    """One instance as the flat record ``list``/``describe`` print."""
    t = tags.as_dict(instance.get("Tags"))
    public = instance.get("PublicIpAddress")
    launched = instance.get("LaunchTime")
    return {
        "id": instance.get("InstanceId"),
        "name": t.get("Name"),
        "state": (instance.get("State") or {}).get("Name"),
        "type": instance.get("InstanceType"),
        "accelerator": t.get(tags.ACCELERATOR, "none"),
        "public_ip": public,
        "private_ip": instance.get("PrivateIpAddress"),
        "zone": (instance.get("Placement") or {}).get("AvailabilityZone"),
        "models": t.get(tags.MODELS) or None,
        "server": t.get(tags.SERVER),
        "image": instance.get("ImageId"),
        "key": instance.get("KeyName"),
        "launched": launched.isoformat() if isinstance(launched, datetime) else launched,
        "inference_url": f"http://{public}:{INFERENCE_PORT}" if public else None,
    }


def list_instances(aws: AwsSession, *, include_terminated: bool = False) -> list[dict[str, Any]]:
    """The instances mmsctl launched in this region, newest first."""
    filters = tags.managed_filter(tags.INSTANCE)
    if not include_terminated:
        filters.append({"Name": "instance-state-name", "Values": _LIVE_STATES})
    reservations = aws.paginate("ec2", "describe_instances", "Reservations", Filters=filters)
    rows = [_row(i) for r in reservations for i in r.get("Instances", [])]
    rows.sort(key=lambda r: str(r.get("launched") or ""), reverse=True)
    return rows


def _get_instances(aws: AwsSession, ids: list[str]) -> list[dict[str, Any]]:
    try:
        reservations = aws.call("ec2", "describe_instances", InstanceIds=ids)["Reservations"]
    except ResourceNotFound as exc:
        raise ResourceNotFound(f"no such instance in {aws.region}: {', '.join(ids)}") from exc
    return [i for r in reservations for i in r.get("Instances", [])]


def _require_managed(instances: list[dict[str, Any]]) -> None:
    for inst in instances:
        fleet = tags.as_dict(inst.get("Tags")).get(tags.FLEET)
        if fleet:
            raise CloudError(f"{inst['InstanceId']} belongs to fleet {fleet!r}; its Auto Scaling group "
                             "would replace it", hint=f"use `mmsctl fleet scale {fleet}` or `mmsctl fleet destroy {fleet}`")
        if tags.as_dict(inst.get("Tags")).get(tags.MANAGED) != "true":
            raise CloudError(f"{inst['InstanceId']} was not launched by mmsctl (no {tags.MANAGED} tag); "
                             "refusing to touch it", hint="use the EC2 console or `aws ec2` for it")


def describe_instance(aws: AwsSession, instance_id: str) -> dict[str, Any]:
    """Everything worth knowing about one instance: the list row plus tags, groups, role, EI association."""
    instances = _get_instances(aws, [instance_id])
    _require_managed(instances)
    inst = instances[0]
    row = _row(inst)
    row.update(
        vpc=inst.get("VpcId"),
        subnet=inst.get("SubnetId"),
        security_groups=[g.get("GroupId") for g in inst.get("SecurityGroups", [])],
        iam_instance_profile=(inst.get("IamInstanceProfile") or {}).get("Arn"),
        elastic_inference=[a.get("ElasticInferenceAcceleratorArn")
                           for a in inst.get("ElasticInferenceAcceleratorAssociations", [])] or None,
        public_dns=inst.get("PublicDnsName") or None,
        tags=tags.as_dict(inst.get("Tags")),
    )
    return row


def terminate(aws: AwsSession, instance_ids: list[str], *, all_instances: bool = False,
              wait: bool = False) -> list[dict[str, Any]]:
    """Terminate mmsctl's instances (all of them with *all_instances*); anything else is refused."""
    if all_instances:
        ids = [str(r["id"]) for r in list_instances(aws) if r["state"] != "shutting-down"]
        if not ids:
            return []
    else:
        if not instance_ids:
            raise UsageError("name the instances to terminate, or ask for all of them", param="all_instances")
        ids = list(dict.fromkeys(instance_ids))
        _require_managed(_get_instances(aws, ids))
    answer = aws.call("ec2", "terminate_instances", InstanceIds=ids)
    if wait and not aws.dry_run:
        _wait(aws, "terminated", ids)
    return [{"id": i["InstanceId"], "previous": (i.get("PreviousState") or {}).get("Name"),
             "state": "terminated" if wait and not aws.dry_run else (i.get("CurrentState") or {}).get("Name")}
            for i in answer.get("TerminatingInstances", [])]


def _wait(aws: AwsSession, target: str, ids: list[str], timeout: float = 900.0,
          sleep: Callable[[float], None] = time.sleep) -> None:
    """Poll DescribeInstances until every instance is in *target* state (1 s, growing to 10 s, between polls)."""
    delay, waited = 1.0, 0.0
    while True:
        states = {i["InstanceId"]: (i.get("State") or {}).get("Name") for i in _get_instances(aws, ids)}
        if all(state == target for state in states.values()):
            return
        if target == "running" and any(state in ("terminated", "shutting-down") for state in states.values()):
            raise CloudError(f"instances stopped before they ran: {states}",
                             hint="see the instance's state reason in `mmsctl ec2 describe`")
        if waited >= timeout:
            raise CloudError(f"instances did not reach {target} within {timeout:g}s: {states}")
        sleep(delay)
        waited += delay
        delay = min(delay * 1.5, 10.0)


def wait_for_instances(aws: AwsSession, ids: list[str], *, timeout: float = 900.0) -> list[dict[str, Any]]:
    """Wait until the instances run, then return their rows (now with public IPs)."""
    _wait(aws, "running", ids, timeout)
    return [_row(i) for i in _get_instances(aws, ids)]


def wait_for_server(url: str, *, timeout: float, interval: float = 5.0,
                    clock: Callable[[], float] = time.monotonic,
                    sleep: Callable[[float], None] = time.sleep) -> bool:
    """Poll ``<url>/ping`` until it answers 200 (True) or *timeout* passes (False)."""
    import httpx

    deadline = clock() + timeout
    while True:
        try:
            if httpx.get(f"{url.rstrip('/')}/ping", timeout=min(5.0, max(timeout, 0.1))).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        if clock() + interval > deadline:
            return False
        sleep(interval)


def ssh_config(aws: AwsSession, instance_ids: list[str], *, identity_dir: str = "~/.ssh") -> str:
    """``~/.ssh/config`` entries for the instances (all running ones by default), with the management port forwarded."""
    rows = [describe_instance(aws, i) for i in instance_ids] if instance_ids else [
        r for r in list_instances(aws) if r["state"] == "running"]
    blocks = []
    for r in rows:
        host = r.get("public_dns") or r.get("public_ip") or r.get("private_ip")
        if not host:
            continue
        blocks.append(ssh_host_block(
            f"{r['name'] or 'mmsctl'}-{r['id']}", host, key=r.get("key"), identity_dir=identity_dir,
            forwards=[(8081, 8081)], note="the management API listens on the instance's loopback only"))
    return "\n\n".join(blocks) + ("\n" if blocks else "")


def ssh_host_block(alias: str, host: str, *, key: Optional[str], identity_dir: str,
                   forwards: list[tuple[int, int]], note: str = "", user: str = "ubuntu") -> str:
    """One ``~/.ssh/config`` entry; each forward ``(local, remote)`` maps localhost:local to the host's remote port."""
    lines = [f"Host {alias}", f"    HostName {host}", f"    User {user}"]
    if key:
        lines.append(f"    IdentityFile {identity_dir}/{key}.pem")
    if note:
        lines.append(f"    # {note}")
    lines += [f"    LocalForward {local} 127.0.0.1:{remote}" for local, remote in forwards]
    lines.append("    StrictHostKeyChecking accept-new")
    return "\n".join(lines)


@dataclass
class CleanupResult:
    deleted: list[dict[str, str]] = field(default_factory=list)
    kept: list[dict[str, str]] = field(default_factory=list)


def cleanup(aws: AwsSession, *, sleep: Callable[[float], None] = time.sleep,
            timeout: float = 300.0) -> CleanupResult:
    """Delete the endpoints, security groups, role and instance profile mmsctl created; nothing else.

    Refuses while mmsctl instances, or fleets with Elastic Inference, still live (they use the groups).
    """
    live = list_instances(aws)
    if live:
        raise CloudError(f"{len(live)} mmsctl instance(s) still exist in {aws.region}: "
                         f"{', '.join(str(r['id']) for r in live)}",
                         param="instances", hint="terminate them first, and wait until they are gone")
    ei_fleets = sorted(tags.as_dict(g.get("Tags")).get(tags.FLEET, "?") for g in asg.groups_tagged(aws, tags.FLEET)
                       if tags.as_dict(g.get("Tags")).get(tags.ACCELERATOR, "").startswith("eia"))
    if ei_fleets:
        raise CloudError(f"fleet(s) {', '.join(ei_fleets)} use the Elastic Inference endpoint and group in {aws.region}",
                         hint=f"destroy them first: mmsctl fleet destroy {ei_fleets[0]}")
    result = CleanupResult()
    endpoints = aws.call("ec2", "describe_vpc_endpoints", Filters=tags.managed_filter(tags.EI_ENDPOINT))
    endpoint_ids = [e["VpcEndpointId"] for e in endpoints.get("VpcEndpoints", [])
                    if e.get("State") not in ("deleted", "deleting")]
    if endpoint_ids:
        aws.call("ec2", "delete_vpc_endpoints", VpcEndpointIds=endpoint_ids)
        result.deleted += [{"kind": "vpc-endpoint", "id": i} for i in endpoint_ids]
        if not aws.dry_run:
            _wait_endpoints_gone(aws, endpoint_ids, sleep=sleep, timeout=timeout)
    groups = aws.paginate("ec2", "describe_security_groups", "SecurityGroups", Filters=tags.managed_filter())
    for group in groups:
        delete_security_group(aws, group["GroupId"], sleep=sleep, timeout=timeout)
        result.deleted.append({"kind": "security-group", "id": group["GroupId"]})
    _cleanup_iam(aws, result)
    return result


def _wait_endpoints_gone(aws: AwsSession, ids: list[str], *, sleep: Callable[[float], None],
                         timeout: float) -> None:
    waited = 0.0
    while waited < timeout:
        try:
            left = aws.call("ec2", "describe_vpc_endpoints", VpcEndpointIds=ids)["VpcEndpoints"]
        except ResourceNotFound:
            return
        if all(e.get("State") in ("deleted",) for e in left) or not left:
            return
        sleep(5)
        waited += 5


def _cleanup_iam(aws: AwsSession, result: CleanupResult) -> None:
    profiles = aws.paginate("iam", "list_instance_profiles", "InstanceProfiles", PathPrefix=IAM_PATH)
    for profile in profiles:
        name = profile["InstanceProfileName"]
        if _tag(iam.find(aws, "instance-profile", name), tags.MANAGED) != "true":
            result.kept.append({"kind": "instance-profile", "id": name})
            continue
        iam.delete_instance_profile(aws, name, [r["RoleName"] for r in profile.get("Roles", [])])
        result.deleted.append({"kind": "instance-profile", "id": name})
    roles = aws.paginate("iam", "list_roles", "Roles", PathPrefix=IAM_PATH)
    for role in roles:
        name = role["RoleName"]
        if _tag(iam.find(aws, "role", name), tags.MANAGED) != "true":
            result.kept.append({"kind": "iam-role", "id": name})
            continue
        iam.delete_role(aws, name)
        result.deleted.append({"kind": "iam-role", "id": name})


def _tag(resource: Optional[dict[str, Any]], key: str) -> Optional[str]:
    return tags.as_dict((resource or {}).get("Tags")).get(key)
