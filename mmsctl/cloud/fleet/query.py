"""Finding a fleet's resources, and what ``fleet list|describe``, fan-out and ``--wait`` read.

A resource belongs to fleet NAME when it has the fleet's name *and* the tag
``mmsctl:fleet=NAME``; a same-named resource without the tag is reported as
foreign and never touched.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from mmsctl.cloud.aws import iam, tags
from mmsctl.cloud.aws.errors import ResourceNotFound
from mmsctl.cloud.aws.session import AwsSession
from mmsctl.cloud.fleet import asg, elb
from mmsctl.cloud.fleet.names import FleetNames, check_name
from mmsctl.cloud.instance.boot_status import boot_status
from mmsctl.cloud.instance.server_image import READY_PATH
from mmsctl.errors import RequestTimeout

__all__ = [
    "FleetHealth",
    "FleetResources",
    "describe",
    "endpoint",
    "find_resources",
    "health",
    "list_fleets",
    "members",
    "not_in_service",
    "wait_healthy",
]


@dataclass
class FleetResources:
    """What exists of one fleet (any part may be missing: a half-made or half-destroyed fleet)."""

    name: str
    group: Optional[dict[str, Any]] = None
    rollout_group: Optional[dict[str, Any]] = None  # the other group while a blue/green rollout is open
    policies: list[dict[str, Any]] = field(default_factory=list)
    load_balancer: Optional[dict[str, Any]] = None
    listeners: list[dict[str, Any]] = field(default_factory=list)
    target_group: Optional[dict[str, Any]] = None
    launch_templates: list[dict[str, Any]] = field(default_factory=list)
    security_groups: list[dict[str, Any]] = field(default_factory=list)
    role: Optional[dict[str, Any]] = None
    instance_profile: Optional[dict[str, Any]] = None
    foreign: list[str] = field(default_factory=list)

    @property
    def names(self) -> FleetNames:
        return FleetNames(self.name)

    def parts(self) -> list[str]:
        """One phrase per kind of resource that exists."""
        found = [
            ("auto scaling group", (1 if self.group else 0) + (1 if self.rollout_group else 0)), ("scaling policy", len(self.policies)),
            ("load balancer", 1 if self.load_balancer else 0), ("listener", len(self.listeners)),
            ("target group", 1 if self.target_group else 0), ("launch template", len(self.launch_templates)),
            ("security group", len(self.security_groups)), ("iam role", 1 if self.role else 0),
            ("instance profile", 1 if self.instance_profile else 0),
        ]
        return [f"{n} {kind}{'s' if n > 1 else ''}" if n > 1 else kind for kind, n in found if n]

    def any(self) -> bool:
        return bool(self.parts())

    def summary(self) -> str:
        return ", ".join(self.parts()) or "nothing"

    @property
    def https(self) -> bool:
        return any(li.get("Protocol") == "HTTPS" for li in self.listeners)

    @property
    def endpoint(self) -> Optional[str]:
        if not self.load_balancer:
            return None
        return elb.endpoint_url(str(self.load_balancer.get("DNSName", "")), self.https)


def _ours(resource_tags: dict[str, str], name: str) -> bool:
    return resource_tags.get(tags.FLEET) == name


def find_resources(aws: AwsSession, name: str) -> FleetResources:
    """Everything of fleet *name* that exists now (read calls only)."""
    check_name(name)
    names = FleetNames(name)
    found = FleetResources(name)
    _find_groups(aws, found)
    lb = elb.find_load_balancer(aws, names.load_balancer)
    tg = elb.find_target_group(aws, names.target_group)
    arns = [str(x[key]) for x, key in ((lb, "LoadBalancerArn"), (tg, "TargetGroupArn")) if x is not None]
    arn_tags = elb.tags_of(aws, arns) if arns else {}
    if lb is not None:
        if _ours(arn_tags.get(str(lb["LoadBalancerArn"]), {}), name):
            found.load_balancer = lb
            found.listeners = elb.listeners_of(aws, str(lb["LoadBalancerArn"]))
        else:
            found.foreign.append(f"load balancer {names.load_balancer}")
    if tg is not None:
        if _ours(arn_tags.get(str(tg["TargetGroupArn"]), {}), name):
            found.target_group = tg
        else:
            found.foreign.append(f"target group {names.target_group}")
    found.launch_templates = aws.call("ec2", "describe_launch_templates",
                                      Filters=tags.fleet_filter(name))["LaunchTemplates"]
    found.security_groups = aws.paginate("ec2", "describe_security_groups", "SecurityGroups",
                                         Filters=tags.fleet_filter(name))
    for kind, iam_name, attr in (("role", names.role, "role"),
                                 ("instance-profile", names.instance_profile, "instance_profile")):
        resource = iam.find(aws, kind, iam_name)
        if resource is None:
            continue
        if _ours(tags.as_dict(resource.get("Tags")), name):
            setattr(found, attr, resource)
        else:
            found.foreign.append(f"{kind.replace('-', ' ')} {iam_name}")
    return found


#: Tag on a group taking part in a blue/green rollout: ``launching`` (the new group, not yet serving) or
#: ``old`` (the group traffic was shifted away from, kept for ``--rollback`` until ``--finish``).
ROLLOUT_ROLE = "mmsctl:rollout-role"


def _find_groups(aws: AwsSession, found: FleetResources) -> None:
    """The serving group (either of the two names) in ``group``; the other one of a rollout in ``rollout_group``."""
    names = found.names
    ours = []
    for group_name in names.group_names:
        group = asg.find_group(aws, group_name)
        if group is None:
            continue
        if _ours(tags.as_dict(group.get("Tags")), found.name):
            ours.append(group)
        else:
            found.foreign.append(f"auto scaling group {group_name}")
    serving = [g for g in ours if tags.as_dict(g.get("Tags")).get(ROLLOUT_ROLE) not in ("launching", "old")]
    others = [g for g in ours if g not in serving[:1]]
    found.group = serving[0] if serving else (others.pop(0) if others else None)
    found.rollout_group = others[0] if others else None
    if found.group is not None:
        found.policies = [p for p in asg.policies_of(aws, str(found.group["AutoScalingGroupName"]))
                          if p.get("PolicyName") == names.policy]


def _require(aws: AwsSession, name: str) -> FleetResources:
    found = find_resources(aws, name)
    if not found.any():
        raise ResourceNotFound(f"no fleet {name!r} in {aws.region}", hint="`mmsctl fleet list` shows the fleets")
    return found


def _instances(aws: AwsSession, ids: list[str]) -> dict[str, dict[str, Any]]:
    if not ids:
        return {}
    reservations = aws.call("ec2", "describe_instances", InstanceIds=ids)["Reservations"]
    return {str(i["InstanceId"]): i for r in reservations for i in r.get("Instances", [])}


def _size(group: Optional[dict[str, Any]]) -> dict[str, Optional[int]]:
    group = group or {}
    return {"min": group.get("MinSize"), "desired": group.get("DesiredCapacity"), "max": group.get("MaxSize")}


def list_fleets(aws: AwsSession) -> list[dict[str, Any]]:
    """One row per fleet in the region (found by its Auto Scaling group's ``mmsctl:fleet`` tag)."""
    rows = []
    for group in asg.groups_tagged(aws, tags.FLEET):
        group_tags = tags.as_dict(group.get("Tags"))
        name = group_tags.get(tags.FLEET, "")
        lb = elb.find_load_balancer(aws, FleetNames(name).load_balancer)
        https = lb is not None and any(li.get("Protocol") == "HTTPS"
                                       for li in elb.listeners_of(aws, str(lb["LoadBalancerArn"])))
        rows.append({
            "name": name, **_size(group),
            "in_service": sum(1 for i in group.get("Instances", []) if i.get("LifecycleState") == "InService"),
            "instance_type": group_tags.get(tags.INSTANCE_TYPE), "accelerator": group_tags.get(tags.ACCELERATOR),
            "models": group_tags.get(tags.MODELS), "status": group.get("Status") or "active",
            "endpoint": elb.endpoint_url(str(lb.get("DNSName", "")), https) if lb else None,
        })
    rows.sort(key=lambda r: str(r["name"]))
    return rows


@dataclass
class FleetHealth:
    """The group's size against the balancer's view of its targets, and the group's instances not in service
    (``Pending:Wait``: held by the launch hook until their boot completes it)."""

    desired: int
    in_service: int
    targets: list[dict[str, Any]]
    pending: list[dict[str, Any]] = field(default_factory=list)

    @property
    def healthy(self) -> int:
        return sum(1 for t in self.targets if t.get("state") == "healthy")

    @property
    def ready(self) -> bool:
        """Every instance the group wants is a healthy target (and there is at least one)."""
        return self.healthy >= max(self.desired, 1)

    def not_ready(self) -> list[str]:
        """``i-…: unhealthy (reason)`` for each target not healthy, ``i-…: Pending:Wait`` for each instance
        the group holds before it is a target."""
        return ([f"{t['id']}: {t['state']}" + (f" ({t['reason']})" if t.get("reason") else "")
                 for t in self.targets if t.get("state") != "healthy"]
                + [f"{i['id']}: {i['lifecycle']}" + (" (its boot has not completed the launch hook)"
                                                      if str(i["lifecycle"]).endswith(":Wait") else "")
                   for i in self.pending])

    def to_dict(self) -> dict[str, Any]:
        return {"desired": self.desired, "in_service": self.in_service, "healthy": self.healthy,
                "targets": self.targets, "pending": self.pending}


def not_in_service(group: dict[str, Any]) -> list[dict[str, Any]]:
    """The group's instances that are not ``InService``, with their lifecycle state (DescribeAutoScalingGroups)."""
    return [{"id": str(i.get("InstanceId")), "lifecycle": i.get("LifecycleState")}
            for i in group.get("Instances") or [] if i.get("LifecycleState") != "InService"]


def health(aws: AwsSession, name: str) -> FleetHealth:
    """The group's desired and in-service counts, and each target's health in the target group."""
    found = _require(aws, name)
    if found.group is None or found.target_group is None:
        raise ResourceNotFound(f"fleet {name!r} has no {'Auto Scaling group' if found.group is None else 'target group'}"
                               f" (it has: {found.summary()})",
                               hint=f"a create that failed half-way: `mmsctl fleet destroy {name}`, then create again")
    group = found.group
    return FleetHealth(
        desired=int(group.get("DesiredCapacity") or 0),
        in_service=sum(1 for i in group.get("Instances", []) if i.get("LifecycleState") == "InService"),
        targets=elb.target_health(aws, str(found.target_group["TargetGroupArn"])),
        pending=not_in_service(group),
    )


def wait_healthy(aws: AwsSession, name: str, *, timeout: float = 1200.0,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
                 on_progress: Optional[Callable[[FleetHealth], None]] = None) -> FleetHealth:
    """Poll until as many targets are healthy as the group wants (5 s, growing to 15 s, between polls).

    Raises:
        RequestTimeout: not ready within *timeout* seconds (exit 7); the message has the counts.
    """
    deadline = clock() + timeout
    delay = 5.0
    while True:
        state = health(aws, name)
        if on_progress is not None:
            on_progress(state)
        if state.ready:
            return state
        left = deadline - clock()
        if left <= 0:
            unhealthy = state.not_ready()
            raise RequestTimeout(
                f"fleet {name}: {state.healthy} of {state.desired} targets healthy after {timeout:g}s"
                + (f"; {', '.join(unhealthy)}" if unhealthy else ""),
                hint="the boot script takes minutes (pip install); `mmsctl fleet describe` shows each target, "
                     "/var/log/mmsctl-init.log on an instance shows progress")
        sleep(min(delay, left))
        delay = min(delay * 1.5, 15.0)


def members(aws: AwsSession, name: str) -> list[dict[str, Any]]:
    """The group's in-service instances with their private addresses (what fan-out management reaches)."""
    found = _require(aws, name)
    if found.group is None:
        raise ResourceNotFound(f"fleet {name!r} has no Auto Scaling group (it has: {found.summary()})")
    states = {str(i["InstanceId"]): i for i in found.group.get("Instances", [])
              if i.get("LifecycleState") == "InService"}
    described = _instances(aws, sorted(states))
    rows = []
    for iid in sorted(states):
        inst = described.get(iid, {})
        rows.append({"id": iid, "private_ip": inst.get("PrivateIpAddress"), "public_ip": inst.get("PublicIpAddress"),
                     "zone": states[iid].get("AvailabilityZone"), "health": states[iid].get("HealthStatus"),
                     "key": inst.get("KeyName")})
    return rows


def endpoint(aws: AwsSession, name: str) -> str:
    """The balancer's URL (https when it has an HTTPS listener)."""
    found = _require(aws, name)
    if found.endpoint is None:
        raise ResourceNotFound(f"fleet {name!r} has no load balancer (it has: {found.summary()})")
    return found.endpoint


def _rules(group: dict[str, Any], key: str, by_id: dict[str, str]) -> list[str]:
    """``tcp/8080 from sg-… (mmsctl-fleet-x-lb)``-style lines for a group's rules."""
    lines = []
    for perm in group.get(key, []):
        proto = perm.get("IpProtocol")
        ports = "all" if proto == "-1" else (
            f"{perm.get('FromPort')}" if perm.get("FromPort") == perm.get("ToPort")
            else f"{perm.get('FromPort')}-{perm.get('ToPort')}")
        label = "all" if proto == "-1" else f"{proto}/{ports}"
        for pair in perm.get("UserIdGroupPairs", []):
            gid = str(pair.get("GroupId"))
            lines.append(f"{label} {gid}" + (f" ({by_id[gid]})" if gid in by_id else ""))
        lines += [f"{label} {r.get('CidrIp')}" for r in perm.get("IpRanges", [])]
        lines += [f"{label} {r.get('CidrIpv6')}" for r in perm.get("Ipv6Ranges", [])]
    return lines


def _notes(found: FleetResources, hook: Optional[dict[str, Any]]) -> list[str]:
    """What a fleet made by an older mmsctl lacks, each with what fixes it (a rollout does both)."""
    notes = []
    if found.group is not None and hook is None:
        notes.append(f"the group has no launch lifecycle hook: a member joins the balancer before its server "
                     f"is ready, and a warm-pool instance is stopped before its boot ends (it never serves); "
                     f"`mmsctl fleet rollout {found.name}` gives the new group one")
    path = str((found.target_group or {}).get("HealthCheckPath") or "")
    server = tags.as_dict((found.group or {}).get("Tags")).get(tags.SERVER)
    if path.startswith("/ping/") and server != "mms":
        notes.append(f"the health check {path} names a model: members whose models do not include it never "
                     f"turn healthy; `mmsctl fleet rollout {found.name}` moves it to {READY_PATH}")
    return notes


def _members(aws: AwsSession, group: dict[str, Any], targets: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each instance of *group*: its lifecycle, health, boot as it reports it, target state, zone and addresses."""
    states = {str(i["InstanceId"]): i for i in group.get("Instances", [])}
    described = _instances(aws, sorted(states))
    return [{
        "id": iid, "lifecycle": states[iid].get("LifecycleState"), "health": states[iid].get("HealthStatus"),
        "boot": boot_status(described.get(iid, {})).text,
        "target": (targets.get(iid) or {}).get("state"), "zone": states[iid].get("AvailabilityZone"),
        "private_ip": described.get(iid, {}).get("PrivateIpAddress"),
        "public_ip": described.get(iid, {}).get("PublicIpAddress"),
        "template_version": (states[iid].get("LaunchTemplate") or {}).get("Version"),
    } for iid in sorted(states)]


def describe(aws: AwsSession, name: str) -> dict[str, Any]:
    """Everything about one fleet: size, members and their health, balancer, health check, policy, groups."""
    found = _require(aws, name)
    group = found.group or {}
    group_tags = tags.as_dict(group.get("Tags"))
    targets = {str(t["id"]): t for t in (elb.target_health(aws, str(found.target_group["TargetGroupArn"]))
                                         if found.target_group else [])}
    instances = _members(aws, group, targets)
    latest = str(found.launch_templates[0].get("LatestVersionNumber")) if found.launch_templates else None
    pinned = str((group.get("LaunchTemplate") or {}).get("Version") or "")
    latest = pinned if pinned.isdigit() else latest  # a group pinned by a rollout: its version is current
    drift = [i["id"] for i in instances if latest and i["template_version"] not in (None, latest, "$Latest")]
    tg = found.target_group or {}
    policy = (found.policies[0] if found.policies else {}).get("TargetTrackingConfiguration") or {}
    by_id = {str(g["GroupId"]): str(g.get("GroupName")) for g in found.security_groups}
    hook = asg.launch_hook_of(aws, str(group["AutoScalingGroupName"])) if found.group else None
    return {
        "name": name, "region": aws.region, "endpoint": found.endpoint, "status": group.get("Status") or (
            "active" if found.group else "incomplete"),
        **_size(found.group),
        "instance_type": group_tags.get(tags.INSTANCE_TYPE), "accelerator": group_tags.get(tags.ACCELERATOR),
        "models": group_tags.get(tags.MODELS), "server": group_tags.get(tags.SERVER),
        "health_check_type": group.get("HealthCheckType"), "health_check_grace_s": group.get("HealthCheckGracePeriod"),
        "subnets": [s for s in str(group.get("VPCZoneIdentifier") or "").split(",") if s],
        "instances": instances,
        "load_balancer": {
            "name": found.load_balancer.get("LoadBalancerName"), "dns": found.load_balancer.get("DNSName"),
            "scheme": found.load_balancer.get("Scheme"), "state": (found.load_balancer.get("State") or {}).get("Code"),
            "listeners": [{"protocol": li.get("Protocol"), "port": li.get("Port"),
                           "action": (li.get("DefaultActions") or [{}])[0].get("Type")} for li in found.listeners],
        } if found.load_balancer else None,
        "target_group": {
            "name": tg.get("TargetGroupName"), "port": tg.get("Port"), "health_check_path": tg.get("HealthCheckPath"),
            "matcher": (tg.get("Matcher") or {}).get("HttpCode"), "interval_s": tg.get("HealthCheckIntervalSeconds"),
            "healthy": sum(1 for t in targets.values() if t.get("state") == "healthy"), "targets": len(targets),
        } if found.target_group else None,
        "scaling_policy": {
            "name": found.policies[0].get("PolicyName"),
            "metric": (policy.get("PredefinedMetricSpecification") or {}).get("PredefinedMetricType"),
            "target_requests_per_minute": policy.get("TargetValue"),
        } if found.policies else None,
        "security_groups": [{"id": g["GroupId"], "name": g.get("GroupName"),
                             "component": tags.as_dict(g.get("Tags")).get(tags.COMPONENT),
                             "ingress": _rules(g, "IpPermissions", by_id),
                             "egress": _rules(g, "IpPermissionsEgress", by_id)} for g in found.security_groups],
        "launch_templates": [{"id": t.get("LaunchTemplateId"), "name": t.get("LaunchTemplateName"),
                              "latest_version": t.get("LatestVersionNumber")} for t in found.launch_templates],
        "iam_role": (found.role or {}).get("Arn"), "instance_profile": (found.instance_profile or {}).get("Arn"),
        "warm_pool": asg.warm_pool_of(aws, str(group["AutoScalingGroupName"])) if found.group else None,
        "lifecycle_hook": hook,
        "notes": _notes(found, hook),
        "drift": drift,  # members on an older launch template version than the latest
        "foreign": found.foreign,
    }
