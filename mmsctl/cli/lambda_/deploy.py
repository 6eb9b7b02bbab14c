"""`mmsctl lambda`: serverless predictions on AWS Lambda, over HTTP and as an S3 event pipeline."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, List, Optional

import typer

from mmsctl.cli.aws import aws_session, render_calls, render_destroy_plan
from mmsctl.cli.hints import CommandWords
from mmsctl.cli.options import DryRunOpt, OutputOpt, ProfileOpt, RegionOpt, YesOpt, check_output, option
from mmsctl.cli.render import Column, get_ui, render_data, render_removal, render_table
from mmsctl.errors import UsageError

__all__ = ["register"]

lambda_app = typer.Typer(
    help="Serve a model on AWS Lambda: build the image, deploy it with an HTTP URL and/or an S3 pipeline, "
    "invoke, read logs, run the handler locally, cost, destroy.",
    no_args_is_help=True,
)

CHANGE_COLUMNS = (Column("Action", "action"), Column("Kind", "kind"), Column("Resource", "id"))
FUNCTION_COLUMNS = (
    Column("Name", "name"),
    Column("State", "state"),
    Column("Memory", "memory", justify="right"),
    Column("Timeout", "timeout", justify="right"),
    Column("Model", "model"),
    Column("Input", "input"),
    Column("Output", "output"),
    Column("Model URI", "model_uri", wide=True),
    Column("Version", "model_version", wide=True),
    Column("Modified", "last_modified", wide=True),
)
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
            f"fix it and deploy again, or remove what was made: mmsctl lambda destroy {getattr(exc, 'function', 'NAME')}")))),
    ),
)
_INVOKE_WORDS = CommandWords(hints=(("lambda-too-big", "send it through the pipeline: --s3 FILE"),
                                    ("lambda-no-pipeline", "deploy it with --input-bucket B --output-bucket B2")))
_LOGS_WORDS = CommandWords(flags={"since": "--since"})
_RUN_LOCAL_WORDS = CommandWords(
    flags={"serve": "--serve", "s3_put": "--s3-put"},
    hints=(
        ("event", "give EVENT.json, --s3-put s3://bucket/key or --url URL (or --serve)"),
        ("lambda-function-not-deployed", "deploy it first, or run without one: --model MODEL [--output-bucket B]"),
        ("lambda-model-in-image", "run the image's context with --build DIR, or name the model with --model"),
        ("lambda-stale-build-context", lambda exc: "write the context again: mmsctl lambda build MODEL --out "
                                                   f"{getattr(exc, 'path', 'DIR')} --force"),
    ),
)
_COST_WORDS = CommandWords(flags={"memory_mb": "--memory", "duration_ms": "--duration-ms", "requests": "--requests"})
TOP_COLUMNS = (Column("Rank", "rank", justify="right"), Column("Class", "class"),
               Column("Probability", "probability", justify="right"))


def _fields(info: dict[str, Any]) -> None:
    def text(v: Any) -> Any:
        if isinstance(v, dict):
            return ", ".join(f"{a}={b}" for a, b in v.items())
        if isinstance(v, list):
            return "\n".join(str(x) for x in v)
        return v

    render_table([{"field": k, "value": text(v)} for k, v in info.items()],
                 (Column("Field", "field"), Column("Value", "value")))


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
    from mmsctl.errors import UsageError

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
    input_bucket: Optional[str] = typer.Option(None, "--input-bucket", metavar="BUCKET",
                                               help="New images here invoke the function (S3 trigger)."),
    output_bucket: Optional[str] = typer.Option(None, "--output-bucket", metavar="BUCKET",
                                                help="Predictions are written here."),
    input_prefix: str = typer.Option("", "--input-prefix", metavar="PREFIX", help="Only keys under this prefix."),
    output_prefix: str = typer.Option("", "--output-prefix", metavar="PREFIX", help="Write under this prefix."),
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
    fetch_allow: str = typer.Option("", "--fetch-allow", metavar="LIST",
                                    help="Non-public destinations ?url= may reach: addresses, CIDR blocks, host "
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


# -- invoke, logs ---------------------------------------------------------------------------------


def _check_url(url: str) -> str:
    """``--image-url``: an http(s) URL the function can fetch, checked before any call (as the function checks it)."""
    from mmsctl.predict.fetch import FetchError, check_url

    try:
        return check_url(url)
    except FetchError as exc:
        raise UsageError(f"--image-url: {exc.message}") from None


@lambda_app.command("invoke")
@_INVOKE_WORDS.command
def invoke_cmd(
    name: str = typer.Argument(..., metavar="NAME"),
    image: Optional[Path] = typer.Argument(None, metavar="[IMAGE]", help="An image file to POST."),
    image_url: Optional[str] = typer.Option(None, "--image-url", metavar="URL",
                                            help="Have the function fetch this image (GET ?url=URL)."),
    via_url: bool = typer.Option(False, "--url", help="Call the function URL over HTTPS (SigV4-signed for AWS_IAM) "
                                 "instead of the Invoke API."),
    post: bool = typer.Option(False, "--post", help="With --url --image-url: POST {\"url\": URL} instead of GET."),
    s3: Optional[Path] = typer.Option(None, "--s3", metavar="FILE", help="Upload into the input bucket and wait "
                                      "for the output object (end-to-end)."),
    wait: float = option("--timeout", 120.0, help="With --s3: seconds to wait for the output object."),
    keep: bool = typer.Option(False, "--keep", help="With --s3: keep the uploaded image and its output object "
                              "(default: both are deleted once the output is read)."),
    region: Optional[str] = RegionOpt,
    profile: Optional[str] = ProfileOpt,
    output: str = OutputOpt,
) -> None:
    """Invoke the function once and print the prediction with Lambda's figures (duration, billed, init, memory)."""
    check_output(output)
    from mmsctl.errors import UsageError

    given = [x for x in (image, image_url, s3) if x is not None]
    if len(given) != 1:
        raise UsageError("give one of IMAGE, --image-url URL or --s3 FILE")
    if (via_url and s3 is not None) or (post and not (via_url and image_url)):
        raise UsageError("--url takes IMAGE or --image-url URL; --post goes with --url --image-url")
    from mmsctl.cloud.lambda_ import invoke as inv
    from mmsctl.cloud.lambda_.spec import check_lambda_name

    check_lambda_name(name)
    if via_url:
        from mmsctl.cloud.lambda_ import url_invoke

        request = url_invoke.request_for(image, _check_url(image_url) if image_url else None, post)
        aws = aws_session(region, profile)
        result = url_invoke.invoke_url(aws, url_invoke.find_url(aws, name), *request)
    elif s3 is not None:
        if not 0 < wait <= 900:
            raise UsageError("--timeout: 1 to 900 seconds")
        result = inv.invoke_pipeline(aws_session(region, profile), name, s3, wait=wait, keep=keep)
    else:
        event = inv.image_event(image) if image is not None else inv.url_event(_check_url(str(image_url)))
        result = inv.invoke_sync(aws_session(region, profile, local_service="lambda"), name, event)
    _render_invoke(result, output)


def _render_invoke(result: Any, output: str) -> None:
    from mmsctl.errors import ApiError, CloudError

    ui = get_ui()
    if not render_data(result.to_dict(), output):
        rows = result.result if isinstance(result.result, list) else None
        if rows and all(isinstance(r, dict) for r in rows) and result.ok:
            render_table([{"rank": i, "class": r.get("class"), "probability": r.get("probability")}
                          for i, r in enumerate(rows, 1)], TOP_COLUMNS)
        else:
            print(json.dumps(result.result, indent=2))
    report = result.report
    parts = [f"status {result.status}"]
    if result.latency_ms is not None:
        route = f" ({result.input} -> {result.output})" if result.input else ""  # the S3 pipeline's objects
        parts.append(f"end-to-end {result.latency_ms:.0f} ms{route}")
    if report is not None:
        parts.append(f"duration {report.duration_ms:g} ms, billed {report.billed_ms:g} ms")
        parts.append(f"init {report.init_ms:g} ms (cold start)" if report.cold else "warm")
        parts.append(f"max memory {report.max_memory_mb:g} of {report.memory_mb:g} MB")
    ui.message(" · ".join(parts))
    if result.function_error:
        detail = result.result if isinstance(result.result, dict) else {}
        raise CloudError(f"the function failed ({result.function_error}): {detail.get('errorType', '')}: "
                         f"{detail.get('errorMessage', result.result)}",
                         hint="see its log: mmsctl lambda logs NAME --since 10m")
    if not result.ok:
        detail = result.result if isinstance(result.result, dict) else {}
        raise ApiError(str(detail.get("message", f"HTTP {result.status}")), status=result.status,
                       type=str(detail.get("type", "")))


@lambda_app.command("logs")
@_LOGS_WORDS.command
def logs_cmd(
    name: str = typer.Argument(..., metavar="NAME"),
    follow: bool = option("--follow", False, help="Keep printing new events (Ctrl+C stops)."),
    since: str = typer.Option("10m", "--since", metavar="AGE", help="From this long ago: 30s, 10m, 2h, 1d."),
    region: Optional[str] = RegionOpt,
    profile: Optional[str] = ProfileOpt,
) -> None:
    """Print the function's CloudWatch log events (REPORT lines included)."""
    from datetime import datetime, timezone

    from mmsctl.cloud.lambda_.logs import log_events, parse_since
    from mmsctl.cloud.lambda_.spec import check_lambda_name

    check_lambda_name(name)
    seconds = parse_since(since)
    out = get_ui().out.file
    for event in log_events(aws_session(region, profile), name, since_s=seconds, follow=follow):
        stamp = datetime.fromtimestamp(event.get("timestamp", 0) / 1000, tz=timezone.utc)
        out.write(f"{stamp.isoformat(timespec='milliseconds').replace('+00:00', 'Z')} "
                  f"{str(event.get('message', '')).rstrip()}\n")
        out.flush()


# -- list, describe, destroy -----------------------------------------------------------------------


@lambda_app.command("list")
def list_cmd(region: Optional[str] = RegionOpt, profile: Optional[str] = ProfileOpt, output: str = OutputOpt) -> None:
    """List the functions mmsctl deployed (found by their mmsctl:lambda tag)."""
    check_output(output)
    from mmsctl.cloud.lambda_.query import list_functions

    rows = list_functions(aws_session(region, profile))
    if not render_data(rows, output):
        render_table(rows, FUNCTION_COLUMNS, wide=output == "wide")


@lambda_app.command("describe")
def describe_cmd(name: str = typer.Argument(..., metavar="NAME"), region: Optional[str] = RegionOpt,
                 profile: Optional[str] = ProfileOpt, output: str = OutputOpt) -> None:
    """Show one function: image, model, role, URL, S3 trigger, schedule, permissions, tags."""
    check_output(output)
    from mmsctl.cloud.lambda_.query import describe_function

    info = describe_function(aws_session(region, profile), name)
    if not render_data(info, output):
        _fields(info)


@lambda_app.command("destroy")
def destroy_cmd(
    name: str = typer.Argument(..., metavar="NAME"),
    keep_data: bool = typer.Option(False, "--keep-data", help="Keep the buckets, empty ones too."),
    delete_data: bool = option("--delete-data", False, help="Also delete input and output buckets that "
                               "hold objects, every version (asks first, with the count)."),
    yes: bool = YesOpt,
    region: Optional[str] = RegionOpt,
    profile: Optional[str] = ProfileOpt,
    dry_run: bool = DryRunOpt,
    output: str = OutputOpt,
) -> None:
    """Remove everything deploy made for NAME, in reverse order; a second destroy changes nothing.

    Buckets that hold objects are kept unless --delete-data is given."""
    check_output(output)
    from mmsctl.cloud.lambda_.destroy import destroy
    from mmsctl.cloud.lambda_.spec import check_function_name

    check_function_name(name)
    if keep_data and delete_data:
        raise UsageError("keep data or delete it, not both", params=("keep_data", "delete_data"))
    aws = aws_session(region, profile, dry_run, plan_without_aws=True)
    if delete_data and not dry_run:
        _confirm_data_loss(aws, name, yes)
    result = destroy(aws, name, keep_data=keep_data, delete_data=delete_data)
    if dry_run:
        render_destroy_plan(aws, output, result.to_dict(), f"mmsctl:lambda={name}")
        return
    notes = [f"kept {item['kind']} {item['id']} ({item['why']})" for item in result.kept]
    if any("data is kept" in item["why"] for item in result.kept):
        notes.append(f"to delete them too: mmsctl lambda destroy {name} --delete-data")
    render_removal(result.to_dict(), output, result.deleted, nothing=f"nothing of {name} left in {aws.region}",
                   notes=notes)


def _confirm_data_loss(aws: Any, name: str, yes: bool) -> None:
    """Ask before deleting objects or failed events (their counts in the question); without a terminal, only
    --yes goes on."""
    from mmsctl.cloud.lambda_.destroy import data_buckets, failure_queue

    if yes:
        return
    held = [f"{n} object{'s' * (n != 1)} in s3://{bucket}" for bucket, n in sorted(data_buckets(aws, name).items())]
    queue = failure_queue(aws, name)
    if queue is not None and queue[2]:
        held.append(f"{queue[2]} failed event{'s' * (queue[2] != 1)} in queue {queue[0]}")
    if not held:
        return
    what = ", ".join(held)
    if not sys.stdin.isatty():
        raise UsageError(f"destroy would delete {what}; confirm with --yes (no terminal to ask on)",
                         params=("delete_data", "yes"))
    if not typer.confirm(f"Delete {what}, every version?", default=False, err=True):
        raise UsageError("nothing deleted", param="delete_data")


# -- run-local ------------------------------------------------------------------------------------


@lambda_app.command("run-local")
@_RUN_LOCAL_WORDS.command
def run_local_cmd(
    name: str = typer.Argument(..., metavar="NAME", help="The function whose environment to use."),
    event_file: Optional[Path] = typer.Argument(None, metavar="[EVENT.json]", help="An event file (- for stdin)."),
    s3_put: Optional[str] = typer.Option(None, "--s3-put", metavar="S3_URI", help="S3's put notification for "
                                         "this existing object."),
    url: Optional[str] = typer.Option(None, "--image-url", metavar="URL", help="A function-URL GET ?url=URL."),
    serve: bool = typer.Option(False, "--serve", help="Answer Lambda's Invoke API on loopback instead "
                               "(aws lambda invoke --endpoint-url)."),
    port: int = option("--port", 9000, help="Port for --serve.", short=False, min=0, max=65535),
    model: Optional[str] = option("--model", help="Run without a deployed function: "
                                  "this model (path, zoo name or s3://…)."),
    build: Optional[Path] = option("--build", help="Run the image of this build "
                                   "context (its handler, code and environment)."),
    input_bucket: Optional[str] = typer.Option(None, "--input-bucket", metavar="BUCKET",
                                               help="Override: the only bucket records are read from."),
    output_bucket: Optional[str] = typer.Option(None, "--output-bucket", metavar="BUCKET",
                                                help="Override: where S3 answers are written."),
    input_prefix: Optional[str] = typer.Option(None, "--input-prefix", metavar="PREFIX",
                                               help="Override: stripped from input keys."),
    output_prefix: Optional[str] = typer.Option(None, "--output-prefix", metavar="PREFIX",
                                                help="Override: put before output keys."),
    memory: Optional[int] = option("--memory", help="Memory size to report "
                                   "(default: the function's)."),
    timeout: Optional[int] = option("--timeout", help="Timeout (default: the function's)."),
    fetch_allow: Optional[str] = typer.Option(None, "--fetch-allow", metavar="LIST",
                                              help="Non-public destinations ?url= may reach (default: the function's)."),
    region: Optional[str] = RegionOpt,
    profile: Optional[str] = ProfileOpt,
) -> None:
    """Run the image's handler in this process on a real event shape, against the configured AWS endpoint.

    The environment is the deployed function's (or --model / --build DIR). Example:
    mmsctl lambda run-local kitten --s3-put s3://in/cats/kitten.jpg
    """
    from mmsctl.cloud.lambda_.spec import check_lambda_name
    from mmsctl.lambda_ import run_local as local

    check_lambda_name(name)
    if build is not None and model is not None:
        from mmsctl.errors import UsageError

        raise UsageError("pass --build DIR or --model MODEL, not both (a build context names its model)")
    sources = [x for x in (event_file, s3_put, url) if x is not None]
    local.check_sources(len(sources), serve)
    if url is not None:
        _check_url(url)
    overrides = local.Overrides(model=model, input_bucket=input_bucket, output_bucket=output_bucket,
                                input_prefix=input_prefix, output_prefix=output_prefix, memory=memory, timeout=timeout,
                                fetch_allow=fetch_allow)
    needs_aws = (model is None and build is None) or s3_put is not None
    aws = aws_session(region, profile) if needs_aws else None
    plan = local.plan(aws, name, overrides, build)
    event = None if serve else local.event_from(aws, event_file, s3_put, url)
    ui = get_ui()

    def echo(line: str) -> None:
        if not ui.quiet:
            ui.err.file.write(line + "\n")
            ui.err.file.flush()

    code = local.run(plan, event, serve_port=port if serve else None, echo=echo, out=sys.stdout,
                     region=aws.region if aws is not None else os.environ.get("AWS_DEFAULT_REGION"))
    if code:
        raise typer.Exit(code)


# -- cost -----------------------------------------------------------------------------------------


@lambda_app.command("cost")
@_COST_WORDS.command
def cost_cmd(
    memory: int = option("--memory", 1024, help="Function memory (128-10240)."),
    duration_ms: float = option("--duration-ms", ..., help="Billed duration per request "
                                "(from `lambda invoke`; include init for cold starts)."),
    requests: int = option("--requests", 100_000, help="How many requests to price."),
    table_name: Optional[str] = option("--table", help="Put Lambda next to a "
                                       "published EC2/EI table (resnet152)."),
    output: str = OutputOpt,
) -> None:
    """Lambda's cost per 100,000 requests (and for --requests), in the same table as `ec2 cost`.

    Example: mmsctl lambda cost --memory 1024 --duration-ms 1180 --table resnet152
    """
    check_output(output)
    from mmsctl.cloud.aws import prices

    row = prices.lambda_estimate(memory, duration_ms, requests)
    ec2_rows = prices.table(table_name)[1] if table_name else []
    title = prices.table(table_name)[0] + " + Lambda" if table_name else None
    if render_data([*(r.to_dict() for r in ec2_rows), row.to_dict()], output):
        return
    data = [{"setup": r.label, "price": f"${r.hourly_price:.3f}/h", "throughput": f"{r.throughput:.2f} req/s",
             "cost": f"${r.cost_per_100k:.2f}", "source": r.price_source} for r in ec2_rows]
    per_gb_s = f"{row.per_gb_second:.10f}".rstrip("0")
    data.append({"setup": row.label, "price": f"${per_gb_s}/GB-s + ${row.per_million_requests:.2f}/1M req",
                 "throughput": "scales", "cost": f"${row.cost_per_100k:.2f}", "source": row.price_source})
    render_table(data, (Column("Setup", "setup"), Column("Price", "price", justify="right"),
                        Column("Throughput", "throughput", justify="right"),
                        Column("Per 100k requests", "cost", justify="right"),
                        Column("Price source", "source", wide=True)), wide=output == "wide", title=title)
    if requests != 100_000:
        get_ui().message(f"{requests} requests: ${row.total:.2f}")


def register(app: typer.Typer) -> None:
    app.add_typer(lambda_app, name="lambda")
