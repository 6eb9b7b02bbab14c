"""Security groups: find-or-create with CIDR rules (``ec2 launch``), per-fleet groups with
group-to-group rules (``fleet create``), and deletion that waits out DependencyViolation.

A rule names its source as a CIDR or as another security group; a group-sourced
rule is how a fleet keeps its instances reachable from its load balancer only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

from mmsctl.cloud.aws import tags
from mmsctl.cloud.aws.network import Placement
from mmsctl.cloud.aws.session import AwsSession
from mmsctl.cloud.aws.made import Made
from mmsctl.errors import CloudError, UsageError

#: Narrower than this, a source is someone's network; this wide or wider, it is "anyone" (a /7 is 33 M addresses).
_WORLD_PREFIX = {4: 8, 6: 16}


class WorldOpenSsh(UsageError):
    """SSH from the whole internet: scanned within minutes of launch, so only on purpose."""

    reference = "cloud-world-open-ssh"


def check_ssh_sources(cidrs: Sequence[str], *, allow_world: bool, param: str) -> list[str]:
    """The CIDRs checked: valid networks, and none as wide as the internet unless *allow_world*.

    Raises:
        UsageError: not a network (``param``).
        WorldOpenSsh: 0.0.0.0/0, ::/0 or anything wider than a /8 (/16 for IPv6), not asked for on purpose.
    """
    import ipaddress

    checked = []
    for cidr in cidrs:
        try:
            network = ipaddress.ip_network(cidr.strip(), strict=True)
        except ValueError as exc:
            raise UsageError(f"SSH CIDR {cidr!r}: {exc}", param=param) from None
        if network.prefixlen < _WORLD_PREFIX[network.version] and not allow_world:
            reach = "the whole internet" if network.prefixlen == 0 else f"a /{network.prefixlen}, most of the internet"
            raise WorldOpenSsh(f"{network} opens SSH to {reach}", params=(param, "allow_world_ssh"))
        checked.append(str(network))
    return checked

__all__ = [
    "Rule",
    "WorldOpenSsh",
    "check_ssh_sources",
    "create_security_group",
    "delete_security_group",
    "ensure_security_group",
    "restrict_egress",
]


@dataclass(frozen=True)
class Rule:
    """TCP *port* from (ingress) or to (egress) a CIDR or another security group."""

    port: int
    cidr: Optional[str] = None
    group_id: Optional[str] = None
    description: str = ""

    def permission(self) -> dict[str, Any]:
        """The rule as one EC2 ``IpPermissions`` entry."""
        perm: dict[str, Any] = {"IpProtocol": "tcp", "FromPort": self.port, "ToPort": self.port}
        source: dict[str, str] = {"Description": self.description} if self.description else {}
        if self.group_id:
            perm["UserIdGroupPairs"] = [{"GroupId": self.group_id, **source}]
        else:
            perm["IpRanges"] = [{"CidrIp": self.cidr or "", **source}]
        return perm


def ensure_security_group(
    aws: AwsSession,
    placement: Placement,
    *,
    name: str,
    component: str,
    description: str,
    ports: tuple[int, ...],
    cidrs: tuple[str, ...],
    created: list[str],
    reused: list[str],
) -> str:
    """Our group *component* in the VPC (created if missing), with TCP *ports* open to *cidrs*."""
    found = aws.call("ec2", "describe_security_groups", Filters=[
        {"Name": "vpc-id", "Values": [placement.vpc_id]}, *tags.managed_filter(component),
    ])["SecurityGroups"]
    if found:
        group = found[0]
        group_id = str(group["GroupId"])
        reused.append(f"security group {group_id} ({name})")
        existing = _open_rules(group.get("IpPermissions", []))
    else:
        group_id = str(aws.call(
            "ec2", "create_security_group", GroupName=name, Description=description, VpcId=placement.vpc_id,
            TagSpecifications=[tags.tag_spec("security-group", tags.base_tags(component, name))],
        )["GroupId"])
        created.append(Made(f"security group {group_id} ({name})", kind="security-group", id=group_id))
        existing = set()
    missing = [(port, cidr) for port in ports for cidr in cidrs if (port, cidr) not in existing]
    if missing:
        aws.call("ec2", "authorize_security_group_ingress", GroupId=group_id, IpPermissions=[
            {"IpProtocol": "tcp", "FromPort": port, "ToPort": port,
             "IpRanges": [{"CidrIp": cidr, "Description": f"mmsctl: {description.split(': ', 1)[-1]}"}]}
            for port, cidr in missing
        ])
    return group_id


def _open_rules(permissions: list[dict[str, Any]]) -> set[tuple[int, str]]:
    rules = set()
    for perm in permissions:
        if perm.get("IpProtocol") not in ("tcp", "-1"):
            continue
        for rng in perm.get("IpRanges", []):
            low, high = perm.get("FromPort", 0), perm.get("ToPort", 65535)
            for port in (443, 22, 8080, 8081, 8082):
                if low <= port <= high:
                    rules.add((port, rng.get("CidrIp", "")))
    return rules


def create_security_group(aws: AwsSession, *, vpc_id: str, name: str, description: str,
                          group_tags: Mapping[str, str], ingress: Sequence[Rule] = ()) -> str:
    """A new group in *vpc_id*, tagged in the same call, with *ingress* rules."""
    group_id = str(aws.call(
        "ec2", "create_security_group", GroupName=name, Description=description, VpcId=vpc_id,
        TagSpecifications=[tags.tag_spec("security-group", group_tags)],
    )["GroupId"])
    if ingress:
        aws.call("ec2", "authorize_security_group_ingress", GroupId=group_id,
                 IpPermissions=[r.permission() for r in ingress])
    return group_id


def restrict_egress(aws: AwsSession, group_id: str, egress: Sequence[Rule]) -> None:
    """Replace a new group's allow-all egress with *egress* only."""
    aws.call("ec2", "revoke_security_group_egress", GroupId=group_id,
             IpPermissions=[{"IpProtocol": "-1", "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}])
    if egress:
        aws.call("ec2", "authorize_security_group_egress", GroupId=group_id,
                 IpPermissions=[r.permission() for r in egress])


def delete_security_group(aws: AwsSession, group_id: str, *, sleep: Callable[[float], None] = time.sleep,
                          timeout: float = 300.0, interval: float = 10.0) -> None:
    """Delete a group, retrying while AWS still reports a dependency (network interfaces take a
    while to go after their instance, endpoint or load balancer; a rule in another group that
    names this one must be gone first)."""
    waited = 0.0
    while True:
        try:
            aws.call("ec2", "delete_security_group", GroupId=group_id)
            return
        except CloudError as exc:
            if "DependencyViolation" not in exc.message or waited >= timeout:
                raise
            sleep(interval)
            waited += interval
