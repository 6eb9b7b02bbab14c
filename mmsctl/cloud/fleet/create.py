"""``fleet create``: the resource graph of one fleet, made in dependency order.

    iam role + instance profile      Session Manager (+ Elastic Inference) permissions
    security groups                  lb: 80/443 from the internet (the VPC with --internal),
                                          egress only to the instances' inference port
                                     admin: no rules; its members may reach the management port
                                     instances: 8080 from lb only, 8081 from admin only, 22 from --ssh-cidr
    launch template                  what `ec2 launch` boots (AMI, type, boot script, EI), IMDSv2
    target group                     HTTP :8080, health check GET /v2/health/ready (/ping for MMS)
    load balancer + listeners        HTTP :80 (HTTPS :443 and a redirect with --certificate-arn)
    auto scaling group               over the subnets, ELB health checks, the launch lifecycle hook
    target-tracking policy           ALBRequestCountPerTarget

Everything is tagged ``mmsctl:fleet=NAME``. If a step fails, what was made stays
and the error says so: ``fleet destroy NAME`` removes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from mmsctl.cloud.aws import tags
from mmsctl.cloud.aws.iam import SESSION_MANAGER_POLICY, ensure_instance_role
from mmsctl.cloud.aws.network import Network, resolve_network
from mmsctl.cloud.aws.security_groups import Rule, check_ssh_sources, create_security_group, restrict_egress
from mmsctl.cloud.aws.session import AwsSession, partition
from mmsctl.cloud.fleet import asg, elb
from mmsctl.cloud.fleet.names import IAM_PATH, FleetNames, check_name
from mmsctl.cloud.fleet.query import find_resources
from mmsctl.cloud.instance.accelerators import AcceleratorChoice, check_ei_region
from mmsctl.cloud.instance.ei import EI_POLICY_NAME, ei_policy, ensure_ei_network
from mmsctl.cloud.instance.server_image import (
    INFERENCE_PORT,
    MANAGEMENT_PORT,
    METADATA_OPTIONS,
    READY_PATH,
    ServerImage,
    server_image,
)
from mmsctl.cloud.instance.assets import AssetPlan, assets_ref, plan_assets, stage_assets
from mmsctl.cloud.instance.boot_status import BOOT_STATUS_POLICY_NAME, boot_status_policy
from mmsctl.cloud.instance.userdata import AssetsRef, LifecycleHook, ModelSpec, ServerKind
from mmsctl.cloud.instance.wheelhouse import build_wheelhouse, check_python
from mmsctl.errors import CloudError, MmsError, UsageError

__all__ = ["CreateResult", "FleetRequest", "create", "health_check_path", "launch_hook", "lifecycle_policy"]

SESSION_MANAGER_POLICY_NAME = "mmsctl-session-manager"
ASSETS_POLICY_NAME = "mmsctl-boot-assets"
LIFECYCLE_POLICY_NAME = "mmsctl-complete-lifecycle"
#: Requests per second per instance is what `mmsctl bench` measures; AWS's metric counts per minute.
MAX_TARGET_RPS = 100_000.0


@dataclass
class FleetRequest:
    """What ``mmsctl fleet create`` was asked for."""

    name: str
    models: list[ModelSpec]
    accelerator: AcceleratorChoice
    instance_type: Optional[str] = None
    ami: Optional[str] = None
    min_size: int = 2
    max_size: int = 10
    desired: Optional[int] = None
    target_requests_per_instance: float = 10.0  # requests per second
    subnets: list[str] = field(default_factory=list)
    internal: bool = False
    certificate_arn: Optional[str] = None
    key_name: Optional[str] = None
    ssh_cidrs: list[str] = field(default_factory=list)
    allow_world_ssh: bool = False
    server: ServerKind = "mmsctl"
    pip_spec: Optional[str] = None
    health_check_path: Optional[str] = None
    grace_s: int = asg.HEALTH_GRACE_S  # follows the measured boot (asg.py)
    warm_pool: int = 0  # instances kept booted and stopped for fast scale-out
    instance_python: str = "3.10"  # the AMI's python3: the wheelhouse is built for it

    def check(self) -> None:
        """Refuse what AWS would refuse later (or what would cost money by mistake), before any call."""
        check_name(self.name)
        if not self.models:
            raise UsageError("a fleet needs models: the balancer's health check asks a model", param="models")
        desired = self.desired if self.desired is not None else self.min_size
        if not 1 <= self.min_size <= desired <= self.max_size <= asg.MAX_GROUP_SIZE:
            raise UsageError(f"sizes must satisfy 1 <= min ({self.min_size}) <= desired ({desired}) "
                             f"<= max ({self.max_size}) <= {asg.MAX_GROUP_SIZE}",
                             params=("min_size", "desired", "max_size"))
        if not 0 < self.target_requests_per_instance <= MAX_TARGET_RPS:
            raise UsageError(f"the target requests per instance must be above 0 and at most {MAX_TARGET_RPS:g} "
                             "requests per second", param="target_requests_per_instance")
        if not 0 <= self.warm_pool <= self.max_size:
            raise UsageError(f"a warm pool of {self.warm_pool} must be 0 to the group's max ({self.max_size})",
                             params=("warm_pool", "max_size"))
        if not 0 <= self.grace_s <= 7200:
            raise UsageError("the health check grace period must be 0 to 7200 seconds", param="grace_s")
        self.ssh_cidrs = check_ssh_sources(self.ssh_cidrs, allow_world=self.allow_world_ssh, param="ssh_cidrs")
        if self.certificate_arn is not None and not self.certificate_arn.startswith("arn:"):
            raise UsageError(f"the certificate must be an ACM or IAM certificate ARN, not {self.certificate_arn!r}",
                             param="certificate_arn")
        path = self.health_check_path
        if path is not None and (not path.startswith("/") or len(path) > 1024
                                 or any(ch.isspace() or ord(ch) < 32 for ch in path)):
            raise UsageError(f"the health check path must be a path such as /ping/MODEL, not {path!r}",
                             param="health_check_path")


def health_check_path(req: FleetRequest) -> str:
    """The target group's check: the mmsctl server's readiness on mmsctl servers.

    mmsctl answers ``/v2/health/ready`` with 503 while a model it booted with has no
    ready worker, so the balancer stops sending it traffic and the ELB health check
    has the group replace the instance. The path names no model, so one check holds
    for any model set: a rollout's old and new groups share the target group. MMS
    1.1.11 answers every ``/ping…`` with 200, even ``{"status": "Unhealthy"}``, so for
    ``--server mms`` the check can only see the front end answer (docs/fleet.md).
    """
    if req.health_check_path:
        return req.health_check_path
    return READY_PATH if req.server == "mmsctl" else "/ping"


def lifecycle_policy(aws: AwsSession, names: FleetNames) -> dict[str, Any]:
    """The role's permission to complete the launch action on the fleet's two group names (blue/green)."""
    return asg.complete_lifecycle_policy(partition(aws.region), aws.region, aws.account_id(), names.group_names)


def launch_hook() -> dict[str, Any]:
    """What the launch hook every fleet group gets does, as shown to users."""
    return {"name": asg.LAUNCH_HOOK, "heartbeat_timeout_s": asg.LAUNCH_HOOK_TIMEOUT_S,
            "default_result": asg.LAUNCH_HOOK_DEFAULT}


@dataclass
class CreateResult:
    """What ``create`` made (or, in a dry run, would make)."""

    name: str
    region: str
    endpoint: str
    instance_type: str
    accelerator: str
    ami: str
    health_check_path: str
    lifecycle_hook: dict[str, Any]
    listeners: list[dict[str, Any]]
    min_size: int
    max_size: int
    desired: int
    target_requests_per_minute: float
    resources: list[dict[str, str]] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "region": self.region, "endpoint": self.endpoint,
            "instance_type": self.instance_type, "accelerator": self.accelerator, "ami": self.ami,
            "health_check_path": self.health_check_path, "lifecycle_hook": self.lifecycle_hook,
            "listeners": self.listeners,
            "min": self.min_size, "max": self.max_size, "desired": self.desired,
            "target_requests_per_minute": self.target_requests_per_minute,
            "resources": self.resources, "reused": self.reused, "warnings": self.warnings,
        }


def create(aws: AwsSession, req: FleetRequest) -> CreateResult:
    """Make the fleet's resources in order; see the module docstring for the graph.

    Raises:
        UsageError: a bad name, size, CIDR, path, or fewer than two availability zones.
        CloudError: the fleet exists already, or AWS refused a call (the hint says how to clean up).
    """
    req.check()
    names = FleetNames(req.name)
    existing = find_resources(aws, req.name)
    if existing.foreign:
        raise CloudError(f"names of fleet {req.name!r} are taken by resources not tagged "
                         f"mmsctl:fleet={req.name}: {', '.join(existing.foreign)}",
                         hint="choose another fleet name; mmsctl never changes what it did not make")
    if existing.any():
        raise CloudError(f"fleet {req.name!r} already exists in {aws.region} ({existing.summary()})",
                         hint=f"`mmsctl fleet describe {req.name}`; `fleet scale` resizes it, "
                              f"`fleet destroy {req.name}` removes it")
    if req.accelerator.is_ei and not aws.region.startswith("<"):
        check_ei_region(aws.region)  # before the wheels and the models are prepared here
    plan, ref = _assets(aws, req)
    image = server_image(aws, req.accelerator, models=plan.models if plan else req.models, server=req.server,
                         ami=req.ami, instance_type=req.instance_type, pip_spec=req.pip_spec,
                         management_host="0.0.0.0", assets=ref,
                         lifecycle_hook=LifecycleHook(FleetNames(req.name).auto_scaling_group, asg.LAUNCH_HOOK))
    network = resolve_network(aws, req.subnets)
    made: list[dict[str, str]] = []
    reused: list[str] = []
    try:
        return _create(aws, req, names, image, network, made, reused, plan)
    except MmsError as exc:
        if not aws.dry_run:
            exc.hint = (f"{exc.hint}; " if exc.hint else "") + (
                f"{len(made)} resource(s) of the fleet were made before this: "
                f"`mmsctl fleet destroy {req.name}` removes whatever exists")
        raise


def _assets(aws: AwsSession, req: FleetRequest) -> tuple[Optional[AssetPlan], Optional[AssetsRef]]:
    """The assets plan (wheels built here, before any EC2 call) and where the boot script fetches them;
    none for MMS or an explicit pip spec (those install from the package index)."""
    if req.server != "mmsctl" or req.pip_spec:
        return None, None
    python = check_python(req.instance_python)
    wheelhouse = None if aws.dry_run else build_wheelhouse(python)
    plan = plan_assets(req.models, FleetNames(req.name).asset_prefix, wheelhouse=wheelhouse, dry_run=aws.dry_run)
    return plan, assets_ref(aws, plan, python)


def _create(aws: AwsSession, req: FleetRequest, names: FleetNames, image: ServerImage, network: Network,
            made: list[dict[str, str]], reused: list[str], plan: Optional[AssetPlan]) -> CreateResult:
    """The steps in dependency order; each appends what it made to *made* as soon as it exists."""
    build = _Build(aws, req, names, network, made, reused)
    if plan is not None:
        made_here: list[str] = []
        staged = stage_assets(aws, plan, req.instance_python, made_here, reused)
        made += [{"kind": "s3-bucket", "id": m.split()[-1]} for m in made_here]
        made.append({"kind": "assets", "id": f"s3://{staged.ref.bucket}/{plan.prefix}",
                     "name": f"{len(staged.uploaded)} uploaded, {len(staged.unchanged)} unchanged"})
        build.asset_policy = staged.policy
    profile_arn = build.role()
    lb_sg, group_ids = build.security_groups()
    facts = {tags.ACCELERATOR: req.accelerator.label, tags.MODELS: ",".join(m.arg for m in req.models),
             tags.SERVER: req.server, tags.INSTANCE_TYPE: image.instance_type}
    if plan is not None:
        facts[tags.INSTANCE_PYTHON] = check_python(req.instance_python)
    template_id = build.launch_template(image, profile_arn, group_ids, facts)
    balancer = build.balancer(lb_sg)
    desired, per_minute = build.group(template_id, balancer, facts)
    return CreateResult(
        name=req.name, region=aws.region, endpoint=elb.endpoint_url(balancer.dns_name, bool(req.certificate_arn)),
        instance_type=image.instance_type, accelerator=req.accelerator.label, ami=image.ami.image_id,
        health_check_path=balancer.health_check_path, lifecycle_hook=launch_hook(),
        listeners=[li.to_dict() for li in balancer.listeners],
        min_size=req.min_size, max_size=req.max_size, desired=desired, target_requests_per_minute=per_minute,
        resources=made, reused=reused, warnings=list(image.warnings),
    )


@dataclass(frozen=True)
class _Balancer:
    """What step 4 made and the later steps and the result name."""

    arn: str
    dns_name: str
    target_group_arn: str
    health_check_path: str
    listeners: list[elb.Listener]


@dataclass
class _Build:
    """One fleet being made: what every step needs, and the list of what exists so far (for the hint on failure)."""

    aws: AwsSession
    req: FleetRequest
    names: FleetNames
    network: Network
    made: list[dict[str, str]]
    reused: list[str]
    asset_policy: Optional[dict[str, Any]] = None

    def tagged(self, component: str, name: str, facts: Optional[dict[str, str]] = None) -> dict[str, str]:
        return tags.fleet_tags(self.req.name, component, name, facts)

    def role(self) -> str:
        """1. The instances' role and profile (its ARN): first, so IAM has propagated by the time the group launches."""
        names = self.names
        policies: dict[str, Any] = {SESSION_MANAGER_POLICY_NAME: SESSION_MANAGER_POLICY,
                                    LIFECYCLE_POLICY_NAME: lifecycle_policy(self.aws, names),
                                    BOOT_STATUS_POLICY_NAME: boot_status_policy(
                                        self.aws.region, {tags.FLEET: self.req.name})}
        if self.req.accelerator.is_ei:
            policies[EI_POLICY_NAME] = ei_policy(self.aws)
        if self.asset_policy is not None:
            policies[ASSETS_POLICY_NAME] = self.asset_policy
        profile_arn = ensure_instance_role(
            self.aws, role_name=names.role, profile_name=names.instance_profile, path=IAM_PATH,
            description=f"mmsctl fleet {self.req.name}: model-server instances", policies=policies,
            role_tags=self.tagged(tags.FLEET_ROLE, names.role),
            profile_tags=self.tagged(tags.FLEET_INSTANCE_PROFILE, names.instance_profile),
            created=[], reused=self.reused,
        )
        self.made += [{"kind": "iam-role", "id": names.role},
                      {"kind": "instance-profile", "id": names.instance_profile}]
        return profile_arn

    def security_groups(self) -> tuple[str, list[str]]:
        """2. The balancer's group, and the groups of the instances (EI's too).

        The balancer reaches the inference port only; the management port only from the
        admin group, which nothing of the fleet belongs to.
        """
        req, names, vpc_id = self.req, self.names, self.network.vpc_id
        open_to = [self.network.vpc_cidr] if req.internal else ["0.0.0.0/0"]
        listener_ports = [80, 443] if req.certificate_arn else [80]
        who = "the VPC" if req.internal else "anywhere"
        lb_sg = create_security_group(
            self.aws, vpc_id=vpc_id, name=names.lb_group,
            description=f"mmsctl fleet {req.name}: load balancer, HTTP(S) from {who}",
            group_tags=self.tagged(tags.FLEET_LB_SECURITY_GROUP, names.lb_group),
            ingress=[Rule(port, cidr=cidr, description=f"mmsctl: clients ({who})")
                     for port in listener_ports for cidr in open_to],
        )
        self.made.append({"kind": "security-group", "id": lb_sg, "name": names.lb_group})
        admin_sg = create_security_group(
            self.aws, vpc_id=vpc_id, name=names.admin_group,
            description=f"mmsctl fleet {req.name}: attach to hosts that may reach the members' management API",
            group_tags=self.tagged(tags.FLEET_ADMIN_SECURITY_GROUP, names.admin_group),
        )
        self.made.append({"kind": "security-group", "id": admin_sg, "name": names.admin_group})
        ingress = [
            Rule(INFERENCE_PORT, group_id=lb_sg, description="mmsctl: inference from the fleet's load balancer"),
            Rule(MANAGEMENT_PORT, group_id=admin_sg, description="mmsctl: management from the fleet's admin group"),
            *(Rule(22, cidr=cidr, description="mmsctl: SSH (tunnels to the management port)")
              for cidr in req.ssh_cidrs),
        ]
        instance_sg = create_security_group(
            self.aws, vpc_id=vpc_id, name=names.instance_group,
            description=f"mmsctl fleet {req.name}: model servers",
            group_tags=self.tagged(tags.FLEET_INSTANCE_SECURITY_GROUP, names.instance_group), ingress=ingress,
        )
        self.made.append({"kind": "security-group", "id": instance_sg, "name": names.instance_group})
        restrict_egress(self.aws, lb_sg, [Rule(INFERENCE_PORT, group_id=instance_sg,
                                               description="mmsctl: to the fleet's inference port only")])
        group_ids = [instance_sg]
        if req.accelerator.is_ei:
            ei = ensure_ei_network(self.aws, self.network.subnets[0], [], self.reused)
            group_ids.append(ei.security_group_id)
        return lb_sg, group_ids

    def launch_template(self, image: ServerImage, profile_arn: str, group_ids: list[str],
                        facts: dict[str, str]) -> str:
        """3. Exactly what `ec2 launch` boots, management on the private address; the template's id."""
        names = self.names
        data: dict[str, Any] = {
            "ImageId": image.ami.image_id, "InstanceType": image.instance_type,
            "UserData": image.user_data_base64(), "IamInstanceProfile": {"Arn": profile_arn},
            "SecurityGroupIds": group_ids, "MetadataOptions": dict(METADATA_OPTIONS),
            "TagSpecifications": [
                tags.tag_spec("instance", self.tagged(tags.FLEET_INSTANCE, names.base, facts)),
                tags.tag_spec("volume", self.tagged(tags.FLEET_INSTANCE, names.base)),
            ],
        }
        if self.req.key_name:
            data["KeyName"] = self.req.key_name
        if image.ei_request():
            data["ElasticInferenceAccelerators"] = image.ei_request()
        template = self.aws.call(
            "ec2", "create_launch_template", LaunchTemplateName=names.launch_template,
            VersionDescription=f"mmsctl fleet {self.req.name}; {asg.LAUNCH_HOOK_MARK}", LaunchTemplateData=data,
            TagSpecifications=[tags.tag_spec("launch-template", self.tagged(
                tags.FLEET_LAUNCH_TEMPLATE, names.launch_template))])["LaunchTemplate"]
        template_id = str(template["LaunchTemplateId"])
        self.made.append({"kind": "launch-template", "id": template_id, "name": names.launch_template})
        return template_id

    def balancer(self, lb_sg: str) -> _Balancer:
        """4. Target group, balancer, listeners."""
        names, req = self.names, self.req
        path = health_check_path(req)
        tg_arn = elb.create_target_group(self.aws, name=names.target_group, vpc_id=self.network.vpc_id,
                                         port=INFERENCE_PORT, health=elb.HealthCheck(path),
                                         group_tags=self.tagged(tags.FLEET_TARGET_GROUP, names.target_group))
        self.made.append({"kind": "target-group", "id": tg_arn, "name": names.target_group})
        lb = elb.create_load_balancer(self.aws, name=names.load_balancer, subnet_ids=self.network.subnet_ids,
                                      security_group_id=lb_sg, internal=req.internal,
                                      lb_tags=self.tagged(tags.FLEET_LOAD_BALANCER, names.load_balancer))
        lb_arn = str(lb["LoadBalancerArn"])
        self.made.append({"kind": "load-balancer", "id": lb_arn, "name": names.load_balancer})
        listeners = elb.create_listeners(self.aws, lb_arn=lb_arn, target_group_arn=tg_arn,
                                         certificate_arn=req.certificate_arn,
                                         listener_tags=self.tagged(tags.FLEET_LISTENER, names.load_balancer))
        self.made += [{"kind": "listener", "id": li.arn, "name": f"{li.protocol}:{li.port}"} for li in listeners]
        return _Balancer(lb_arn, str(lb.get("DNSName", "")), tg_arn, path, listeners)

    def group(self, template_id: str, balancer: _Balancer, facts: dict[str, str]) -> tuple[int, float]:
        """5. The auto scaling group and its target-tracking policy; the desired size and requests per minute."""
        names, req = self.names, self.req
        desired = req.desired if req.desired is not None else req.min_size
        asg.create_group(self.aws, name=names.auto_scaling_group, launch_template_id=template_id,
                         subnet_ids=self.network.subnet_ids, target_group_arn=balancer.target_group_arn,
                         min_size=req.min_size, max_size=req.max_size, desired=desired, grace_s=req.grace_s,
                         group_tags=self.tagged(tags.FLEET_AUTO_SCALING_GROUP, names.base, facts))
        self.made += [{"kind": "auto-scaling-group", "id": names.auto_scaling_group},
                      {"kind": "lifecycle-hook", "id": f"{names.auto_scaling_group} {asg.LAUNCH_HOOK}"}]
        if req.warm_pool:
            asg.put_warm_pool(self.aws, names.auto_scaling_group, req.warm_pool)
            self.made.append({"kind": "warm-pool", "id": f"{names.auto_scaling_group} ({req.warm_pool} stopped)"})
        per_minute = round(req.target_requests_per_instance * 60.0, 3)
        policy_arn = asg.put_request_tracking_policy(
            self.aws, group=names.auto_scaling_group, name=names.policy,
            resource_label=elb.resource_label(balancer.arn, balancer.target_group_arn),
            requests_per_minute=per_minute, warmup_s=req.grace_s)
        self.made.append({"kind": "scaling-policy", "id": policy_arn or names.policy, "name": names.policy})
        return desired, per_minute
