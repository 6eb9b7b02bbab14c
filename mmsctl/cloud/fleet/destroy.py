"""``fleet destroy``: remove everything ``fleet create`` made, in reverse order, idempotently.

    scaling policy → auto scaling group (instances terminated, waited for) → listeners →
    load balancer (waited for) → target group → launch template → the security groups'
    rules that name each other → security groups → instance profile → role

Each step looks first and skips what is already gone, so a destroy that stopped
half-way (or a create that failed half-way) is finished by running destroy again,
and a second destroy is a no-op. Only resources named for the fleet *and* tagged
``mmsctl:fleet=NAME`` are deleted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from mmsctl.cloud.aws import iam, tags
from mmsctl.cloud.aws.security_groups import delete_security_group
from mmsctl.cloud.aws.asset_bucket import delete_owned_prefix
from mmsctl.cloud.aws.session import AwsSession
from mmsctl.cloud.fleet import asg, elb
from mmsctl.cloud.fleet.names import FleetNames
from mmsctl.cloud.fleet.query import find_resources

__all__ = ["DestroyResult", "destroy"]

_GROUP_ORDER = (tags.FLEET_INSTANCE_SECURITY_GROUP, tags.FLEET_LB_SECURITY_GROUP, tags.FLEET_ADMIN_SECURITY_GROUP)


@dataclass
class DestroyResult:
    name: str
    region: str
    deleted: list[dict[str, str]] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "region": self.region, "deleted": self.deleted, "kept": self.kept}


def destroy(aws: AwsSession, name: str, *, sleep: Callable[[float], None] = time.sleep,
            timeout: float = 900.0) -> DestroyResult:
    """Delete fleet *name*'s resources; what was deleted (empty when nothing was left)."""
    found = find_resources(aws, name)
    names = found.names
    result = DestroyResult(name, aws.region, kept=list(found.foreign))

    def done(kind: str, ident: str) -> None:
        result.deleted.append({"kind": kind, "id": ident})

    for policy in found.policies:
        asg.delete_policy(aws, str(policy["AutoScalingGroupName"]), str(policy["PolicyName"]))
        done("scaling-policy", str(policy["PolicyName"]))
    for group in (found.group, found.rollout_group):  # both groups of an open rollout
        if group is not None:
            asg.delete_group(aws, str(group["AutoScalingGroupName"]), sleep=sleep, timeout=timeout,
                             already_deleting=group.get("Status") == "Delete in progress")
            done("auto-scaling-group", str(group["AutoScalingGroupName"]))
    for listener in found.listeners:
        elb.delete_listener(aws, str(listener["ListenerArn"]))
        done("listener", str(listener["ListenerArn"]))
    if found.load_balancer is not None:
        elb.delete_load_balancer(aws, str(found.load_balancer["LoadBalancerArn"]), sleep=sleep, timeout=timeout)
        done("load-balancer", str(found.load_balancer["LoadBalancerArn"]))
    if found.target_group is not None:
        elb.delete_target_group(aws, str(found.target_group["TargetGroupArn"]), sleep=sleep, timeout=timeout)
        done("target-group", str(found.target_group["TargetGroupArn"]))
    for template in found.launch_templates:
        aws.call("ec2", "delete_launch_template", LaunchTemplateId=template["LaunchTemplateId"])
        done("launch-template", str(template["LaunchTemplateId"]))
    groups = sorted(found.security_groups, key=_group_rank)
    for group in groups:  # a group named in another group's rule cannot be deleted: drop those rules first
        _revoke_group_rules(aws, group)
    for group in groups:
        delete_security_group(aws, str(group["GroupId"]), sleep=sleep, timeout=timeout)
        done("security-group", str(group["GroupId"]))
    if found.instance_profile is not None:
        iam.delete_instance_profile(aws, names.instance_profile,
                                    [str(r["RoleName"]) for r in found.instance_profile.get("Roles", [])])
        done("instance-profile", names.instance_profile)
    if found.role is not None:
        iam.delete_role(aws, names.role)
        done("iam-role", names.role)
    if aws.unlooked is None:
        _assets(aws, names, done)
    return result


def _assets(aws: AwsSession, names: FleetNames, done: Callable[[str, str], None]) -> None:
    """The fleet's prefix in the account's asset bucket (every version); never the bucket, never another prefix."""
    bucket, removed = delete_owned_prefix(aws, names.asset_prefix)
    if removed:
        done("assets", f"s3://{bucket}/{names.asset_prefix} ({removed} object versions)")

def _group_rank(group: dict[str, Any]) -> int:
    component = tags.as_dict(group.get("Tags")).get(tags.COMPONENT, "")
    return _GROUP_ORDER.index(component) if component in _GROUP_ORDER else len(_GROUP_ORDER)


def _revoke_group_rules(aws: AwsSession, group: dict[str, Any]) -> None:
    for key, operation in (("IpPermissions", "revoke_security_group_ingress"),
                           ("IpPermissionsEgress", "revoke_security_group_egress")):
        rules = [{"IpProtocol": p["IpProtocol"], **({"FromPort": p["FromPort"], "ToPort": p["ToPort"]}
                                                    if "FromPort" in p else {}),
                  # as described: moto matches the description too (AWS ignores it)
                  "UserIdGroupPairs": [{k: pair[k] for k in ("GroupId", "UserId", "Description") if k in pair}
                                       for pair in p["UserIdGroupPairs"]]}
                 for p in group.get(key, []) if p.get("UserIdGroupPairs")]
        if rules:
            aws.call("ec2", operation, GroupId=group["GroupId"], IpPermissions=rules)
