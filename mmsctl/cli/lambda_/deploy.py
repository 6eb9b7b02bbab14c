"""`mmsctl lambda build | deploy`: the image and the function around it; the group, its other commands from day2."""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional

import typer

from mmsctl.cli.aws import aws_session, render_calls
from mmsctl.cli.hints import CommandWords
from mmsctl.cli.lambda_ import day2
from mmsctl.cli.options import DryRunOpt, OutputOpt, ProfileOpt, RegionOpt, check_output, option
from mmsctl.cli.render import Column, get_ui, render_data, render_table
from mmsctl.errors import UsageError

__all__ = ["register"]

lambda_app = typer.Typer(
    help="Serve a model on AWS Lambda: build the image, deploy it with an HTTP URL and/or an S3 pipeline, "
    "invoke, read logs, run the handler locally, cost, destroy.",
    no_args_is_help=True,
)

CHANGE_COLUMNS = (Column("Action", "action"), Column("Kind", "kind"), Column("Resource", "id"))
#: How each command names the core's arguments (mmsctl/cloud/lambda_/, mmsctl/lambda_/), and its fixes.
_BUILD_WORDS = CommandWords(flags={"model_version": "--s3-version", "push": "--push"},
                            hints=(("out", "pass --force to replace it, or another --out"),))
_DEPLOY_WORDS = CommandWords(
    flags={"memory": "--memory", "timeout": "--timeout", "model_source": "--model-source", "image": "--image",
           "model_bucket": "--model-bucket", "public": "--public", "url": "--function-url", "warm": "--warm",
           "provisioned": "--provisioned", "input_bucket": "--input-bucket", "output_bucket": "--output-bucket",
           "input_prefix": "--input-prefix", "output_prefix": "--output-prefix", "suffixes": "--suffix",
           "fetch_allow": "--fetch-allow", "max_concurrency": "--max-concurrency", "on_failure": "--on-failure",
           "retries": "--retries", "max_event_age": "--max-event-age", "cors": "--cors"},
    hints=(
        ("lambda-schedule-too-short", "use --warm 1m or more, or --provisioned N to keep N instances initialised"),
        ("lambda-looping-buckets", "use another output bucket, or disjoint prefixes: --input-prefix incoming/ "
                                   "--output-prefix predictions/"),
        ("lambda-foreign-bucket", "pass --model-bucket BUCKET to use it on purpose"),
        ("lambda-missing-image", lambda exc: "build and push it: mmsctl lambda build MODEL --push --name "
                                             f"{getattr(exc, 'function', 'NAME')}"),
        ("lambda-deploy-incomplete", lambda exc: "; ".join(filter(None, (
            getattr(exc, "cause_hint", None),
            f"fix it and deploy again, or remove what was made: mmsctl lambda destroy {getattr(exc, 'name', 'NAME')}")))),
    ),
)


# -- build ---------------------------------------------------------------------------------------


@lambda_app.command("build")
@_BUILD_WORDS.command
def build_cmd(
    model: str = typer.Argument(..., metavar="MODEL", help="Zoo name, archive or folder to bake into the image, "
                                "or s3://bucket/key to load at start."),
    out: Path = typer.Option(Path("lambda-build"), "--out", help="Folder for the build context.", metavar="DIR"),
    model_version: Optional[str] = typer.Option(None, "--s3-version", metavar="VERSION_ID",
                                                help="Pin this S3 object version (s3:// models)."),
    force: bool = option("--force", False, help="Replace an existing build context in DIR."),
    push: bool = typer.Option(False, "--push", help="Build with docker/podman and push to ECR "
                              "(repository mmsctl-lambda/NAME)."),
    name: Optional[str] = option("--name", help="The function the image is for "
                                 "(with --push).", short=False),
    tag: str = typer.Option("latest", "--tag", metavar="TAG", help="Image tag to push."),
    region: Optional[str] = RegionOpt,
    profile: Optional[str] = ProfileOpt,
    dry_run: bool = option("--dry-run", False, help="With --push: print the AWS calls and commands only."),
    output: str = OutputOpt,
) -> None:
    """Write a container-image build context for Lambda (Dockerfile on the AWS Python base image).

    Example: mmsctl lambda build squeezenet --out build/ --push --name kitten
    """
    check_output(output)

    if push:
        if not name:
            raise UsageError("--push needs --name NAME (it pushes to the ECR repository mmsctl-lambda/NAME)")
        from mmsctl.cloud.lambda_.spec import check_function_name

        check_function_name(name)
    from mmsctl.cloud.lambda_.build import find_container_tool, push_image, write_build_context
    from mmsctl.cloud.aws.errors import ContainerToolError

    ui = get_ui()
    ctx = write_build_context(model, out, model_version=model_version, force=force)
    tool = None
    if push:  # before any AWS call: can this machine build images at all?
        try:
            tool = find_container_tool()
        except ContainerToolError as exc:
            exc.hint = f"the build context is ready in {ctx.path}: {exc.hint}"
            if not dry_run:
                raise
            ui.warn(exc.message)
    data: dict[str, Any] = {"context": ctx.to_dict()}
    ui.message(f"build context for {model} written to {ctx.path} (handler {ctx.handler}, "
               + ("model baked in" if ctx.baked else f"model from {ctx.model_location}") + ")")
    if push:
        from mmsctl.cloud.lambda_.build import ContainerTool

        assert name is not None
        aws = aws_session(region, profile, dry_run, plan_without_aws=True)
        pushed = push_image(aws, ctx, name, tag=tag, tool=tool or ContainerTool("docker", "docker"))
        data["push"] = pushed
        if dry_run:
            render_calls(aws, output, data)
            for command in pushed["commands"]:
                ui.message(f"would run: {command}")
            return
        ui.message(f"pushed {pushed['pinned']}")
    if not render_data(data, output):
        print(str(ctx.path / "Dockerfile"))


# -- deploy --------------------------------------------------------------------------------------


@lambda_app.command("deploy")
@_DEPLOY_WORDS.command
def deploy_cmd(
    name: str = typer.Argument(..., metavar="NAME", help="Function name (1-40 of a-z, 0-9, -)."),
    model: str = option("--model", ..., help="Zoo name or archive (uploaded to the model "
                        "bucket), or s3://bucket/key[?versionId=V]."),
    image: Optional[str] = option("--image", help="ECR image (default: "
                                  "mmsctl-lambda/NAME:latest, pushed by `lambda build --push`)."),
    model_source: str = option("--model-source", "s3", help="s3: load MODEL from S3 at start; image: MODEL is baked into --image."),
    model_bucket: Optional[str] = typer.Option(None, "--model-bucket", metavar="BUCKET",
                                               help="Bucket for the archive (default: one deploy creates)."),
    memory: int = option("--memory", 1024, help="MB (128-10240)."),
    timeout: int = option("--timeout", 30, help="Seconds (1-900)."),
    input_bucket: Optional[str] = option("--input-bucket", help="New images here invoke the function (S3 trigger)."),
    output_bucket: Optional[str] = option("--output-bucket", help="Predictions are written here."),
    input_prefix: str = option("--input-prefix", "", help="Only keys under this prefix."),
    output_prefix: str = option("--output-prefix", "", help="Write under this prefix."),
    suffixes: List[str] = typer.Option([], "--suffix", metavar="SUFFIX", help="Image suffixes that trigger "
                                       "(default .jpg .jpeg .png in both cases); repeatable."),
    url: bool = typer.Option(False, "--function-url", help="Add a function URL (IAM auth) for GET ?url= and POST."),
    public: bool = typer.Option(False, "--public", help="Make the function URL public (AuthType NONE)."),
    cors: Optional[str] = typer.Option(None, "--cors", metavar="ORIGIN[,...]", help="Let browsers on these origins "
                                       "call the function URL (https://app.example.com, or *)."),
    warm: Optional[str] = typer.Option(None, "--warm", metavar="EVERY", help="Keep-warm schedule, e.g. 5m "
                                       "(EventBridge: 1 minute at least)."),
    max_concurrency: Optional[int] = option("--max-concurrency", help="Reserved concurrency: at most N instances at once (1-1000)."),
    on_failure: Optional[str] = typer.Option(None, "--on-failure", metavar="DEST",
                                             help="Where failed asynchronous events go: sqs://QUEUE, sns://TOPIC, "
                                                  "s3://BUCKET, an ARN, or none. Default with a pipeline: a "
                                                  "dead-letter queue deploy makes."),
    retries: Optional[int] = typer.Option(None, "--retries", metavar="N", help="Retries of a failed asynchronous "
                                          "event, 0-2 (Lambda's default 2)."),
    max_event_age: Optional[str] = typer.Option(None, "--max-event-age", metavar="AGE", help="Drop (or send to the "
                                                "destination) events older than this, 60s-6h (default 6h)."),
    fetch_allow: str = option("--fetch-allow", "", help="Non-public destinations ?url= may reach: addresses, CIDR blocks, host "
                              "names (comma-separated). Default: public addresses only."),
    provisioned: Optional[int] = typer.Option(None, "--provisioned", metavar="N",
                                              help="Provisioned concurrency instead of --warm."),
    region: Optional[str] = RegionOpt,
    profile: Optional[str] = ProfileOpt,
    dry_run: bool = DryRunOpt,
    output: str = OutputOpt,
) -> None:
    """Create or update the function and everything around it, idempotently.

    Example: mmsctl lambda deploy kitten --model squeezenet --input-bucket in --output-bucket out --warm 5m
    """
    check_output(output)
    from mmsctl.cloud.lambda_.spec import DEFAULT_SUFFIXES, DeploySpec

    spec = DeploySpec(name=name, model=model, image=image, memory=memory, timeout=timeout,
                      input_bucket=input_bucket, output_bucket=output_bucket, input_prefix=input_prefix,
                      output_prefix=output_prefix, suffixes=tuple(suffixes) or DEFAULT_SUFFIXES, url=url,
                      public=public, warm=warm, provisioned=provisioned, model_bucket=model_bucket,
                      model_source=model_source, fetch_allow=fetch_allow,
                      max_concurrency=max_concurrency, on_failure=on_failure, retries=retries,
                      max_event_age=max_event_age,
                      cors=tuple(o.strip() for o in (cors or "").split(",") if o.strip())).check()
    from mmsctl.cloud.lambda_.deploy.model import resolve_model_file
    from mmsctl.cloud.lambda_.deploy.run import deploy

    model_file = None
    if spec.model_source == "s3" and not model.startswith("s3://"):
        model_file = resolve_model_file(model)
    ui = get_ui()
    aws = aws_session(region, profile, dry_run, plan_without_aws=True)
    result = deploy(aws, spec, model_file=model_file)
    for warning in result.warnings:
        ui.warn(warning)
    if dry_run:
        render_calls(aws, output, {"deploy": result.to_dict()})
        return
    data = result.to_dict()
    data["calls"] = [c.to_dict() for c in aws.calls]
    if render_data(data, output):
        return
    changed = [c.to_dict() for c in result.changes if c.action != "reuse"]
    if changed:
        render_table(changed, CHANGE_COLUMNS, wide=output == "wide")
    else:
        ui.message(f"{name} is up to date: nothing changed")
    ui.message(f"function {result.function_arn}")
    if result.url:
        ui.message(f"url {result.url} (auth {result.url_auth})")
    if result.input:
        ui.message(f"pipeline {result.input}*  ->  {result.output}")


day2.add_commands(lambda_app)


def register(app: typer.Typer) -> None:
    app.add_typer(lambda_app, name="lambda")
