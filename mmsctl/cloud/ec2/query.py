"""Finding mmsctl's EC2 instances: list, describe, the waiters, and ssh config entries.

Instances are found by the ``mmsctl:managed`` tag; one without it (or one of a fleet) is refused.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any, Callable, Optional

from mmsctl.cloud.aws import tags
from mmsctl.cloud.aws.errors import ResourceNotFound
from mmsctl.cloud.aws.session import AwsSession
from mmsctl.cloud.instance.boot_status import BootStatus, boot_status, boot_statuses, console_lines
from mmsctl.cloud.instance.server_image import INFERENCE_PORT
from mmsctl.cloud.instance.tunnels import ssh_host_block
from mmsctl.errors import CloudError

__all__ = [
    "boot_of",
    "describe_instance",
    "get_instances",
    "instance_row",
    "list_instances",
    "require_managed",
    "ssh_config",
    "wait_for_instances",
    "wait_for_server",
    "wait_for_state",
]

_LIVE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]


def instance_row(instance: dict[str, Any]) -> dict[str, Any]:
    """One instance as the flat record ``list``/``describe`` print (``boot``: what the instance reported of its
    boot, :mod:`~mmsctl.cloud.instance.boot_status`)."""
    t = tags.as_dict(instance.get("Tags"))
    public = instance.get("PublicIpAddress")
    launched = instance.get("LaunchTime")
    return {
        "id": instance.get("InstanceId"),
        "name": t.get("Name"),
        "state": (instance.get("State") or {}).get("Name"),
        "boot": boot_status(instance).text,
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
    rows = [instance_row(i) for r in reservations for i in r.get("Instances", [])]
    rows.sort(key=lambda r: str(r.get("launched") or ""), reverse=True)
    return rows


def get_instances(aws: AwsSession, ids: list[str]) -> list[dict[str, Any]]:
    try:
        reservations = aws.call("ec2", "describe_instances", InstanceIds=ids)["Reservations"]
    except ResourceNotFound as exc:
        raise ResourceNotFound(f"no such instance in {aws.region}: {', '.join(ids)}") from exc
    return [i for r in reservations for i in r.get("Instances", [])]


def require_managed(instances: list[dict[str, Any]]) -> None:
    for inst in instances:
        fleet = tags.as_dict(inst.get("Tags")).get(tags.FLEET)
        if fleet:
            raise CloudError(f"{inst['InstanceId']} belongs to fleet {fleet!r}; its Auto Scaling group "
                             "would replace it", hint=f"use `mmsctl fleet scale {fleet}` or `mmsctl fleet destroy {fleet}`")
        if tags.as_dict(inst.get("Tags")).get(tags.MANAGED) != "true":
            raise CloudError(f"{inst['InstanceId']} was not launched by mmsctl (no {tags.MANAGED} tag); "
                             "refusing to touch it", hint="use the EC2 console or `aws ec2` for it")


def describe_instance(aws: AwsSession, instance_id: str) -> dict[str, Any]:
    """Everything worth knowing about one instance: the list row plus tags, groups, role, EI association, and the
    boot's last lines on its console."""
    instances = get_instances(aws, [instance_id])
    require_managed(instances)
    inst = instances[0]
    row = instance_row(inst)
    row.update(
        vpc=inst.get("VpcId"),
        subnet=inst.get("SubnetId"),
        security_groups=[g.get("GroupId") for g in inst.get("SecurityGroups", [])],
        iam_instance_profile=(inst.get("IamInstanceProfile") or {}).get("Arn"),
        elastic_inference=[a.get("ElasticInferenceAcceleratorArn")
                           for a in inst.get("ElasticInferenceAcceleratorAssociations", [])] or None,
        public_dns=inst.get("PublicDnsName") or None,
        tags=tags.as_dict(inst.get("Tags")),
        boot_log=console_lines(aws, instance_id) or None,
    )
    return row


def wait_for_state(aws: AwsSession, target: str, ids: list[str], timeout: float = 900.0,
          sleep: Callable[[float], None] = time.sleep) -> None:
    """Poll DescribeInstances until every instance is in *target* state (1 s, growing to 10 s, between polls)."""
    delay, waited = 1.0, 0.0
    while True:
        states = {i["InstanceId"]: (i.get("State") or {}).get("Name") for i in get_instances(aws, ids)}
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
    wait_for_state(aws, "running", ids, timeout)
    return [instance_row(i) for i in get_instances(aws, ids)]


def wait_for_server(url: str, *, timeout: float, interval: float = 5.0, path: str = "/ping",
                    boot: Optional[Callable[[], BootStatus]] = None, clock: Callable[[], float] = time.monotonic,
                    sleep: Callable[[float], None] = time.sleep) -> bool:
    """Poll ``<url><path>`` until it answers 200, or *boot* (what the instance reports) says ``ready`` (True), or
    *timeout* passes (False).

    Raises:
        CloudError: the instance reported that its boot failed (the step and its log line).
    """
    import httpx

    deadline = clock() + timeout
    while True:
        reported = boot() if boot is not None else None
        if reported is not None and reported.state == "failed":
            raise CloudError(f"the boot failed at {reported.step}: {reported.line}",
                             hint="`mmsctl ec2 describe INSTANCE_ID` shows the boot's last lines on its console")
        if reported is not None and reported.state == "ready":
            return True
        try:
            if httpx.get(f"{url.rstrip('/')}{path}", timeout=min(5.0, max(timeout, 0.1))).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        if clock() + interval > deadline:
            return False
        sleep(interval)


def boot_of(aws: AwsSession, instance_id: str) -> Callable[[], BootStatus]:
    """What *instance_id* reports of its boot, asked again at each call (for :func:`wait_for_server`)."""
    return lambda: boot_statuses(aws, [instance_id]).get(instance_id) or BootStatus("booting")


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
