"""`mmsctl ec2`: launch a model server on EC2 (Elastic Inference or today's accelerators), list, clean up, cost."""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional

import typer

from mmsctl.cli.aws import CLOUD_WORDS, aws_session, render_calls
from mmsctl.cli.hints import CommandWords
from mmsctl.cli.options import (DryRunOpt, IdentityDirOpt, OutputOpt, ProfileOpt, RegionOpt, check_output,
                                note_model_locations, option)
from mmsctl.cli.render import Column, get_ui, render_data, render_removal, render_table
from mmsctl.cli.userdata import AcceleratorOpt, EiaOpt, PipSpecOpt, ServerOpt, user_data_command

__all__ = ["register"]

_EC2_WORDS = CommandWords(
    flags={**CLOUD_WORDS.flags, "all_instances": "--all", "instance_python": "--instance-python", "name": "--name"},
    hints=(*CLOUD_WORDS.hints, ("instances", "terminate them first: mmsctl ec2 terminate --all --wait")),
)

ec2_app = typer.Typer(
    help="Launch MXNet model servers on EC2 with an accelerator; list, describe, ssh-config, user-data, "
    "terminate, clean up, cost.",
    no_args_is_help=True,
)

INSTANCE_COLUMNS = (
    Column("Instance", "id"),
    Column("Name", "name"),
    Column("State", "state"),
    Column("Boot", "boot"),
    Column("Type", "type"),
    Column("Accelerator", "accelerator"),
    Column("Public IP", "public_ip"),
    Column("Models", "models"),
    Column("Private IP", "private_ip", wide=True),
    Column("Zone", "zone", wide=True),
    Column("Image", "image", wide=True),
    Column("Key", "key", wide=True),
    Column("Launched", "launched", wide=True),
)


@ec2_app.command("launch")
@_EC2_WORDS.command
def launch_cmd(
    eia: Optional[str] = EiaOpt,
    accelerator: Optional[str] = AcceleratorOpt,
    instance_type: Optional[str] = option("--instance-type", help="EC2 instance type "
                                          "(default fits the accelerator: m5.large for EI)."),
    models: List[str] = option("--models", [], help="name=location to serve (zoo name, local .mar or "
                               "folder, s3:// or https URL); repeatable."),
    region: Optional[str] = RegionOpt,
    profile: Optional[str] = ProfileOpt,
    subnet: Optional[str] = typer.Option(None, "--subnet", help="Subnet (default: the default VPC's first).",
                                         metavar="SUBNET"),
    key_name: Optional[str] = option("--key-name", help="EC2 key pair for SSH."),
    ami: Optional[str] = option("--ami", help="ami-… or resolve:ssm:/parameter (default: the "
                                "accelerator's Deep Learning AMI from its public SSM parameter)."),
    count: int = option("--count", 1, help="How many instances.", min=1),
    server: str = ServerOpt,
    allow: List[str] = typer.Option([], "--allow-cidr", help="CIDR allowed to reach port 8080 and SSH "
                                    "(default: the VPC only); repeatable.", metavar="CIDR"),
    allow_world_ssh: bool = option("--allow-world-ssh", False, help="Accept an --allow-cidr as wide as "
                                   "the internet (0.0.0.0/0), which opens SSH to anyone."),
    name: Optional[str] = option("--name", help="Name tag (default: mmsctl-MODELS)."),
    pip_spec: Optional[str] = PipSpecOpt,
    instance_python: str = option("--instance-python", "3.10", help="The AMI's python3: "
                                  "the wheels instances install are built for it."),
    dry_run: bool = DryRunOpt,
    wait: bool = option("--wait", False, help="Wait until the instances run and their servers answer /ping."),
    wait_timeout: float = option("--wait-timeout", 900.0, help="Seconds --wait waits for the server."),
    output: str = OutputOpt,
) -> None:
    """Launch a model server on EC2; finds or creates the EI endpoint, security groups and role first.

    Example: mmsctl ec2 launch --accelerator g4dn --models squeezenet --region us-west-2 --key-name me
    """
    check_output(output)
    from mmsctl.cloud.ec2.launch import launch
    from mmsctl.cloud.ec2.query import wait_for_instances
    from mmsctl.cloud.ec2.spec import LaunchRequest
    from mmsctl.cloud.instance.accelerators import choose
    from mmsctl.cloud.instance.userdata import parse_models, server_kind

    kind = server_kind(server)
    choice = choose(accelerator, eia)
    note_model_locations(models)
    req = LaunchRequest(accelerator=choice, models=parse_models(models), instance_type=instance_type,
                        subnet=subnet, key_name=key_name, ami=ami, count=count, server=kind,
                        allow_cidrs=list(allow), name=name, pip_spec=pip_spec, allow_world_ssh=allow_world_ssh,
                        instance_python=instance_python)
    ui = get_ui()
    aws = aws_session(region, profile, dry_run, plan_without_aws=True)
    result = launch(aws, req)
    for warning in result.warnings:
        ui.warn(warning)
    if dry_run:
        render_calls(aws, output, {"launch": result.to_dict()})
        return
    for line in result.created:
        ui.message(f"created {line}")
    for line in result.reused:
        ui.message(f"reused {line}")
    rows = result.instances
    if wait:
        ids = [str(r["id"]) for r in rows]
        ui.message(f"waiting for {', '.join(ids)} to run…")
        rows = wait_for_instances(aws, ids)
        _wait_servers(aws, rows, wait_timeout)
    if not render_data({**result.to_dict(), "instances": rows}, output):
        render_table(rows, INSTANCE_COLUMNS, wide=output == "wide")
    if not wait:
        ui.message("the server starts a few minutes after boot; `mmsctl ec2 launch --wait` waits for it")


def _wait_servers(aws: Any, rows: list[dict[str, Any]], timeout: float) -> None:
    """Until each server is ready: its readiness URL answers, or the instance reports its boot (a boot that
    failed ends the wait at once, with the step and its line)."""
    from mmsctl.cloud.ec2.query import boot_of, wait_for_server
    from mmsctl.cloud.instance.userdata import READY_PATHS
    from mmsctl.errors import CloudError

    ui = get_ui()
    for row in rows:
        url = row.get("inference_url") or (f"http://{row['private_ip']}:8080" if row.get("private_ip") else None)
        if url is None:
            raise CloudError(f"{row['id']} has no IP address to check its server at")
        path = READY_PATHS.get(str(row.get("server")), "/ping")
        ui.message(f"waiting for the server at {url}{path} …")
        try:
            ready = wait_for_server(url, timeout=timeout, path=path, boot=boot_of(aws, str(row["id"])))
        except CloudError as exc:
            exc.message = f"{row['id']}: {exc.message}"
            raise
        if not ready:
            raise CloudError(f"{row['id']} is running but its server did not answer {url}{path} "
                             f"within {timeout:g}s",
                             hint="is your address in --allow-cidr? progress: /var/log/mmsctl-init.log on the host")
        row["server_ready"] = True


@ec2_app.command("list")
@_EC2_WORDS.command
def list_cmd(
    region: Optional[str] = RegionOpt,
    profile: Optional[str] = ProfileOpt,
    all_: bool = option("--all", False, help="Include terminated instances."),
    output: str = OutputOpt,
) -> None:
    """List the instances mmsctl launched (found by their mmsctl:managed tag)."""
    check_output(output)
    from mmsctl.cloud.ec2.query import list_instances

    rows = list_instances(aws_session(region, profile), include_terminated=all_)
    if not render_data(rows, output):
        render_table(rows, INSTANCE_COLUMNS, wide=output == "wide")


@ec2_app.command("describe")
@_EC2_WORDS.command
def describe_cmd(
    instance_id: str = typer.Argument(..., metavar="INSTANCE_ID", help="An instance (`ec2 list` shows them)."),
    region: Optional[str] = RegionOpt,
    profile: Optional[str] = ProfileOpt,
    output: str = OutputOpt,
) -> None:
    """Show one mmsctl instance: state, its boot (what it reported, its console's last boot lines), addresses,
    accelerator, models, groups, role, tags."""
    check_output(output)
    from mmsctl.cloud.ec2.query import describe_instance

    info = describe_instance(aws_session(region, profile), instance_id)
    if not render_data(info, output):
        rows = [{"field": k, "value": ", ".join(f"{a}={b}" for a, b in v.items()) if isinstance(v, dict)
                 else "\n".join(v) if k == "boot_log" and v else v} for k, v in info.items()]
        render_table(rows, (Column("Field", "field"), Column("Value", "value")))


@ec2_app.command("terminate")
@_EC2_WORDS.command
def terminate_cmd(
    instance_ids: List[str] = typer.Argument(None, metavar="[INSTANCE_ID]...", help="Instances (`ec2 list` shows them)."),
    all_: bool = option("--all", False, help="Terminate every mmsctl instance in the region.", short=False),
    region: Optional[str] = RegionOpt,
    profile: Optional[str] = ProfileOpt,
    wait: bool = option("--wait", False, help="Wait until they are terminated."),
    dry_run: bool = option("--dry-run", False, help="Print the AWS calls instead of making them."),
    output: str = OutputOpt,
) -> None:
    """Terminate mmsctl instances (instances without the mmsctl:managed tag are refused)."""
    check_output(output)
    from mmsctl.cloud.ec2.destroy import release_launches, terminate
    from mmsctl.errors import UsageError

    if not instance_ids and not all_:  # before the AWS session: no region or credentials needed to say this
        raise UsageError("name the instances to terminate (INSTANCE_ID…), or pass --all",
                         hint="`mmsctl ec2 list` shows mmsctl's instances")
    if instance_ids and all_:
        raise UsageError("pass INSTANCE_IDs or --all, not both")
    aws = aws_session(region, profile, dry_run)
    rows = terminate(aws, list(instance_ids or []), all_instances=all_, wait=wait)
    if dry_run:
        render_calls(aws, output)
        return
    launches = {str(r["launch"]) for r in rows if r.get("launch")}
    released = release_launches(aws, launches) if wait and launches else []
    for item in released:  # on stderr: the JSON on stdout stays the instances
        get_ui().message(f"deleted {item['kind']} {item['id']} (no live instance of that launch is left)")
    if launches and not wait:
        get_ui().message("each launch's role and asset prefix stay until its instances are gone: "
                         "`mmsctl ec2 terminate --wait` or `mmsctl ec2 cleanup` removes them")
    if not render_data(rows, output):
        if not rows:
            get_ui().message(f"no mmsctl instances in {aws.region}")
            return
        render_table(rows, (Column("Instance", "id"), Column("Previous", "previous"), Column("State", "state")))


@ec2_app.command("ssh-config")
@_EC2_WORDS.command
def ssh_config_cmd(
    instance_ids: List[str] = typer.Argument(None, metavar="[INSTANCE_ID]...", help="Instances (`ec2 list` shows them)."),
    region: Optional[str] = RegionOpt,
    profile: Optional[str] = ProfileOpt,
    identity_dir: str = IdentityDirOpt,
) -> None:
    """Print ~/.ssh/config entries for mmsctl instances (management port 8081 forwarded to localhost)."""
    from mmsctl.cloud.ec2.query import ssh_config

    text = ssh_config(aws_session(region, profile), list(instance_ids or []), identity_dir=identity_dir)
    if not text:
        get_ui().message("no running mmsctl instance with an address")
        return
    out = get_ui().out.file
    out.write(text)
    out.flush()


@ec2_app.command("cleanup")
@_EC2_WORDS.command
def cleanup_cmd(
    region: Optional[str] = RegionOpt,
    profile: Optional[str] = ProfileOpt,
    dry_run: bool = option("--dry-run", False, help="Print the AWS calls instead of making them."),
    output: str = OutputOpt,
) -> None:
    """Delete the VPC endpoints, security groups, IAM role and instance profile mmsctl created, nothing else."""
    check_output(output)
    from mmsctl.cloud.ec2.destroy import cleanup

    aws = aws_session(region, profile, dry_run)
    result = cleanup(aws)
    if dry_run:
        render_calls(aws, output)
        return
    render_removal({"region": aws.region, "deleted": result.deleted, "kept": result.kept}, output, result.deleted,
                   nothing=f"nothing of mmsctl's left in {aws.region}", id_header="Id",
                   notes=[f"kept {item['kind']} {item['id']} (not tagged mmsctl:managed)" for item in result.kept])


ec2_app.command("user-data")(_EC2_WORDS.command(user_data_command(fleet=False)))


@ec2_app.command("cost")
@_EC2_WORDS.command
def cost_cmd(
    instance_type: Optional[str] = option("--instance-type", help="The EC2 instance type to price (m5.large)."),
    eia: Optional[str] = option("--eia", help="Add an Elastic Inference accelerator's price."),
    throughput: Optional[float] = option("--throughput", help="Measured requests per second."),
    from_bench: Optional[Path] = option("--from-bench", help="Take the throughput from a saved `mmsctl bench --save` run "
                                        "(its peak OK/s)."),
    bench_target: Optional[str] = option("--bench-target", help="With --from-bench: the server of a --compare run to use."),
    price: Optional[float] = option("--price", help="Total hourly price in USD (skips the table)."),
    table_name: Optional[str] = option("--table", help="Print a published table (resnet152)."),
    live: bool = typer.Option(False, "--live", help="Ask the AWS Pricing API for the instance price."),
    region: Optional[str] = RegionOpt,
    profile: Optional[str] = ProfileOpt,
    output: str = OutputOpt,
) -> None:
    """Cost per 100,000 requests from an hourly price and a throughput.

    Example: mmsctl ec2 cost --instance-type m5.large --eia medium --throughput 19.08
    (or --from-bench run.json: the peak OK/s of a saved `mmsctl bench` run)
    """
    check_output(output)
    from mmsctl.cloud.aws import prices
    from mmsctl.cloud.instance.accelerators import parse_eia
    from mmsctl.errors import UsageError

    if from_bench is not None:
        if throughput is not None:
            raise UsageError("pass --throughput or --from-bench, not both")
        from mmsctl.loadtest.results import load_run

        throughput = load_run(from_bench).peak_goodput(bench_target)
        if throughput <= 0:
            raise UsageError(f"{from_bench}: no request succeeded in that run, so there is no throughput to price")
    elif bench_target is not None:
        raise UsageError("--bench-target goes with --from-bench")

    title: Optional[str] = None
    if table_name:
        title, rows = prices.table(table_name)
    else:
        missing = [flag for flag, given in (("--instance-type", bool(instance_type)), ("--throughput", throughput is not None))
                   if not given]
        if not instance_type or throughput is None:  # name only what is missing: the user gave the rest
            raise UsageError(f"missing {' and '.join(missing)}: the cost needs an instance type and a throughput "
                             "(or --from-bench run.json, or --table resnet152)")
        accel = parse_eia(eia) if eia else None
        instance_price = None
        if live and price is None:
            aws = aws_session(region or "us-east-1", profile)
            instance_price = prices.live_price(aws, instance_type, aws.region)
            region = aws.region
        rows = [prices.estimate(instance_type, throughput, accelerator=accel, price=price,
                              instance_price=instance_price, region=region)]
    if render_data([r.to_dict() for r in rows], output):
        return
    if not table_name:  # a published table is us-east-1's by its title
        from mmsctl.cli.price_note import note_bundled_price

        note_bundled_price([r.price_source for r in rows], region, live=True)
    data = [{"setup": r.label, "price": f"${r.hourly_price:.3f}/h", "throughput": f"{r.throughput:.2f} req/s",
             "cost": f"${r.cost_per_100k:.2f}", "source": r.price_source} for r in rows]
    render_table(data, (Column("Setup", "setup"), Column("Price", "price", justify="right"),
                        Column("Throughput", "throughput", justify="right"),
                        Column("Per 100k requests", "cost", justify="right"),
                        Column("Price source", "source", wide=True)), wide=output == "wide", title=title)


def register(app: typer.Typer) -> None:
    app.add_typer(ec2_app, name="ec2")
