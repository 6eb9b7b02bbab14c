"""What ``mmsctl lambda run-local`` runs: the handler's environment, the event, and the run itself.

This is orchestration on the user's machine, above both sides: it reads the deployed
function through the AWS plumbing (:mod:`mmsctl.cloud.aws`), builds the event with the
shared shapes (:mod:`mmsctl.cloud.lambda_.events`) and runs the image's own handler.

The environment is the deployed function's own (``GetFunctionConfiguration``: its
``MMSCTL_LAMBDA_*`` variables, memory and timeout), or the one ``--model`` and the
bucket flags describe, or a build context's (``--build DIR``: the Dockerfile's
environment, with the baked model read from ``DIR/model``). The handler then runs in
this process (:mod:`mmsctl.lambda_.local`), or, for ``--build``, in a fresh
interpreter that imports mmsctl from ``DIR/task``, exactly the code the image holds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, TextIO

from mmsctl.cloud.lambda_ import env
from mmsctl.cloud.lambda_ import events
from mmsctl.cloud.aws.errors import aws_code
from mmsctl.errors import CloudError, HandlerError, NotFoundError, UsageError
from mmsctl.lambda_.local import LocalFunction, serve

__all__ = ["FunctionNotDeployed", "LocalPlan", "ModelInImage", "Overrides", "check_sources", "event_from", "plan",
           "run"]


class FunctionNotDeployed(NotFoundError):
    """No deployed function to take the environment from (a model or a build context would do)."""

    reference = "lambda-function-not-deployed"


class ModelInImage(UsageError):
    """The function's model is baked into its image: only its build context (or another model) can run it here."""

    reference = "lambda-model-in-image"

MAX_EVENT = 6 * 1024 * 1024


@dataclass
class Overrides:
    """Flags that replace parts of the function's environment."""

    model: Optional[str] = None
    input_bucket: Optional[str] = None
    output_bucket: Optional[str] = None
    input_prefix: Optional[str] = None
    output_prefix: Optional[str] = None
    memory: Optional[int] = None
    timeout: Optional[int] = None
    fetch_allow: Optional[str] = None


@dataclass
class LocalPlan:
    function_name: str
    handler: str
    env: dict[str, str] = field(default_factory=dict)
    memory: int = 1024
    timeout: int = 30
    code_dir: Optional[Path] = None  # --build: import mmsctl from here


def check_sources(count: int, serve: bool) -> None:
    """One event (a file, an S3 put or a function-URL GET), or none when serving."""
    if serve and count:
        raise UsageError("serving answers invocations as they come: give no event with it", param="serve")
    if not serve and count != 1:
        raise UsageError("give one event (an event file, an S3 put notification or a function-URL GET), "
                         "or serve invocations", param="event")


def _function_environment(aws: Any, name: str) -> tuple[dict[str, str], int, int]:
    try:
        config = aws.call("lambda", "get_function_configuration", FunctionName=name)
    except CloudError as exc:
        if aws_code(exc) == "ResourceNotFoundException":
            raise FunctionNotDeployed(f"no function {name} in {aws.region}",
                                      hint="deploy it first, or run without one on a model") from exc
        raise
    variables = (config.get("Environment") or {}).get("Variables") or {}
    mine = {k: str(v) for k, v in variables.items() if k.startswith(env.ENV_PREFIX)}
    if env.ENV_MODEL not in mine:
        raise ModelInImage(f"function {name}'s model is baked into its image",
                           hint="run the image's build context, or name the model")
    return mine, int(config.get("MemorySize") or 1024), int(config.get("Timeout") or 30)


def plan(aws: Any, name: str, overrides: Overrides, build: Optional[Path]) -> LocalPlan:
    """The environment, handler, memory and timeout for a local run of function *name*."""
    code_dir = None
    handler = env.HANDLER
    memory, timeout = 1024, 30
    if build is not None:
        from mmsctl.cloud.lambda_.manifest import BuildContext

        ctx = BuildContext.read(build)
        variables = {k: v for k, v in ctx.env.items() if k != "MMSCTL_CACHE_DIR"}  # the image's is read-only
        if ctx.baked:
            variables[env.ENV_MODEL] = str((Path(build) / "model").resolve())
        handler, code_dir = ctx.handler, (Path(build) / "task").resolve()
    elif overrides.model is not None:
        variables = {env.ENV_MODEL: overrides.model}
    else:
        variables, memory, timeout = _function_environment(aws, name)
    for key, value in ((env.ENV_INPUT_BUCKET, overrides.input_bucket), (env.ENV_OUTPUT_BUCKET, overrides.output_bucket),
                       (env.ENV_INPUT_PREFIX, overrides.input_prefix), (env.ENV_OUTPUT_PREFIX, overrides.output_prefix),
                       (env.ENV_FETCH_ALLOW, overrides.fetch_allow)):
        if value is not None:
            variables[key] = value
    return LocalPlan(name, handler, variables, overrides.memory or memory, overrides.timeout or timeout, code_dir)


def _read_event(path: Path) -> Any:
    try:
        if str(path) == "-":
            raw = sys.stdin.buffer.read(MAX_EVENT + 1)
        else:
            with open(path, "rb") as fh:
                raw = fh.read(MAX_EVENT + 1)
    except FileNotFoundError as exc:
        raise NotFoundError(f"{path}: no such file") from exc
    if len(raw) > MAX_EVENT:
        raise UsageError(f"{path}: an event is at most {MAX_EVENT} bytes (Lambda's payload limit)")
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise UsageError(f"{path}: not JSON: {exc}") from exc
    except RecursionError:
        raise UsageError(f"{path}: not JSON Lambda takes: nested too deep") from None


def event_from(aws: Any, event_file: Optional[Path], s3_put: Optional[str], url: Optional[str]) -> Any:
    """The event to pass: read from a file, or built from an existing S3 object or a URL (checked by the caller)."""
    if event_file is not None:
        return _read_event(event_file)
    if url is not None:
        return events.function_url_event("GET", query={"url": url})
    assert s3_put is not None
    try:
        where = env.parse_s3_uri(s3_put)
    except Exception as exc:  # noqa: BLE001 - ConfigError: the flag's fault
        raise UsageError(f"S3 put: {getattr(exc, 'message', exc)}", param="s3_put") from None
    try:
        head = aws.call("s3", "head_object", Bucket=where.bucket, Key=where.key)
    except CloudError as exc:
        if aws_code(exc) in ("404", "NoSuchKey", "NotFound", "NoSuchBucket"):
            raise NotFoundError(f"no object {s3_put}", hint="the event describes an object that exists: upload it first") from exc
        raise
    version = head.get("VersionId")
    return events.s3_put_event(where.bucket, where.key, size=int(head.get("ContentLength") or 0),
                               etag=str(head.get("ETag") or ""), version_id=version if version != "null" else None,
                               region=aws.region, account=aws.account_id())


def _lambda_environ(p: LocalPlan, work: str, region: Optional[str]) -> dict[str, str]:
    extra = dict(p.env)
    extra.setdefault(env.ENV_WORK_DIR, work)
    extra.update(AWS_LAMBDA_FUNCTION_NAME=p.function_name, AWS_LAMBDA_FUNCTION_MEMORY_SIZE=str(p.memory),
                 AWS_LAMBDA_FUNCTION_VERSION="$LATEST", AWS_LAMBDA_LOG_GROUP_NAME=f"/aws/lambda/{p.function_name}")
    if region:
        extra.update(AWS_DEFAULT_REGION=region, AWS_REGION=region)
    return extra


def run(p: LocalPlan, event: Any, *, serve_port: Optional[int], echo: Callable[[str], None], out: TextIO,
        region: Optional[str]) -> int:
    """Run the handler once on *event* (or serve the Invoke API on *serve_port*); the exit code.

    Raises:
        HandlerError: the handler raised (its error payload is printed first, as Lambda returns it).
    """
    work = tempfile.mkdtemp(prefix="mmsctl-lambda-")
    try:
        if p.code_dir is not None:
            return _run_child(p, event, serve_port, _lambda_environ(p, work, region), work)
        return _run_here(p, event, serve_port, _lambda_environ(p, work, region), echo, out, region)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run_here(p: LocalPlan, event: Any, serve_port: Optional[int], extra: dict[str, str],
              echo: Callable[[str], None], out: TextIO, region: Optional[str]) -> int:
    saved = dict(os.environ)
    os.environ.update(extra)
    try:
        function = LocalFunction(p.handler, function_name=p.function_name, memory_mb=p.memory,
                                 timeout_s=float(p.timeout), region=region or "us-east-1", echo=echo, fresh=True)
        echo(f"INIT handler {p.handler} ({function.module_file}) in {function.init_ms or 0:.0f} ms")
        if serve_port is not None:
            serve(function, port=serve_port, announce=echo)
            return 0
        result = function.invoke(event)
        if result.timed_out:
            echo(f"{result.request_id} Task timed out after {float(p.timeout):.2f} seconds")
        echo(result.report_line())
        out.write(json.dumps(result.error if result.error is not None else result.payload, indent=2) + "\n")
        out.flush()
        if result.error is not None:
            raise HandlerError(f"the handler raised {result.error['errorType']}: {result.error['errorMessage']}",
                               hint="Lambda would report this invocation as failed (and retry an S3 event)")
        return 0
    finally:
        os.environ.clear()
        os.environ.update(saved)


def context_runner(handler: str) -> str:
    """The module that runs a build context's *handler* in the child: the ``local`` beside the handler's package
    (``mmsctl.lambda_.local`` for ``mmsctl.lambda_.handler.handler``), so a context runs with its own code's layout."""
    package = handler.rsplit(".", 2)[0]
    return f"{package}.local"


def _run_child(p: LocalPlan, event: Any, serve_port: Optional[int], extra: dict[str, str], work: str) -> int:
    assert p.code_dir is not None
    child_env = {**os.environ, **extra}
    child_env["PYTHONPATH"] = os.pathsep.join([str(p.code_dir), *filter(None, [os.environ.get("PYTHONPATH")])])
    args = [sys.executable, "-m", context_runner(p.handler), "--handler", p.handler,
            "--function-name", p.function_name, "--memory", str(p.memory), "--timeout", str(p.timeout)]
    if serve_port is not None:
        args += ["--serve", str(serve_port)]
    else:
        event_path = Path(work) / "event.json"
        event_path.write_text(json.dumps(event), encoding="utf-8")
        args += ["--event", str(event_path)]
    sys.stdout.flush()
    try:
        return subprocess.run(args, env=child_env, cwd=str(p.code_dir)).returncode
    except KeyboardInterrupt:
        return 130
