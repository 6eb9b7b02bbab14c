"""Where instances go: one subnet and its VPC (``ec2 launch``), or several subnets across
availability zones (``fleet create``: a load balancer needs two zones at least)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from mmsctl.cloud.aws.session import AwsSession
from mmsctl.errors import CloudError, UsageError

__all__ = ["Network", "Placement", "resolve_network", "resolve_placement"]


@dataclass(frozen=True)
class Placement:
    """A subnet and the VPC it belongs to."""

    subnet_id: str
    vpc_id: str
    vpc_cidr: str
    availability_zone: str


@dataclass(frozen=True)
class Network:
    """Subnets in one VPC, in availability-zone order."""

    vpc_id: str
    vpc_cidr: str
    subnets: tuple[Placement, ...]

    @property
    def subnet_ids(self) -> list[str]:
        return [s.subnet_id for s in self.subnets]

    @property
    def zones(self) -> list[str]:
        return sorted({s.availability_zone for s in self.subnets})


def _default_subnets(aws: AwsSession, param: str = "subnet") -> list[dict[str, Any]]:
    """The default VPC's default subnets (one per availability zone), sorted by zone.

    *param* is the argument that would have named the subnets instead.
    """
    vpcs = aws.call("ec2", "describe_vpcs", Filters=[{"Name": "isDefault", "Values": ["true"]}])["Vpcs"]
    if not vpcs:
        raise CloudError(f"no default VPC in {aws.region}; name a subnet (subnet-…)", param=param)
    subnets: list[dict[str, Any]] = aws.call("ec2", "describe_subnets", Filters=[
        {"Name": "vpc-id", "Values": [vpcs[0]["VpcId"]]},
        {"Name": "default-for-az", "Values": ["true"]},
    ])["Subnets"]
    if not subnets:
        raise CloudError(f"the default VPC in {aws.region} has no default subnet; name a subnet (subnet-…)",
                         param=param)
    subnets.sort(key=lambda s: (s.get("AvailabilityZone", ""), s["SubnetId"]))
    return subnets


def resolve_placement(aws: AwsSession, subnet: Optional[str]) -> Placement:
    """The ``--subnet`` given, else the default VPC's default subnet in the first availability zone."""
    if subnet:
        subnets = aws.call("ec2", "describe_subnets", SubnetIds=[subnet])["Subnets"]
    else:
        subnets = _default_subnets(aws)
    chosen = subnets[0]
    vpc = aws.call("ec2", "describe_vpcs", VpcIds=[chosen["VpcId"]])["Vpcs"][0]
    return Placement(chosen["SubnetId"], chosen["VpcId"], vpc["CidrBlock"], chosen.get("AvailabilityZone", ""))


def resolve_network(aws: AwsSession, subnets: Optional[list[str]] = None, *, min_zones: int = 2) -> Network:
    """The ``--subnets`` given (one VPC), else every default subnet of the default VPC.

    Raises:
        UsageError: subnets in different VPCs, or fewer than *min_zones* availability zones
            (an Application Load Balancer needs two).
    """
    found = (aws.call("ec2", "describe_subnets", SubnetIds=list(dict.fromkeys(subnets)))["Subnets"]
             if subnets else _default_subnets(aws, "subnets"))
    vpc_ids = sorted({s["VpcId"] for s in found})
    if len(vpc_ids) != 1:
        raise UsageError(f"the subnets must all be in one VPC; they are in {', '.join(vpc_ids)}", param="subnets")
    vpc = aws.call("ec2", "describe_vpcs", VpcIds=vpc_ids)["Vpcs"][0]
    placements = tuple(sorted(
        (Placement(s["SubnetId"], s["VpcId"], vpc["CidrBlock"], s.get("AvailabilityZone", "")) for s in found),
        key=lambda p: (p.availability_zone, p.subnet_id),
    ))
    network = Network(vpc_ids[0], vpc["CidrBlock"], placements)
    if len(network.zones) < min_zones:
        raise UsageError(f"a load balancer needs subnets in {min_zones} availability zones at least; "
                         f"got {', '.join(network.zones) or 'none'}",
                         param="subnets", hint="give one subnet in each of two or more zones")
    return network
