"""Elastic Load Balancing (v2) for a fleet: the Application Load Balancer, its listeners, the
target group and its health check; found by name, deleted in order, waited for.

Every function takes an :class:`~mmsctl.cloud.aws.session.AwsSession`; lookups return
None for something that is not there, so callers can be idempotent.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

from mmsctl.cloud.aws import tags
from mmsctl.cloud.aws.errors import ResourceNotFound
from mmsctl.cloud.aws.session import AwsSession
from mmsctl.errors import CloudError

__all__ = [
    "DEREGISTRATION_DELAY_S",
    "TLS_POLICY",
    "HealthCheck",
    "Listener",
    "create_listeners",
    "create_load_balancer",
    "create_target_group",
    "delete_listener",
    "delete_load_balancer",
    "delete_target_group",
    "endpoint_url",
    "find_load_balancer",
    "find_target_group",
    "listeners_of",
    "resource_label",
    "set_health_check_path",
    "tags_of",
    "target_health",
]

#: TLS 1.3 and 1.2 only (the ELB guide's recommended policy for new HTTPS listeners).
TLS_POLICY = "ELBSecurityPolicy-TLS13-1-2-2021-06"
#: Predictions are short; AWS's default of 300 s would hold a scale-in for five minutes.
DEREGISTRATION_DELAY_S = 30


@dataclass(frozen=True)
class HealthCheck:
    """How the target group decides a member is healthy: ``GET path`` must answer *matcher*."""

    path: str
    interval_s: int = 15
    timeout_s: int = 5
    healthy_threshold: int = 2
    unhealthy_threshold: int = 3
    matcher: str = "200"


@dataclass(frozen=True)
class Listener:
    protocol: str
    port: int
    arn: str
    action: str  # forward | redirect

    def to_dict(self) -> dict[str, Any]:
        return {"protocol": self.protocol, "port": self.port, "action": self.action, "arn": self.arn}


def create_target_group(aws: AwsSession, *, name: str, vpc_id: str, port: int, health: HealthCheck,
                        group_tags: Mapping[str, str]) -> str:
    """An HTTP target group of instances on *port*, checked with *health*; its ARN."""
    group = aws.call(
        "elbv2", "create_target_group", Name=name, Protocol="HTTP", ProtocolVersion="HTTP1", Port=port,
        VpcId=vpc_id, TargetType="instance", HealthCheckEnabled=True, HealthCheckProtocol="HTTP",
        HealthCheckPort="traffic-port", HealthCheckPath=health.path,
        HealthCheckIntervalSeconds=health.interval_s, HealthCheckTimeoutSeconds=health.timeout_s,
        HealthyThresholdCount=health.healthy_threshold, UnhealthyThresholdCount=health.unhealthy_threshold,
        Matcher={"HttpCode": health.matcher}, Tags=tags.tag_list(group_tags),
    )["TargetGroups"][0]
    arn = str(group["TargetGroupArn"])
    aws.call("elbv2", "modify_target_group_attributes", TargetGroupArn=arn, Attributes=[
        {"Key": "deregistration_delay.timeout_seconds", "Value": str(DEREGISTRATION_DELAY_S)}])
    return arn


def set_health_check_path(aws: AwsSession, target_group_arn: str, path: str) -> None:
    """Point the target group's health check at *path* (the rest of the check stays)."""
    aws.call("elbv2", "modify_target_group", TargetGroupArn=target_group_arn, HealthCheckPath=path)


def create_load_balancer(aws: AwsSession, *, name: str, subnet_ids: list[str], security_group_id: str,
                         internal: bool, lb_tags: Mapping[str, str]) -> dict[str, Any]:
    """An Application Load Balancer over *subnet_ids*; AWS's description of it (ARN, DNS name)."""
    return dict(aws.call(
        "elbv2", "create_load_balancer", Name=name, Subnets=subnet_ids, SecurityGroups=[security_group_id],
        Scheme="internal" if internal else "internet-facing", Type="application", IpAddressType="ipv4",
        Tags=tags.tag_list(lb_tags),
    )["LoadBalancers"][0])


def create_listeners(aws: AwsSession, *, lb_arn: str, target_group_arn: str, certificate_arn: Optional[str],
                     listener_tags: Mapping[str, str]) -> list[Listener]:
    """HTTP :80 forwarding to the targets; with a certificate, HTTPS :443 forwarding and :80 redirecting to it."""
    forward = [{"Type": "forward", "TargetGroupArn": target_group_arn}]
    listeners = []
    if certificate_arn:
        arn = aws.call("elbv2", "create_listener", LoadBalancerArn=lb_arn, Protocol="HTTPS", Port=443,
                       Certificates=[{"CertificateArn": certificate_arn}], SslPolicy=TLS_POLICY,
                       DefaultActions=forward, Tags=tags.tag_list(listener_tags))["Listeners"][0]["ListenerArn"]
        listeners.append(Listener("HTTPS", 443, str(arn), "forward"))
        redirect = [{"Type": "redirect", "RedirectConfig": {"Protocol": "HTTPS", "Port": "443",
                                                            "StatusCode": "HTTP_301"}}]
        arn = aws.call("elbv2", "create_listener", LoadBalancerArn=lb_arn, Protocol="HTTP", Port=80,
                       DefaultActions=redirect, Tags=tags.tag_list(listener_tags))["Listeners"][0]["ListenerArn"]
        listeners.append(Listener("HTTP", 80, str(arn), "redirect"))
    else:
        arn = aws.call("elbv2", "create_listener", LoadBalancerArn=lb_arn, Protocol="HTTP", Port=80,
                       DefaultActions=forward, Tags=tags.tag_list(listener_tags))["Listeners"][0]["ListenerArn"]
        listeners.append(Listener("HTTP", 80, str(arn), "forward"))
    return listeners


def endpoint_url(dns_name: str, https: bool) -> str:
    """What clients call: the balancer's DNS name over HTTPS when it has a certificate."""
    return f"{'https' if https else 'http'}://{dns_name}"


def resource_label(lb_arn: str, target_group_arn: str) -> str:
    """The ``ResourceLabel`` of an ALBRequestCountPerTarget policy: ``app/…/…/targetgroup/…/…``."""
    return f"{lb_arn.split(':loadbalancer/', 1)[-1]}/{target_group_arn.split(':', 5)[-1]}"


def find_load_balancer(aws: AwsSession, name: str) -> Optional[dict[str, Any]]:
    try:
        found = aws.call("elbv2", "describe_load_balancers", Names=[name])["LoadBalancers"]
    except ResourceNotFound:
        return None
    return dict(found[0]) if found else None


def find_target_group(aws: AwsSession, name: str) -> Optional[dict[str, Any]]:
    try:
        found = aws.call("elbv2", "describe_target_groups", Names=[name])["TargetGroups"]
    except ResourceNotFound:
        return None
    return dict(found[0]) if found else None


def tags_of(aws: AwsSession, arns: list[str]) -> dict[str, dict[str, str]]:
    """Tags per ARN (load balancers, target groups, listeners; at most 20 per call)."""
    result: dict[str, dict[str, str]] = {}
    for i in range(0, len(arns), 20):
        answer = aws.call("elbv2", "describe_tags", ResourceArns=arns[i:i + 20])
        for item in answer.get("TagDescriptions", []):
            result[str(item["ResourceArn"])] = tags.as_dict(item.get("Tags"))
    return result


def listeners_of(aws: AwsSession, lb_arn: str) -> list[dict[str, Any]]:
    return aws.paginate("elbv2", "describe_listeners", "Listeners", LoadBalancerArn=lb_arn)


def target_health(aws: AwsSession, target_group_arn: str) -> list[dict[str, Any]]:
    """Each registered target: instance id, port and state (initial, healthy, unhealthy, draining, unused…)."""
    answer = aws.call("elbv2", "describe_target_health", TargetGroupArn=target_group_arn)
    return [{"id": d.get("Target", {}).get("Id"), "port": d.get("Target", {}).get("Port"),
             "state": d.get("TargetHealth", {}).get("State"), "reason": d.get("TargetHealth", {}).get("Reason"),
             "description": d.get("TargetHealth", {}).get("Description")}
            for d in answer.get("TargetHealthDescriptions", [])]


def delete_listener(aws: AwsSession, arn: str) -> None:
    aws.call("elbv2", "delete_listener", ListenerArn=arn)


def delete_load_balancer(aws: AwsSession, arn: str, *, sleep: Callable[[float], None] = time.sleep,
                         timeout: float = 300.0) -> None:
    """Delete the balancer and wait until AWS no longer lists it (its network interfaces go after)."""
    aws.call("elbv2", "delete_load_balancer", LoadBalancerArn=arn)
    if aws.dry_run:
        return
    waited = 0.0
    while True:
        try:
            if not aws.call("elbv2", "describe_load_balancers", LoadBalancerArns=[arn])["LoadBalancers"]:
                return
        except ResourceNotFound:
            return
        if waited >= timeout:
            raise CloudError(f"load balancer {arn} still exists {timeout:g}s after DeleteLoadBalancer",
                             hint="run the command again; it picks up where it stopped")
        sleep(5.0)
        waited += 5.0


def delete_target_group(aws: AwsSession, arn: str, *, sleep: Callable[[float], None] = time.sleep,
                        timeout: float = 120.0) -> None:
    """Delete the target group, retrying while AWS still counts it in use by a balancer being deleted."""
    waited = 0.0
    while True:
        try:
            aws.call("elbv2", "delete_target_group", TargetGroupArn=arn)
            return
        except ResourceNotFound:
            return
        except CloudError as exc:
            if "ResourceInUse" not in exc.message or waited >= timeout:
                raise
            sleep(5.0)
            waited += 5.0
