"""`mmsctl fleet`: model servers on EC2 Auto Scaling behind an Application Load Balancer.

    mmsctl fleet create prod --models squeezenet --min 2 --max 10 --wait
    mmsctl fleet list | describe prod | members prod | scale prod --desired 4 | destroy prod
    mmsctl fleet cost prod --from-bench run.json
    mmsctl context add prod --fleet prod      # then: models/scale/ping on every member
    mmsctl fleet tunnel prod                  # from outside the VPC: ssh/ssm tunnels, context prod-tunnel
"""

from __future__ import annotations

from typing import Any, List, Optional

import typer

from mmsctl.cli.aws import CLOUD_WORDS, aws_session, render_calls
from mmsctl.cli.hints import CommandWords
from mmsctl.cli.options import (DryRunOpt, IdentityDirOpt, OutputOpt, ProfileOpt, RegionOpt, check_output,
                                note_model_locations, option)
from mmsctl.cli.render import Column, get_ui, render_data, render_removal, render_table
from mmsctl.cli.userdata import user_data_command

__all__ = ["register"]

fleet_app = typer.Typer(
    help="Serve past one machine: model servers on EC2 Auto Scaling behind an Application Load Balancer "
    "(create, list, describe, members, scale, rollout, destroy, tunnel, ssh-config, user-data, cost).",
    no_args_is_help=True,
)

NameArg: str = typer.Argument(..., help="Fleet name (lowercase letters, digits, hyphens; up to 19).", metavar="NAME")
WaitTimeoutOpt: float = option("--wait-timeout", 1200.0, help="Seconds --wait waits.")

_FIELDS = (Column("Field", "field"), Column("Value", "value"))


#: How `fleet` names the arguments of mmsctl/cloud/fleet (and of the modules `ec2` shares), and fixes.
_FLEET_WORDS = CommandWords(
    flags={**CLOUD_WORDS.flags, "min_size": "--min", "max_size": "--max", "desired": "--desired",
           "target_requests_per_instance": "--target-requests-per-instance", "grace_s": "--health-check-grace",
           "ssh_cidrs": "--ssh-cidr", "certificate_arn": "--certificate-arn",
           "health_check_path": "--health-check-path", "warm_pool": "--warm-pool",
           "instance_python": "--instance-python"},
    hints=CLOUD_WORDS.hints,
)

def _fields(pairs: list[tuple[str, Any]]) -> None:
    render_table([{"field": k, "value": v} for k, v in pairs if v is not None], _FIELDS)


def _split(values: List[str]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def _wait(aws: Any, name: str, timeout: float) -> Any:
    from mmsctl.cloud.fleet.query import wait_healthy

    ui = get_ui()
    seen: list[tuple[int, int]] = []

    def progress(state: Any) -> None:
        if (state.healthy, state.desired) not in seen[-1:]:
            seen.append((state.healthy, state.desired))
            ui.message(f"{name}: {state.healthy}/{state.desired} targets healthy ({state.in_service} in service)…")

    return wait_healthy(aws, name, timeout=timeout, on_progress=progress)


@fleet_app.command("create")
@_FLEET_WORDS.command
def create_cmd(
    name: str = NameArg,
    models: List[str] = option("--models", [], help="name=location to serve (zoo name or https URL); "
                               "comma-separated or repeated. A member is healthy when every one has a ready "
                               "worker."),
    accelerator: Optional[str] = option("--accelerator", help="eia|inf1|inf2|g4dn|g5|none."),
    eia: Optional[str] = option("--eia", help="Elastic Inference accelerator (retired April 2024)."),
    instance_type: Optional[str] = option("--instance-type", help="EC2 instance type "
                                          "(default fits the accelerator)."),
    ami: Optional[str] = option("--ami", help="ami-… or resolve:ssm:/parameter (default: the "
                                "accelerator's Deep Learning AMI)."),
    min_size: int = option("--min", 2, help="Fewest instances.", min=1),
    max_size: int = option("--max", 10, help="Most instances.", min=1),
    desired: Optional[int] = typer.Option(None, "--desired", min=1, help="Instances to start with (default --min).",
                                          metavar="N"),
    target_rps: float = option("--target-requests-per-instance", 10.0, help="Requests per second per "
                               "instance the scaling policy holds (ALBRequestCountPerTarget; AWS counts per "
                               "minute, so its TargetValue is N×60)."),
    subnets: List[str] = typer.Option([], "--subnets", help="Subnets in two or more zones of one VPC "
                                      "(default: the default VPC's); comma-separated or repeated.", metavar="SUBNET,…"),
    internal: bool = typer.Option(False, "--internal", help="An internal balancer, open to the VPC only."),
    certificate_arn: Optional[str] = typer.Option(None, "--certificate-arn", help="ACM certificate: HTTPS on 443, "
                                                  "HTTP redirected to it.", metavar="ARN"),
    key_name: Optional[str] = option("--key-name", help="EC2 key pair for SSH."),
    ssh_cidrs: List[str] = typer.Option([], "--ssh-cidr", help="CIDR allowed to SSH to the instances (for tunnels "
                                        "to the management port); repeatable. Default: none.", metavar="CIDR"),
    allow_world_ssh: bool = option("--allow-world-ssh", False, help="Accept an --ssh-cidr as wide as the "
                                   "internet (0.0.0.0/0), which opens SSH to anyone."),
    server: str = option("--server", "mmsctl", help="What the instances run (mms: MMS 1.1.11)."),
    pip_spec: Optional[str] = option("--pip-spec", help="What instances pip-install for --server mmsctl."),
    health_check_path: Optional[str] = typer.Option(None, "--health-check-path", help="Override the target group's "
                                                    "health check (default /v2/health/ready: every model has a "
                                                    "ready worker; /ping for MMS).", metavar="PATH"),
    instance_python: str = option("--instance-python", "3.10", help="The AMI's python3: "
                                  "the wheels instances install are built for it."),
    warm_pool: int = typer.Option(0, "--warm-pool", metavar="N", help="Keep N instances booted and stopped "
                                  "(an Auto Scaling warm pool): scale-out starts them in seconds."),
    grace: Optional[int] = typer.Option(None, "--health-check-grace", help="Seconds a new instance has to boot "
                                        "before failed health checks replace it (default: twice the measured "
                                        "boot, 300).", metavar="S"),
    region: Optional[str] = RegionOpt,
    profile: Optional[str] = ProfileOpt,
    dry_run: bool = DryRunOpt,
    wait: bool = option("--wait", False, help="Return when the targets are healthy; print the endpoint."),
    wait_timeout: float = WaitTimeoutOpt,
    output: str = OutputOpt,
) -> None:
    """Create a fleet: launch template, load balancer, target group, Auto Scaling group, scaling policy.

    Example: mmsctl fleet create prod --models squeezenet --min 2 --max 10 --wait
    """
    check_output(output)
    from mmsctl.cloud.instance.accelerators import choose
    from mmsctl.cloud.fleet.create import FleetRequest, create
    from mmsctl.cloud.instance.userdata import parse_models, server_kind

    note_model_locations(models)
    req = FleetRequest(
        name=name, models=parse_models(models), accelerator=choose(accelerator, eia), instance_type=instance_type,
        ami=ami, min_size=min_size, max_size=max_size, desired=desired, target_requests_per_instance=target_rps,
        subnets=_split(subnets), internal=internal, certificate_arn=certificate_arn, key_name=key_name,
        ssh_cidrs=list(ssh_cidrs), allow_world_ssh=allow_world_ssh, server=server_kind(server), pip_spec=pip_spec,
        health_check_path=health_check_path, warm_pool=warm_pool, instance_python=instance_python,
        **({"grace_s": grace} if grace is not None else {}),
    )
    req.check()  # before the AWS session: no region or credentials needed to refuse these
    ui = get_ui()
    aws = aws_session(region, profile, dry_run, plan_without_aws=True)
    result = create(aws, req)
    for warning in result.warnings:
        ui.warn(warning)
    if dry_run:
        render_calls(aws, output, {"fleet": result.to_dict()})
        if wait:
            ui.message("dry run: --wait skipped")
        return
    for item in result.resources:
        ui.message(f"created {item['kind']} {item.get('name') or item['id']}")
    data = result.to_dict()
    if wait:
        data["health"] = _wait(aws, name, wait_timeout).to_dict()
    if render_data(data, output):
        return
    _fields([("Name", result.name), ("Region", result.region), ("Endpoint", result.endpoint),
             ("Instances", f"min {result.min_size}, desired {result.desired}, max {result.max_size}"),
             ("Instance type", result.instance_type), ("Accelerator", result.accelerator),
             ("Health check", f"GET {result.health_check_path} → 200"),
             ("Lifecycle hook", _hook_line(result.lifecycle_hook)),
             ("Scaling", f"{result.target_requests_per_minute:g} requests/min per target"),
             ("Healthy", f"{data['health']['healthy']}/{data['health']['desired']}" if wait else None)])
    if not wait:
        ui.message(f"instances boot for a few minutes; `mmsctl fleet describe {name}` shows their health")


_LIST_COLUMNS = (
    Column("Name", "name"),
    Column("In service", "_in", justify="right"),
    Column("Min", "min", justify="right"),
    Column("Max", "max", justify="right"),
    Column("Type", "instance_type"),
    Column("Models", "models"),
    Column("Endpoint", "endpoint"),
    Column("Accelerator", "accelerator", wide=True),
    Column("Status", "status", wide=True),
)


@fleet_app.command("list")
@_FLEET_WORDS.command
def list_cmd(region: Optional[str] = RegionOpt, profile: Optional[str] = ProfileOpt, output: str = OutputOpt) -> None:
    """List the fleets in the region (found by their Auto Scaling group's mmsctl:fleet tag)."""
    check_output(output)
    from mmsctl.cloud.fleet.query import list_fleets

    aws = aws_session(region, profile)
    rows = list_fleets(aws)
    if render_data(rows, output):
        return
    if not rows:
        get_ui().message(f"no fleets in {aws.region}")
        return
    for row in rows:
        row["_in"] = f"{row['in_service']}/{row['desired']}"
    render_table(rows, _LIST_COLUMNS, wide=output == "wide")


@fleet_app.command("describe")
@_FLEET_WORDS.command
def describe_cmd(name: str = NameArg, region: Optional[str] = RegionOpt, profile: Optional[str] = ProfileOpt,
                 context: Optional[str] = option("--context", help="A context that reaches the members' management API, to find models registered by "
                                                 "fan-out that the launch template lacks (default: a saved context naming this fleet, e.g. "
                                                 "the one `fleet tunnel` writes)."),
                 output: str = OutputOpt) -> None:
    """Show a fleet: size, instances and their template version, target health, balancer, health check,
    policy, security groups; drift (members on an old template, models served beyond it)."""
    check_output(output)
    from mmsctl.cloud.fleet.query import describe

    info = describe(aws_session(region, profile), name)
    info["beyond_template"] = _served_beyond_template(info, context)
    if render_data(info, output):
        return
    _describe_fields(info)
    if info["instances"]:
        get_ui().out.print()
        render_table(info["instances"], (
            Column("Instance", "id"), Column("Template", "template_version"), Column("Lifecycle", "lifecycle"),
            Column("Boot", "boot"), Column("Health", "health"), Column("Target", "target"), Column("Zone", "zone"),
            Column("Private IP", "private_ip"), Column("Public IP", "public_ip", wide=True)), wide=output == "wide")
    if info["security_groups"]:
        get_ui().out.print()
        render_table([{**g, "ingress": "; ".join(g["ingress"]) or "-", "egress": "; ".join(g["egress"]) or "-"}
                      for g in info["security_groups"]], (
            Column("Security group", "name"), Column("Id", "id", wide=True), Column("Ingress", "ingress"),
            Column("Egress", "egress")), wide=output == "wide")
    _warn_drift(info)
    for failed in (i for i in info["instances"] if str(i.get("boot", "")).startswith("failed:")):
        get_ui().warn(f"{failed['id']}: boot {failed['boot']}")


def _describe_fields(info: dict[str, Any]) -> None:
    lb, tg, policy = info["load_balancer"] or {}, info["target_group"] or {}, info["scaling_policy"] or {}
    templates = info.get("launch_templates") or []
    _fields([
        ("Name", info["name"]), ("Region", info["region"]), ("Status", info["status"]), ("Endpoint", info["endpoint"]),
        ("Instances", f"min {info['min']}, desired {info['desired']}, max {info['max']}" if info["min"] is not None
         else None),
        ("Instance type", info["instance_type"]), ("Accelerator", info["accelerator"]), ("Models", info["models"]),
        ("Launch template", f"{templates[0]['name']}, latest version {templates[0]['latest_version']}"
         if templates else None),
        ("Server", info["server"]), ("Balancer", f"{lb.get('scheme')}, {lb.get('state')}" if lb else None),
        ("Listeners", ", ".join(f"{li['protocol']}:{li['port']} {li['action']}" for li in lb.get("listeners", []))
         or None),
        ("Health check", f"GET {tg.get('health_check_path')} → {tg.get('matcher')} every {tg.get('interval_s')}s"
         if tg else None),
        ("Healthy targets", f"{tg.get('healthy')}/{tg.get('targets')}" if tg else None),
        ("Lifecycle hook", _hook_line(info["lifecycle_hook"]) if info["min"] is not None else None),
        ("Warm pool", _warm_line(info["warm_pool"])),
        ("Scaling", f"{policy.get('metric')} at {policy.get('target_requests_per_minute')}/min" if policy else None),
        ("Not ours (kept)", ", ".join(info["foreign"]) or None),
    ])


def _hook_line(hook: Optional[dict[str, Any]]) -> str:
    if not hook:
        return "none: members serve before their boot is done (see the warning)"
    return (f"{hook['name']}: a new instance joins (or enters the warm pool) once its server is ready; "
            f"after {hook['heartbeat_timeout_s']} s without that, {hook['default_result']}")


def _warm_line(pool: Optional[dict[str, Any]]) -> Optional[str]:
    if not pool:
        return None
    states = ", ".join(f"{n} {state}" for state, n in (pool.get("lifecycle") or {}).items()) or "none yet"
    reuse = ", reused on scale-in" if pool.get("reuse_on_scale_in") else ""
    return f"{pool['min_size']} kept {str(pool.get('state') or '').lower()}{reuse}; instances: {states}"


def _served_beyond_template(info: dict[str, Any], context: Optional[str]) -> dict[str, Any]:
    """Ask the members (through *context*, or a saved context naming this fleet) what they serve
    beyond the launch template; ``checked`` is false, with the reason, when no context reaches them."""
    from mmsctl.cli.fanout import served_beyond_template
    from mmsctl.client.contexts import ContextStore
    from mmsctl.errors import MmsError

    fleet = str(info["name"])
    store = ContextStore()
    names = [context] if context else [n for n in store.names() if store.get(n).fleet == fleet]
    if not names:
        return {"checked": False, "context": None, "models": {},
                "reason": f"no saved context names fleet {fleet}; `mmsctl fleet tunnel {fleet}` writes one"}
    ctx = store.get(names[0])
    if not ctx.is_fleet:
        return {"checked": False, "context": ctx.name, "models": {},
                "reason": f"context {ctx.name} is not a fleet context (it has no members)"}
    template = [m for m in str(info.get("models") or "").split(",") if m]
    try:
        extra = served_beyond_template(ctx, template, timeout=5.0)
    except MmsError as exc:
        return {"checked": False, "context": ctx.name, "models": {}, "reason": str(exc)}
    return {"checked": True, "context": ctx.name, "models": extra, "reason": None}


def _warn_drift(info: dict[str, Any]) -> None:
    """Members on an older launch template version, models served beyond the template: each with its fix."""
    ui, name = get_ui(), info["name"]
    for note in info.get("notes") or []:
        ui.warn(note)
    if info.get("drift"):
        ui.warn(f"{len(info['drift'])} member(s) on an older launch template version: {', '.join(info['drift'])}; "
                f"`mmsctl fleet rollout {name} --strategy rolling` replaces them")
    beyond = info["beyond_template"]
    if beyond["models"]:
        from mmsctl.cli.fanout import persist_advice

        listed = "; ".join(f"{m} (on {', '.join(members)})" for m, members in beyond["models"].items())
        ui.warn(f"served by members but not in the launch template (instances launched later will not serve "
                f"them): {listed}; {persist_advice(name)}")
    elif not beyond["checked"]:
        ui.message(f"models registered by fan-out: not checked ({beyond['reason']})")


@fleet_app.command("members")
@_FLEET_WORDS.command
def members_cmd(name: str = NameArg, region: Optional[str] = RegionOpt, profile: Optional[str] = ProfileOpt,
                output: str = OutputOpt) -> None:
    """The in-service instances fan-out management reaches (`context add --fleet NAME`), at private addresses."""
    check_output(output)
    from mmsctl.client.fanout import member_from_address
    from mmsctl.cloud.fleet.query import members

    rows = members(aws_session(region, profile), name)
    for row in rows:
        if row.get("private_ip"):
            member = member_from_address(str(row["id"]), str(row["private_ip"]))
            row.update(management_url=member.management_url, inference_url=member.inference_url)
    if render_data(rows, output):
        return
    if not rows:
        get_ui().message(f"fleet {name} has no instance in service")
        return
    render_table(rows, (Column("Instance", "id"), Column("Private IP", "private_ip"), Column("Zone", "zone"),
                        Column("Health", "health"), Column("Management", "management_url"),
                        Column("Inference", "inference_url", wide=True), Column("Public IP", "public_ip", wide=True)),
                 wide=output == "wide")


@fleet_app.command("scale")
@_FLEET_WORDS.command
def scale_cmd(
    name: str = NameArg,
    min_size: Optional[int] = option("--min", help="Fewest instances.", min=0),
    max_size: Optional[int] = option("--max", help="Most instances.", min=0),
    desired: Optional[int] = typer.Option(None, "--desired", min=0, help="Instances now.", metavar="N"),
    region: Optional[str] = RegionOpt,
    profile: Optional[str] = ProfileOpt,
    dry_run: bool = DryRunOpt,
    wait: bool = option("--wait", False, help="Return when as many targets are healthy as desired."),
    wait_timeout: float = WaitTimeoutOpt,
    output: str = OutputOpt,
) -> None:
    """Resize a fleet's Auto Scaling group (what is not given stays)."""
    check_output(output)
    from mmsctl.cloud.fleet.scale import scale
    from mmsctl.errors import UsageError

    if min_size is None and max_size is None and desired is None:
        raise UsageError("pass --min, --max or --desired")
    aws = aws_session(region, profile, dry_run)
    result = scale(aws, name, min_size=min_size, max_size=max_size, desired=desired)
    if dry_run:
        render_calls(aws, output, {"scale": result})
        return
    if wait and result["after"]["desired"] > 0:
        result["health"] = _wait(aws, name, wait_timeout).to_dict()
    if render_data(result, output):
        return
    before, after = result["before"], result["after"]
    render_table([{"size": k, "before": before[k], "after": after[k]} for k in ("min", "desired", "max")],
                 (Column("Size", "size"), Column("Before", "before", justify="right"),
                  Column("After", "after", justify="right")))
    if not result["changed"]:
        get_ui().message(f"fleet {name} already has that size")


@fleet_app.command("destroy")
@_FLEET_WORDS.command
def destroy_cmd(name: str = NameArg, region: Optional[str] = RegionOpt, profile: Optional[str] = ProfileOpt,
                dry_run: bool = DryRunOpt, output: str = OutputOpt) -> None:
    """Delete everything `fleet create` made, in reverse order; running it again finishes or does nothing."""
    check_output(output)
    from mmsctl.cloud.fleet.destroy import destroy
    from mmsctl.cloud.fleet.names import check_name

    check_name(name)
    aws = aws_session(region, profile, dry_run)
    result = destroy(aws, name)
    if dry_run:
        render_calls(aws, output, {"destroy": result.to_dict()})
        return
    ui = get_ui()
    for kept in result.kept:
        ui.warn(f"kept {kept}: it has the fleet's name but not its mmsctl:fleet={name} tag")
    render_removal(result.to_dict(), output, result.deleted, nothing=f"nothing left of fleet {name} in {aws.region}",
                   id_header="Id")


LocalPortOpt: int = typer.Option(18080, "--local-port", min=1024, max=65000, help="First local port: member i "
                                  "gets inference on PORT+3i, management on PORT+3i+1, metrics on PORT+3i+2.",
                                  metavar="PORT")


def _members_to_tunnel(aws: Any, name: str, *, by_id: bool = False) -> list[tuple[str, str, Optional[str]]]:
    """(instance id, where to connect, key pair) of each in-service member: its public address, else its
    private one; for Session Manager the instance id itself."""
    from mmsctl.cloud.fleet.query import members

    rows = members(aws, name)
    return [(str(r["id"]), str(r["id"]) if by_id else str(r.get("public_ip") or r.get("private_ip")), r.get("key"))
            for r in rows if by_id or r.get("public_ip") or r.get("private_ip")]


def _member_specs(targets: list[Any]) -> list[str]:
    """``--members`` specs (INFERENCE=MANAGEMENT[=METRICS]) of the tunnels' local ends."""
    return ["=".join(u for u in (t.url("inference"), t.url("management"), t.url("metrics")) if u) for t in targets]


@fleet_app.command("ssh-config")
@_FLEET_WORDS.command
def ssh_config_cmd(
    name: str = NameArg,
    region: Optional[str] = RegionOpt,
    profile: Optional[str] = ProfileOpt,
    identity_dir: str = IdentityDirOpt,
    local_port: int = LocalPortOpt,
) -> None:
    """Print ~/.ssh/config entries that forward each member's APIs to localhost (`fleet tunnel` opens them)."""
    from mmsctl.cloud.instance import tunnels

    rows = _members_to_tunnel(aws_session(region, profile), name)
    if not rows:
        get_ui().message(f"fleet {name} has no instance in service")
        return
    with _TUNNEL_WORDS.applied():
        targets = tunnels.plan(rows, local_port)
    blocks = [tunnels.ssh_host_block(f"mmsctl-fleet-{name}-{t.member}", t.host, key=t.key_name, identity_dir=identity_dir,
                                     forwards=[(f.local, f.remote) for f in t.forwards]) for t in targets]
    text = "\n\n".join(blocks) + (
        f"\n\n# or let mmsctl open these tunnels (and the context) until Ctrl+C: mmsctl fleet tunnel {name}"
        + (f" --local-port {local_port}" if local_port != 18080 else "")
        + f"\n# with these entries open: mmsctl context add {name}-tunnel --members {','.join(_member_specs(targets))}\n")
    out = get_ui().out.file
    out.write(text)
    out.flush()


_TUNNEL_WORDS = CommandWords(flags={"local_port": "--local-port", "remote_ports": "--remote-ports"})


@fleet_app.command("tunnel")
def tunnel_cmd(
    name: str = NameArg,
    local_port: int = LocalPortOpt,
    remote_ports: str = typer.Option("8080,8081,8082", "--remote-ports", help="The members' inference, "
                                     "management and metrics ports (metrics optional).",
                                     metavar="PORT,PORT[,PORT]"),
    via: str = typer.Option("ssh", "--via", help="ssh: the OpenSSH client to each member's public address (else "
                            "private); ssm: `aws ssm start-session` (Session Manager plugin) to its instance id.",
                            metavar="[ssh|ssm]"),
    key_name: Optional[str] = option("--key-name", help="Key pair whose DIR/KEY.pem ssh uses "
                                     "(default: each instance's own)."),
    identity_dir: str = IdentityDirOpt,
    user: str = typer.Option("ubuntu", "--user", help="ssh login name.", metavar="USER"),
    context_name: Optional[str] = typer.Option(None, "--context-name", help="The context written for the "
                                               "tunnels (default NAME-tunnel).", metavar="CONTEXT"),
    timeout: float = option("--timeout", 30.0, help="Seconds each tunnel has to open.", min=1.0, max=600.0),
    region: Optional[str] = RegionOpt,
    profile: Optional[str] = ProfileOpt,
) -> None:
    """Forward every member's APIs to localhost until Ctrl+C, like `kubectl port-forward`, and write a
    fleet context (NAME-tunnel) whose members are the local ends.

    Example: mmsctl fleet tunnel prod    # then, in another terminal: mmsctl --context prod-tunnel models list
    """
    import signal

    from mmsctl.cloud.instance import tunnels
    from mmsctl.cloud.aws.errors import ResourceNotFound
    from mmsctl.errors import UsageError

    if via not in ("ssh", "ssm"):
        raise UsageError(f"--via {via!r}: choose ssh or ssm")
    kind: tunnels.Via = "ssm" if via == "ssm" else "ssh"
    with _TUNNEL_WORDS.applied():
        ports = tunnels.parse_ports(remote_ports)
        tunnels.check_tools(kind)
        aws = aws_session(region, profile)
        rows = _members_to_tunnel(aws, name, by_id=kind == "ssm")
        if not rows:
            raise ResourceNotFound(f"fleet {name!r} has no instance in service to tunnel to")
        targets = tunnels.plan(rows, local_port, ports)
    ui = get_ui()
    env = {"AWS_REGION": aws.region, "AWS_DEFAULT_REGION": aws.region, **({"AWS_PROFILE": profile} if profile else {})}
    ssh = tunnels.SshOptions(user=user, identity_dir=identity_dir, key_name=key_name)

    def terminated(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # SIGTERM ends it as Ctrl+C does: every tunnel closed

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        with _TUNNEL_WORDS.applied(), tunnels.TunnelSet.start(targets, kind, ssh=ssh, env=env) as opened:
            ui.message(f"opening {len(targets)} {via} tunnel{'s' if len(targets) > 1 else ''} to fleet {name}…")
            opened.wait_open(timeout)
            for tunnel in opened.failed:
                ui.warn(f"{tunnel.member}: tunnel failed: {tunnel.error}")
            opened.raise_if_none_open()
            context = _write_tunnel_context(context_name or f"{name}-tunnel", [t.target for t in opened.open],
                                            name, aws.region)
            render_table([{"member": t.member, **{n: t.target.url(n) or "-" for n in tunnels.PORT_NAMES}}
                          for t in opened.open],
                         (Column("Member", "member"), Column("Inference", "inference"),
                          Column("Management", "management"), Column("Metrics", "metrics")))
            ui.message(f"context {context!r} has these {len(opened.open)} members; "
                       f"forwarding until Ctrl+C (e.g. `mmsctl --context {context} models list`)")

            def closed(tunnel: Any) -> None:
                ui.warn(f"{tunnel.member}: tunnel closed: {tunnel.error}")

            try:
                opened.watch(closed)
            except KeyboardInterrupt:
                ui.message(f"closing {len(opened.open)} tunnel{'s' if len(opened.open) != 1 else ''}")
                return
        raise tunnels.TunnelsFailed(f"every tunnel to fleet {name} has closed", failed={})
    finally:
        signal.signal(signal.SIGTERM, previous)


def _write_tunnel_context(name: str, targets: list[Any], fleet: str, region: str) -> str:
    """Add or update fleet context *name* with the tunnels' local ends as members (its token file stays);
    it names the fleet too, so `models list` through it compares the members with the fleet's template."""
    from mmsctl.client.contexts import Context, ContextStore

    store = ContextStore()
    old = store.get(name) if name in store.names() else None
    store.add(Context(name, targets[0].url("inference"), "", token_file=old.token_file if old else None,
                      members=tuple(_member_specs(targets)), fleet=fleet, region=region))
    return name


fleet_app.command("user-data")(_FLEET_WORDS.command(user_data_command(fleet=True)))


@fleet_app.command("cost")
@_FLEET_WORDS.command
def cost_cmd(
    name: Optional[str] = typer.Argument(None, help="A fleet to price at its min, desired and max size.",
                                         metavar="[NAME]"),
    instance_type: Optional[str] = option("--instance-type", help="Without NAME: the instance type."),
    eia: Optional[str] = option("--eia", help="Add an Elastic Inference accelerator's price."),
    counts: List[int] = option("--count", [], help="Instance counts to price (repeatable; default: "
                               "the fleet's min, desired and max).", min=1),
    from_bench: Optional[str] = option("--from-bench", help="A saved `mmsctl bench` run: its peak "
                                       "goodput is one instance's throughput."),
    bench_target: Optional[str] = option("--bench-target", help="The sweep of a --compare run to use."),
    throughput: Optional[float] = option("--throughput", help="One instance's requests per second."),
    price: Optional[float] = option("--price", help="One instance's hourly price in USD."),
    region: Optional[str] = RegionOpt,
    profile: Optional[str] = ProfileOpt,
    output: str = OutputOpt,
) -> None:
    """Hourly, monthly and per-100k-requests cost of a fleet: instance prices × counts + the balancer.

    Example: mmsctl fleet cost prod --from-bench squeezenet.json
    """
    check_output(output)
    from pathlib import Path

    from mmsctl.cloud.aws import prices
    from mmsctl.cloud.instance.accelerators import parse_eia
    from mmsctl.errors import UsageError

    if (from_bench is None) == (throughput is None):
        raise UsageError("pass --from-bench FILE or --throughput RPS (one instance's throughput)")
    if throughput is not None:
        per_instance = throughput
    else:
        from mmsctl.loadtest.results import load_run

        per_instance = load_run(Path(str(from_bench))).peak_goodput(bench_target)
        if per_instance <= 0:
            raise UsageError(f"{from_bench}: no successful requests, so no throughput to price")
    accel = parse_eia(eia) if eia else None
    if name is not None:
        from mmsctl.cloud.fleet.query import describe

        aws = aws_session(region, profile)
        info = describe(aws, name)
        region = aws.region
        instance_type = instance_type or info["instance_type"]
        if accel is None and str(info.get("accelerator") or "").startswith("eia"):
            accel = str(info["accelerator"])
        counts = counts or [n for n in (info["min"], info["desired"], info["max"]) if n]
    if not instance_type:
        raise UsageError("pass a fleet NAME, or --instance-type and --count")
    rows = prices.fleet_estimate(instance_type, per_instance, list(counts) or [1], accelerator=accel, price=price)
    if render_data([r.to_dict() for r in rows], output):
        return
    from mmsctl.cli.price_note import note_bundled_price

    note_bundled_price([r.per_instance.price_source for r in rows], region, live=False)
    table = [{"instances": r.instances, "hourly": f"${r.hourly_price:.3f}/h", "monthly": f"${r.monthly_price:,.0f}",
              "throughput": f"{r.throughput:.1f} req/s", "cost": f"${r.cost_per_100k:.3f}",
              "setup": r.per_instance.label, "source": r.per_instance.price_source} for r in rows]
    render_table(table, (Column("Instances", "instances", justify="right"), Column("Setup", "setup"),
                         Column("Price", "hourly", justify="right"), Column("Per month", "monthly", justify="right"),
                         Column("Throughput", "throughput", justify="right"),
                         Column("Per 100k requests", "cost", justify="right"),
                         Column("Price source", "source", wide=True)), wide=output == "wide")
    get_ui().message(f"{per_instance:.2f} req/s per instance; prices include ${rows[0].balancer_hourly:.4f}/h for "
                     "the load balancer (its LCU charges are extra)")


def register(app: typer.Typer) -> None:
    from mmsctl.cli.fleet.rollout import add_rollout

    add_rollout(fleet_app)
    app.add_typer(fleet_app, name="fleet")
