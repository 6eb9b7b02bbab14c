"""`mmsctl sagemaker deploy | update | invoke`: the endpoint and what it serves; the group, its other commands from day2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer

from mmsctl.cli.aws import aws_session, render_calls
from mmsctl.cli.hints import CommandWords
from mmsctl.cli.options import DryRunOpt, OutputOpt, ProfileOpt, RegionOpt, check_output, option
from mmsctl.cli.render import Column, get_ui, render_data, render_table
from mmsctl.cli.sagemaker import day2

__all__ = ["register"]

sagemaker_app = typer.Typer(
    help="Serve a model on a SageMaker endpoint (real-time or serverless) from the image `lambda build` makes: "
    "deploy, invoke, describe, list, update (blue/green, canary), run-local, cost, destroy.",
    no_args_is_help=True,
)

WaitTimeoutOpt = option("--wait-timeout", 3600.0, help="Seconds to wait for InService.")
CHANGE_COLUMNS = (Column("Action", "action"), Column("Kind", "kind"), Column("Resource", "id"))
TOP_COLUMNS = (Column("Rank", "rank", justify="right"), Column("Class", "class"),
               Column("Probability", "probability", justify="right"))
_DEPLOY_WORDS = CommandWords(
    flags={"model": "--model", "image": "--image", "instance_type": "--instance-type", "count": "--count",
           "min_count": "--min", "max_count": "--max", "target_rps": "--target-requests-per-instance",
           "serverless_memory": "--serverless", "max_concurrency": "--max-concurrency", "workers": "--workers",
           "timeout_s": "--timeout", "model_source": "--model-source", "canary_percent": "--canary",
           "bake_s": "--bake", "max_latency_ms": "--max-latency", "port": "--port"},
    hints=(("sagemaker-deploy-incomplete", lambda exc: "; ".join(filter(None, (
        getattr(exc, "cause_hint", None),
        f"fix it and run it again, or remove what was made: mmsctl sagemaker destroy {getattr(exc, 'name', 'NAME')}")))),),
)
_INVOKE_WORDS = CommandWords(flags={"body": "IMAGE"})
_UPDATE_WORDS = CommandWords(
    flags=_DEPLOY_WORDS.flags,
    hints=(("sagemaker-endpoint-not-found", lambda exc: "deploy it first: mmsctl sagemaker deploy "
            f"{getattr(exc, 'endpoint', 'NAME')} --model MODEL --image URI"), *_DEPLOY_WORDS.hints),
)


def _progress(line: str) -> None:
    get_ui().message(line)


def _render_result(aws: Any, result: Any, output: str, dry_run: bool, verb: str) -> None:
    if dry_run:
        render_calls(aws, output, {verb: result.to_dict()})
        return
    data = result.to_dict()
    data["calls"] = [c.to_dict() for c in aws.calls]
    if render_data(data, output):
        return
    ui = get_ui()
    changed = [c.to_dict() for c in result.changes if c.action != "reuse"]
    if changed:
        render_table(changed, CHANGE_COLUMNS, wide=output == "wide")
    else:
        ui.message(f"{result.name} is up to date: nothing changed")
    ui.message(f"endpoint {result.endpoint_arn} ({result.status or 'not waited for'})")
    ui.message(f"invoke: mmsctl sagemaker invoke {result.name} kitten.jpg   (or POST {result.url}, SigV4 "
               "service sagemaker)")


def _packed(model: Optional[str], work: Path) -> Any:
    """MODEL packed as model.tar.gz (a zoo name, archive or folder), before any AWS call; None for s3:// or none."""
    if not model or model.startswith("s3://"):
        return None
    from mmsctl.cloud.sagemaker.model_data import FILE_NAME, pack

    return pack(model, work / FILE_NAME)


@sagemaker_app.command("deploy")
@_DEPLOY_WORDS.command
def deploy_cmd(
    name: str = typer.Argument(..., metavar="NAME", help="Endpoint name (1-40 of a-z, 0-9, -)."),
    model: Optional[str] = option("--model", help="Zoo name, archive or folder "
                                  "(packed as model.tar.gz into the asset bucket), or s3://…/model.tar.gz."),
    image: str = option("--image", ..., help="ECR image from `lambda build --push` (same "
                        "region; pinned to its digest)."),
    model_source: str = option("--model-source", "s3", help="s3: MODEL as model.tar.gz; image: the model baked into --image."),
    instance_type: str = option("--instance-type", "ml.m5.large", help="Real-time instances."),
    count: int = option("--count", 1, help="Instances at start."),
    min_count: Optional[int] = option("--min", help="Scale down to N (with --max)."),
    max_count: Optional[int] = option("--max", help="Scale up to N instances: target "
                                      "tracking on invocations per instance."),
    target_rps: float = option("--target-requests-per-instance", 10.0, help="Requests per second per instance the scaling keeps (x60: per minute)."),
    serverless: Optional[int] = option("--serverless", help="A serverless endpoint of "
                                       "this memory (1024-6144, whole GB) instead of instances."),
    max_concurrency: Optional[int] = option("--max-concurrency", help="Serverless: concurrent invocations (1-200, default 5)."),
    workers: Optional[int] = option("--workers", help="Model workers per container "
                                    "(default: one per CPU).", short=False),
    timeout: Optional[int] = option("--timeout", help="Seconds a batch may take "
                                    "(default 60, SageMaker's invocation timeout)."),
    wait_timeout: float = WaitTimeoutOpt,
    no_wait: bool = typer.Option(False, "--no-wait", help="Return once the endpoint is being created."),
    region: Optional[str] = RegionOpt,
    profile: Optional[str] = ProfileOpt,
    dry_run: bool = DryRunOpt,
    output: str = OutputOpt,
) -> None:
    """Create or update the endpoint and everything around it, idempotently; wait until it is InService.

    Example: mmsctl sagemaker deploy kitten --model squeezenet --image URI --count 2 --max 4
    """
    check_output(output)
    import tempfile

    from mmsctl.cloud.sagemaker.deploy.image import check_image_region
    from mmsctl.cloud.sagemaker.deploy.run import deploy
    from mmsctl.cloud.sagemaker.spec import DeploySpec

    spec = DeploySpec(name=name, model=model, image=image, instance_type=instance_type, count=count,
                      min_count=min_count, max_count=max_count, target_rps=target_rps, serverless_memory=serverless,
                      max_concurrency=max_concurrency, workers=workers, timeout_s=timeout,
                      model_source=model_source).check()
    aws = aws_session(region, profile, dry_run, plan_without_aws=True)
    check_image_region(aws.region, spec.image)  # before packing: the region and the URI say it alone
    with tempfile.TemporaryDirectory(prefix="mmsctl-sagemaker-") as work:
        data = _packed(model if model_source == "s3" else None, Path(work))
        result = deploy(aws, spec, model_data=data, progress=_progress, wait_s=None if no_wait else wait_timeout)
    for warning in result.warnings:
        get_ui().warn(warning)
    _render_result(aws, result, output, dry_run, "deploy")


@sagemaker_app.command("update")
@_UPDATE_WORDS.command
def update_cmd(
    name: str = typer.Argument(..., metavar="NAME", help="The endpoint (`sagemaker list` shows them)."),
    model: Optional[str] = option("--model", help="The new model (as for deploy)."),
    image: Optional[str] = option("--image", help="A new image (default: the one the "
                                  "endpoint runs)."),
    canary: Optional[int] = typer.Option(None, "--canary", metavar="PERCENT", help="Deployment guardrail: this "
                                         "share of the new fleet (1-50) takes traffic first; alarms roll it back."),
    bake: Optional[int] = typer.Option(None, "--bake", metavar="S",
                                       help="With --canary: seconds the canary is watched (default 600)."),
    max_latency: Optional[float] = typer.Option(None, "--max-latency", metavar="MS", help="With --canary: also "
                                                "roll back when p99 model latency passes MS."),
    wait_timeout: float = WaitTimeoutOpt,
    region: Optional[str] = RegionOpt,
    profile: Optional[str] = ProfileOpt,
    dry_run: bool = DryRunOpt,
    output: str = OutputOpt,
) -> None:
    """Move the endpoint to a new model: a new configuration and UpdateEndpoint (SageMaker's blue/green).

    Example: mmsctl sagemaker update kitten --model resnet-18 --canary 10 --bake 600
    """
    check_output(output)
    import tempfile

    from mmsctl.cloud.sagemaker.update import UpdateSpec, update

    spec = UpdateSpec(name, model, image, canary, bake, max_latency).check()
    with tempfile.TemporaryDirectory(prefix="mmsctl-sagemaker-") as work:
        data = _packed(model, Path(work))
        aws = aws_session(region, profile, dry_run)  # an update plans against what the endpoint runs: AWS's answer
        result = update(aws, spec, model_data=data, progress=_progress, wait_s=wait_timeout)
    _render_result(aws, result, output, dry_run, "update")


@sagemaker_app.command("invoke")
def invoke_cmd(
    name: str = typer.Argument(..., metavar="NAME", help="The endpoint (`sagemaker list` shows them)."),
    image: Path = typer.Argument(..., metavar="IMAGE", help="An image file (or .npy tensor, or JSON body) to POST."),
    content_type: Optional[str] = typer.Option(None, "--content-type", metavar="TYPE",
                                               help="Default: from the file's bytes."),
    accept: Optional[str] = typer.Option(None, "--accept", metavar="TYPE", help="The answer's form "
                                         "(application/json, application/x-npy)."),
    top_k: Optional[int] = option("--top-k", help="Classes per answer (CustomAttributes topk=K).", min=1, max=1000),
    region: Optional[str] = RegionOpt,
    profile: Optional[str] = ProfileOpt,
    output: str = OutputOpt,
) -> None:
    """Invoke the endpoint once (sagemaker-runtime InvokeEndpoint, SigV4) and print its answer."""
    check_output(output)
    from mmsctl.cloud.sagemaker.invoke import invoke_endpoint
    from mmsctl.cloud.sagemaker.spec import check_name
    from mmsctl.config import max_response_bytes
    from mmsctl.errors import InputNotFoundError

    check_name(name)
    try:
        body = image.read_bytes()
    except OSError as exc:
        raise InputNotFoundError(f"{image}: {exc.strerror or exc}") from None
    aws = aws_session(region, profile, local_service="sagemaker-runtime")
    with _INVOKE_WORDS.applied():
        answer = invoke_endpoint(aws, name, body, content_type=content_type, accept=accept, top_k=top_k,
                                 max_response_bytes=max_response_bytes())
    if render_data(answer.to_dict(), output):
        return
    rows = answer.result
    if isinstance(rows, list) and rows and all(isinstance(r, dict) and "class" in r for r in rows):
        render_table([{"rank": i, "class": r.get("class"), "probability": r.get("probability")}
                      for i, r in enumerate(rows, 1)], TOP_COLUMNS)
    elif rows is not None:
        print(json.dumps(rows, indent=2))
    else:
        get_ui().message(f"{len(answer.body)} bytes of {answer.content_type}")
    get_ui().message(f"variant {answer.variant} · {answer.duration_ms:.1f} ms round trip")


day2.add_commands(sagemaker_app)


def register(app: typer.Typer) -> None:
    app.add_typer(sagemaker_app, name="sagemaker")
