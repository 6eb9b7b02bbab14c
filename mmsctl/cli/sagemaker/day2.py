"""`mmsctl sagemaker describe | list | destroy | run-local | cost`: the endpoint's day two, and its local run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer

from mmsctl.cli.aws import aws_session, render_destroy_plan
from mmsctl.cli.hints import CommandWords
from mmsctl.cli.options import DryRunOpt, OutputOpt, ProfileOpt, RegionOpt, YesOpt, check_output, option
from mmsctl.cli.render import Column, get_ui, render_data, render_removal, render_table
from mmsctl.errors import UsageError

__all__ = ["add_commands"]

_RUN_LOCAL_WORDS = CommandWords(flags={"port": "--port", "model": "MODEL", "build": "--build", "workers": "--workers",
                                       "timeout": "--timeout"})
_COST_WORDS = CommandWords(flags={"requests": "--requests", "days": "--days", "duration_ms": "--duration-ms",
                                  "serverless_mb": "--serverless", "throughput": "--throughput", "payload_kb": "--payload-kb",
                                  "instance_type": "--instance-type", "memory_mb": "--memory"})
VARIANT_COLUMNS = (Column("Variant", "variant"), Column("Model", "model"), Column("Type", "instance_type"),
                   Column("Instances", "instances", justify="right"), Column("Desired", "desired_instances",
                                                                            justify="right"),
                   Column("Weight", "weight", justify="right"), Column("Serverless MB", "serverless_memory",
                                                                       justify="right"),
                   Column("Concurrency", "max_concurrency", justify="right"))


def _ms(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.1f} ms"


def describe_cmd(name: str = typer.Argument(..., metavar="NAME", help="The endpoint (`sagemaker list` shows them)."),
                 minutes: int = typer.Option(60, "--minutes", min=1, max=1440, metavar="N",
                                             help="The window of invocations and latency (CloudWatch)."),
                 region: Optional[str] = RegionOpt, profile: Optional[str] = ProfileOpt,
                 output: str = OutputOpt) -> None:
    """Status, variants and weights, instances, scaling, and the last hour's invocations and latency."""
    check_output(output)
    from mmsctl.cloud.sagemaker.query import describe_endpoint

    info = describe_endpoint(aws_session(region, profile), name, minutes=minutes)
    if render_data(info, output):
        return
    load, scaling = info["last_hour"], info["scaling"]
    fields = [("Status", info["status"] + (f" ({info['failure_reason']})" if info["failure_reason"] else "")),
              ("URL", info["url"]), ("Configuration", info["config"]), ("Image", info["image"]),
              ("Model data", info["model_data"] or "baked into the image"), ("Role", info["role"]),
              ("Scaling", _scaling_text(scaling)),
              ("Rollback alarms", ", ".join(info["rollback_alarms"]) or "none"),
              (f"Last {minutes} min", f"{load['invocations']:g} invocations ({load['per_second']:g}/s), "
                                      f"{load['errors_4xx']:g} 4xx, {load['errors_5xx']:g} 5xx"),
              ("Model latency", f"mean {_ms(load['latency_avg_ms'])}, p50 {_ms(load['latency_p50_ms'])}, "
                                f"p99 {_ms(load['latency_p99_ms'])}; overhead {_ms(load['overhead_avg_ms'])}")]
    render_table([{"field": k, "value": v} for k, v in fields], (Column("Field", "field"), Column("Value", "value")))
    render_table(info["variants"], VARIANT_COLUMNS, wide=output == "wide")


def _scaling_text(scaling: Optional[dict[str, Any]]) -> str:
    """The scaling range and its target, "none" for either where there is none (a target without a policy)."""
    if not scaling:
        return "none"
    target = scaling["target_invocations_per_minute"]
    each = f"at {target:g} invocations/min each" if target is not None else "(target tracking: none)"
    return f"{scaling['min']}-{scaling['max']} instances {each}"


def list_cmd(region: Optional[str] = RegionOpt, profile: Optional[str] = ProfileOpt, output: str = OutputOpt) -> None:
    """The endpoints mmsctl deployed in this region."""
    check_output(output)
    from mmsctl.cloud.sagemaker.query import list_endpoints

    rows = list_endpoints(aws_session(region, profile))
    if not render_data(rows, output):
        render_table(rows, (Column("Name", "name"), Column("Status", "status"), Column("Created", "created"),
                            Column("Modified", "modified", wide=True)), wide=output == "wide")


def destroy_cmd(
    name: str = typer.Argument(..., metavar="NAME", help="The endpoint (`sagemaker list` shows them)."),
    delete_data: bool = option("--delete-data", False, help="Also delete the log group (the containers' "
                               "output; asks first, with its size)."),
    yes: bool = YesOpt,
    region: Optional[str] = RegionOpt,
    profile: Optional[str] = ProfileOpt,
    dry_run: bool = DryRunOpt,
    output: str = OutputOpt,
) -> None:
    """Remove everything deploy and update made for NAME, in reverse order; a second destroy changes nothing."""
    check_output(output)
    from mmsctl.cloud.sagemaker.destroy import destroy, log_group_bytes
    from mmsctl.cloud.sagemaker.spec import check_name, log_group

    check_name(name)
    aws = aws_session(region, profile, dry_run, plan_without_aws=True)
    if delete_data and not dry_run and not yes:
        stored = log_group_bytes(aws, name)
        if stored >= 0:
            what = f"log group {log_group(name)} ({stored} bytes)"
            if not sys.stdin.isatty():
                raise UsageError(f"destroy would delete {what}; confirm with --yes (no terminal to ask on)",
                                 params=("delete_data", "yes"))
            if not typer.confirm(f"Delete {what}?", default=False, err=True):
                raise UsageError("nothing deleted", param="delete_data")
    result = destroy(aws, name, delete_data=delete_data)
    if dry_run:
        render_destroy_plan(aws, output, result.to_dict(), f"mmsctl:sagemaker={name}")
        return
    render_removal(result.to_dict(), output, result.deleted, nothing=f"nothing of {name} left in {aws.region}",
                   notes=[f"kept {item['kind']} {item['id']} ({item['why']}); to delete it too: mmsctl sagemaker "
                          f"destroy {name} --delete-data" for item in result.kept])


def run_local_cmd(
    model: Optional[str] = typer.Argument(None, metavar="[MODEL]", help="Zoo name, archive or folder (packed and "
                                          "extracted as SageMaker does); default: the --build context's model."),
    port: int = option("--port", 8080, help="The container's port "
                       "(SAGEMAKER_BIND_TO_PORT; 8080 as in SageMaker)."),
    build: Optional[Path] = option("--build", help="Run this build context's "
                                   "entrypoint.sh serve, code and environment (`lambda build --out DIR`)."),
    workers: Optional[int] = option("--workers", help="SAGEMAKER_MODEL_SERVER_WORKERS.", short=False),
    timeout: Optional[int] = option("--timeout", help="SAGEMAKER_MODEL_SERVER_TIMEOUT."),
) -> None:
    """Run the image's `serve` entry here as SageMaker would (its environment, /opt/ml/model, port 8080), no docker.

    Example: mmsctl sagemaker run-local squeezenet --port 8080   (then POST an image to /invocations)
    """
    from mmsctl.sagemaker import run_local

    with _RUN_LOCAL_WORDS.applied():
        plan = run_local.plan(model, port=port, build=build, workers=workers, timeout=timeout)
    ui = get_ui()
    code = run_local.run(plan, ui.message)
    if code:
        raise typer.Exit(code)


def cost_cmd(
    requests: int = option("--requests", 100_000, help="Predictions in the period."),
    days: float = typer.Option(30.0, "--days", metavar="D", help="The period they arrive over."),
    duration_ms: float = option("--duration-ms", ..., help="Compute per prediction (a "
                                "warm invocation's duration: `lambda invoke`, `sagemaker describe`)."),
    instance_type: str = option("--instance-type", "ml.m5.large", help="The real-time endpoint's instances (one per ec2/fleet type below)."),
    serverless: int = option("--serverless", 2048, help="The serverless endpoint's memory."),
    memory: int = option("--memory", 1024, help="The Lambda function's memory."),
    payload_kb: float = typer.Option(8.0, "--payload-kb", metavar="KB", help="Kilobytes in and out per prediction, "
                                     "together (SageMaker bills data processed; the kitten JPEG and its answer: 8)."),
    throughput: Optional[float] = option("--throughput", help="One instance's requests/s "
                                         "(`mmsctl bench`): instances for the mean rate (default: one)."),
    output: str = OutputOpt,
) -> None:
    """What N predictions over D days cost on ec2, a fleet, Lambda and SageMaker (real-time and serverless).

    Example: mmsctl sagemaker cost --requests 100000 --days 30 --duration-ms 45
    """
    check_output(output)
    from mmsctl.cloud.aws.workload_cost import workload_costs

    with _COST_WORDS.applied():
        rows = workload_costs(requests, days, duration_ms, sagemaker_type=instance_type,
                                     serverless_mb=serverless, lambda_mb=memory, payload_kb=payload_kb,
                                     throughput=throughput)
    if render_data([r.to_dict() for r in rows], output):
        return
    render_table([_cost_row(r) for r in rows],
                 (Column("Option", "option"), Column("Setup", "setup"), Column("Billed", "billed"),
                  Column("Cost", "cost", justify="right"), Column("Per 100k", "per_100k", justify="right"),
                  Column("Prices", "source", wide=True)), wide=output == "wide",
                 title=f"{requests:,} predictions over {days:g} days, {duration_ms:g} ms each")


def _cost_row(row: Any) -> dict[str, Any]:
    return {"option": row.option, "setup": row.setup, "billed": row.billed, "cost": f"${row.total:,.2f}",
            "per_100k": f"${row.per_100k:,.2f}", "source": row.source}


def add_commands(app: typer.Typer) -> None:
    """The day-two commands of ``mmsctl sagemaker`` on *app*."""
    app.command("describe")(describe_cmd)
    app.command("list")(list_cmd)
    app.command("destroy")(destroy_cmd)
    app.command("run-local")(_RUN_LOCAL_WORDS.command(run_local_cmd))
    app.command("cost")(_COST_WORDS.command(cost_cmd))
