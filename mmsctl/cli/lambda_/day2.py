"""`mmsctl lambda invoke | logs | list | describe | destroy | run-local | cost`: the deployed function in use and
on its day two, and the handler run locally."""

from __future__ import annotations

import json
import os
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


def _check_url(url: str) -> str:
    """``--image-url``: an http(s) URL the function can fetch, checked before any call (as the function checks it)."""
    from mmsctl.predict.fetch import FetchError, check_url

    try:
        return check_url(url)
    except FetchError as exc:
        raise UsageError(f"--image-url: {exc.message}") from None


def invoke_cmd(
    name: str = typer.Argument(..., metavar="NAME", help="The function (`lambda list` shows them)."),
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
        raise UsageError(f"give {'only ' if given else ''}one of IMAGE, --image-url URL or --s3 FILE")
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


def logs_cmd(
    name: str = typer.Argument(..., metavar="NAME", help="The function (`lambda list` shows them)."),
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


def list_cmd(region: Optional[str] = RegionOpt, profile: Optional[str] = ProfileOpt, output: str = OutputOpt) -> None:
    """List the functions mmsctl deployed (found by their mmsctl:lambda tag)."""
    check_output(output)
    from mmsctl.cloud.lambda_.query import list_functions

    rows = list_functions(aws_session(region, profile))
    if not render_data(rows, output):
        render_table(rows, FUNCTION_COLUMNS, wide=output == "wide")


def describe_cmd(name: str = typer.Argument(..., metavar="NAME", help="The function (`lambda list` shows them)."), region: Optional[str] = RegionOpt,
                 profile: Optional[str] = ProfileOpt, output: str = OutputOpt) -> None:
    """Show one function: image, model, role, URL, S3 trigger, schedule, permissions, tags."""
    check_output(output)
    from mmsctl.cloud.lambda_.query import describe_function

    info = describe_function(aws_session(region, profile), name)
    if not render_data(info, output):
        _fields(info)


def destroy_cmd(
    name: str = typer.Argument(..., metavar="NAME", help="The function (`lambda list` shows them)."),
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
    input_bucket: Optional[str] = option("--input-bucket", help="Override: the only bucket records are read from."),
    output_bucket: Optional[str] = option("--output-bucket", help="Override: where S3 answers are written."),
    input_prefix: Optional[str] = option("--input-prefix", help="Override: stripped from input keys."),
    output_prefix: Optional[str] = option("--output-prefix", help="Override: put before output keys."),
    memory: Optional[int] = option("--memory", help="Memory size to report "
                                   "(default: the function's)."),
    timeout: Optional[int] = option("--timeout", help="Timeout (default: the function's)."),
    fetch_allow: Optional[str] = option("--fetch-allow", help="Non-public destinations ?url= may reach (default: the function's)."),
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


def add_commands(app: typer.Typer) -> None:
    """These commands of ``mmsctl lambda`` on *app*, after ``build`` and ``deploy``."""
    app.command("invoke")(_INVOKE_WORDS.command(invoke_cmd))
    app.command("logs")(_LOGS_WORDS.command(logs_cmd))
    app.command("list")(list_cmd)
    app.command("describe")(describe_cmd)
    app.command("destroy")(destroy_cmd)
    app.command("run-local")(_RUN_LOCAL_WORDS.command(run_local_cmd))
    app.command("cost")(_COST_WORDS.command(cost_cmd))
