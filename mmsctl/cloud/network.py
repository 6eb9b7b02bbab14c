"""Where an instance goes: the subnet (given, or the default VPC's first) and its VPC."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from mmsctl.cloud._session import AwsSession
from mmsctl.errors import CloudError

__all__ = ["Placement", "resolve_placement"]


@dataclass(frozen=True)
class Placement:
    """A subnet and the VPC it belongs to."""

    subnet_id: str
    vpc_id: str
    vpc_cidr: str
    availability_zone: str


def resolve_placement(aws: AwsSession, subnet: Optional[str]) -> Placement:
    """The ``--subnet`` given, else the default VPC's default subnet in the first availability zone."""
    if subnet:
        subnets = aws.call("ec2", "describe_subnets", SubnetIds=[subnet])["Subnets"]
    else:
        vpcs = aws.call("ec2", "describe_vpcs", Filters=[{"Name": "isDefault", "Values": ["true"]}])["Vpcs"]
        if not vpcs:
            raise CloudError(f"no default VPC in {aws.region}; pass --subnet subnet-…")
        subnets = aws.call("ec2", "describe_subnets", Filters=[
            {"Name": "vpc-id", "Values": [vpcs[0]["VpcId"]]},
            {"Name": "default-for-az", "Values": ["true"]},
        ])["Subnets"]
        if not subnets:
            raise CloudError(f"the default VPC in {aws.region} has no default subnet; pass --subnet subnet-…")
        subnets.sort(key=lambda s: (s.get("AvailabilityZone", ""), s["SubnetId"]))
    chosen = subnets[0]
    vpc = aws.call("ec2", "describe_vpcs", VpcIds=[chosen["VpcId"]])["Vpcs"][0]
    return Placement(chosen["SubnetId"], chosen["VpcId"], vpc["CidrBlock"], chosen.get("AvailabilityZone", ""))
