"""`mmsctl models …`, `mmsctl scale` and `mmsctl ping`: manage any MMS/TorchServe/mmsctl server.

    mmsctl models list [-o wide|json|yaml] [--page-size N]
    mmsctl models describe squeezenet [--model-version 1.0]
    mmsctl models register squeezenet.mar --model-name sq --initial-workers 2
    mmsctl models unregister sq
    mmsctl scale sq --min-workers 4 --wait
    mmsctl ping [--all]

Each command picks its target once (:func:`_target`): the one server of its context
(:class:`ServerTarget`), or on a fleet context (`context add --members …` or `--fleet NAME`)
every member at once, one row per member (:class:`~mmsctl.cli.fanout.FleetTarget`). Both
offer the same operations, so a command calls one method and never branches on fleets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Protocol

import typer

from mmsctl.cli.options import ContextOpt, ModelVersionOpt, OutputOpt, check_output, global_context, output_option, option
from mmsctl.cli.render import Column, get_ui, human_size, render_data, render_table

if TYPE_CHECKING:  # pragma: no cover
    from mmsctl.client.contexts import Context
    from mmsctl.client.management import ManagementClient, ModelDetail

__all__ = ["ServerTarget", "Target", "complete_model_names", "context_name", "register"]

models_app = typer.Typer(
    name="models",
    help="Models on a server (MMS 1.1, TorchServe 0.12 or mmsctl): list, describe, register, unregister.",
    no_args_is_help=True,
)

TimeoutOpt: float = option("--timeout", 30.0, help="Seconds to wait for the server.")
WriteOutputOpt = output_option("text", "json", "yaml")


def complete_model_names(ctx: typer.Context, incomplete: str) -> list[str]:
    """Shell completion for MODEL: names from the current context's server (1 s, silent on failure)."""
    try:
        from mmsctl.client.contexts import resolve_context
        from mmsctl.client.management import ManagementClient

        name = ctx.params.get("context")
        parent = ctx.parent
        while not name and parent is not None:
            name = (parent.params or {}).get("context")
            parent = parent.parent
        with ManagementClient(resolve_context(name), timeout=1.0, retries=0) as client:
            names = [m.name for m in client.list_models()]
        return [n for n in names if n.startswith(incomplete)]
    except Exception:  # noqa: BLE001 - completion must never print a traceback into the shell
        return []


ModelArg: str = typer.Argument(..., help="Model name.", metavar="MODEL", autocompletion=complete_model_names)


def context_name(explicit: Optional[str]) -> Optional[str]:
    """``--context`` of this command, else of ``mmsctl --context``."""
    return global_context(explicit)


def _context(explicit: Optional[str]) -> "Context":
    from mmsctl.client.contexts import resolve_context

    return resolve_context(context_name(explicit))


class Target(Protocol):
    """What a command runs on: one server, or every member of a fleet (cli/fanout.py)."""

    def list_models(self, *, output: str, limit: int) -> None: ...

    def describe(self, model: str, version: Optional[str], *, output: str) -> None: ...

    def register(self, location: str, options: dict[str, Any], *, output: str, persisting: bool = False) -> None: ...

    def unregister(self, model: str, version: Optional[str], *, output: str) -> None: ...

    def scale(self, model: str, min_workers: int, max_workers: Optional[int], *, version: Optional[str],
              wait: bool, output: str) -> None: ...

    def ping(self, *, output: str) -> None: ...


def _target(explicit: Optional[str], timeout: float) -> Target:
    """The command's target, decided once: its context's server, or the fleet's members."""
    _checked(timeout)
    ctx = _context(explicit)
    if ctx.is_fleet:
        from mmsctl.cli.fanout import FleetTarget

        return FleetTarget(ctx, timeout)
    if ctx.protocol == "v2":  # the Open Inference Protocol: read-only
        from mmsctl.cli.v2_target import V2Target

        return V2Target(ctx, timeout)
    return ServerTarget(ctx, timeout)


# --- the commands: each picks its target once and calls one method ---

_LIST_COLUMNS = (
    Column("Name", "modelName"),
    Column("Version", "modelVersion", wide=True),
    Column("Workers", "workersH", wide=True, justify="right"),
    Column("Batch", "batchSize", wide=True, justify="right"),
    Column("URL", "modelUrl"),
)


@models_app.command("list")
def list_models(
    output: str = OutputOpt,
    page_size: int = typer.Option(
        100, "--page-size", min=1, max=100, metavar="N",
        help="Models per request (limit=N); every page is fetched (MMS and TorchServe send at most 100).",
    ),
    context: Optional[str] = ContextOpt,
    timeout: float = TimeoutOpt,
) -> None:
    """List the models registered on the server (every page). `-o wide` adds workers and batch size."""
    check_output(output)
    _target(context, timeout).list_models(output=output, limit=page_size)


@models_app.command("describe")
def describe(
    model: str = ModelArg,
    version: Optional[str] = option("--model-version", help="Model version (TorchServe; `all` describes every version)."),
    output: str = OutputOpt,
    context: Optional[str] = ContextOpt,
    timeout: float = TimeoutOpt,
) -> None:
    """Show a model's settings and its workers (status, start time, memory)."""
    check_output(output)
    _target(context, timeout).describe(model, version, output=output)


@models_app.command("register")
def register_model(
    location: str = typer.Argument(
        ..., help="Archive URL (http/https) or a file name in the server's model store.", metavar="LOCATION"
    ),
    name: Optional[str] = option("--model-name", help="Model name (default: the archive's)."),
    handler: Optional[str] = option("--handler", help="Handler overriding the archive's."),
    runtime: Optional[str] = option("--runtime", help="Runtime, e.g. python or python3."),
    batch_size: Optional[int] = option("--batch-size", help="Inference batch size.", short=False, min=1),
    max_batch_delay: Optional[int] = typer.Option(
        None, "--max-batch-delay", min=0, help="Milliseconds to wait to fill a batch.", metavar="MS"
    ),
    initial_workers: int = typer.Option(
        1, "--initial-workers", min=0, metavar="N",
        help="Workers to start (0: none, which MMS, TorchServe and mmsctl's server also do without it).",
    ),
    response_timeout: Optional[int] = typer.Option(
        None, "--response-timeout", min=1,
        help="Seconds a worker may take for one batch before it is replaced (sent as minutes to MMS 1.1).",
        metavar="S",
    ),
    synchronous: bool = typer.Option(
        True, "--synchronous/--no-synchronous", help="Wait for the workers to start before answering."
    ),
    persist: bool = typer.Option(False, "--persist", help="On an AWS fleet's context: also roll the model out to "
                                 "the fleet's launch template (blue/green), so instances launched later serve it."),
    output: str = WriteOutputOpt,
    context: Optional[str] = ContextOpt,
    timeout: float = option("--timeout", 120.0, help="Seconds to wait for the server."),
) -> None:
    """Register a model archive on the server (POST /models)."""
    check_output(output, ("text", "json", "yaml"))
    options = dict(model_name=name, handler=handler, runtime=runtime, batch_size=batch_size,
                   max_batch_delay=max_batch_delay, initial_workers=initial_workers,
                   response_timeout=response_timeout, synchronous=synchronous)
    target = _target(context, timeout)
    ctx = getattr(target, "ctx", None)  # a fan-out target's context: an AWS fleet's names it
    fleet = getattr(ctx, "fleet", None)
    if persist and not fleet:
        from mmsctl.errors import UsageError

        raise UsageError("--persist rolls a model out to an AWS fleet: use a fleet context "
                         "(mmsctl context add NAME --fleet FLEET)")
    target.register(location, options, output=output, persisting=persist)
    if persist:
        from mmsctl.cli.fleet.rollout import persist_model

        persist_model(str(fleet), getattr(ctx, "region", None), f"{name}={location}" if name else location, output)


@models_app.command("unregister")
def unregister_model(
    model: str = ModelArg,
    version: Optional[str] = ModelVersionOpt,
    context: Optional[str] = ContextOpt,
    timeout: float = option("--timeout", 60.0, help="Seconds to wait for the server."),
    output: str = WriteOutputOpt,
) -> None:
    """Unregister a model (DELETE /models/MODEL), stopping its workers."""
    check_output(output, ("text", "json", "yaml"))
    _target(context, timeout).unregister(model, version, output=output)


def scale(
    model: str = ModelArg,
    min_workers: int = typer.Option(..., "--min-workers", "--replicas", min=0, help="Workers to run.", metavar="N"),
    max_workers: Optional[int] = typer.Option(None, "--max-workers", min=0, help="Upper bound (default: N).", metavar="M"),
    version: Optional[str] = ModelVersionOpt,
    wait: bool = option("--wait", False, help="Wait until N workers are ready (exit 7 on timeout)."),
    timeout: float = option("--timeout", 120.0, help="Seconds --wait may take."),
    output: str = WriteOutputOpt,
    context: Optional[str] = ContextOpt,
) -> None:
    """Set a model's worker count on any server, like `kubectl scale` (PUT /models/MODEL)."""
    check_output(output, ("text", "json", "yaml"))
    if max_workers is not None and max_workers < min_workers:
        from mmsctl.errors import UsageError

        raise UsageError(f"--max-workers ({max_workers}) is below --min-workers ({min_workers})")
    _target(context, timeout).scale(model, min_workers, max_workers, version=version, wait=wait, output=output)


def ping(
    all_contexts: bool = option("--all", False, help="Every configured context, not just the current one."),
    output: str = OutputOpt,
    context: Optional[str] = ContextOpt,
    timeout: float = option("--timeout", 5.0, help="Seconds to wait for each server."),
) -> None:
    """Check server health (GET /ping) and tell MMS, TorchServe and mmsctl apart.

    Exits 0 when every server is healthy, else with the first failure's code
    (5 unreachable, 6 authentication, 7 timeout, 8 unhealthy). On a fleet context:
    every member (and the balancer), exit 4 when some of them fail.
    """
    check_output(output)
    if all_contexts:
        _ping_servers(_every_context(), output=output, timeout=_checked(timeout))
    else:
        _target(context, timeout).ping(output=output)


# --- one server ---

_WORKER_COLUMNS = (
    Column("Worker", "id"),
    Column("Status", "status"),
    Column("Started", "start_time"),
    Column("GPU", "gpu"),
    Column("Memory", "memory", justify="right"),
    Column("PID", "pid", wide=True, justify="right"),
)


def _describe_rows(detail: "ModelDetail") -> list[dict[str, Any]]:
    return [
        {"key": "Name", "value": detail.name},
        {"key": "Version", "value": detail.version},
        {"key": "URL", "value": detail.url},
        {"key": "Runtime", "value": detail.runtime},
        {"key": "Workers", "value": f"{detail.ready_workers} ready / {len(detail.workers)} "
         f"(min {detail.min_workers}, max {detail.max_workers})"},
        {"key": "Batch size", "value": detail.batch_size},
        {"key": "Max batch delay", "value": None if detail.max_batch_delay is None else f"{detail.max_batch_delay} ms"},
        {"key": "Response timeout", "value": None if detail.response_timeout is None else f"{detail.response_timeout} s"},
    ]


def _render_details(details: list["ModelDetail"], version: Optional[str], output: str) -> None:
    """Describe's table(s): the settings, then the workers, per version shown."""
    ui = get_ui()
    for i, detail in enumerate(details if version == "all" else details[:1]):
        if i:
            ui.out.print()
        render_table(_describe_rows(detail), (Column("Field", "key"), Column("Value", "value")))
        if detail.workers:
            ui.out.print()
            rows = [
                {
                    "id": w.id, "status": w.status, "start_time": w.start_time,
                    "gpu": "yes" if w.gpu else "no", "memory": human_size(w.memory_usage), "pid": w.pid,
                }
                for w in detail.workers
            ]
            render_table(rows, _WORKER_COLUMNS, wide=output == "wide")


def _answer(text: str) -> None:
    """The one result line of a write command, on stdout (like kubectl's "scaled")."""
    out = get_ui().out
    out.file.write(text + "\n")
    out.file.flush()


class ServerTarget:
    """The one server of a context; *timeout* is the command's ``--timeout`` (checked by the caller)."""

    def __init__(self, ctx: "Context", timeout: float) -> None:
        self.ctx = ctx
        self.timeout = timeout

    def _management(self, timeout: Optional[float] = None) -> "ManagementClient":
        from mmsctl.client.management import ManagementClient

        return ManagementClient(self.ctx, timeout=self.timeout if timeout is None else timeout)

    def list_models(self, *, output: str, limit: int) -> None:
        with self._management() as client:
            rows: list[dict[str, Any]] = [m.to_dict() for m in client.list_models(limit=limit)]
            if output == "wide":
                for row in rows:
                    detail = client.describe(row["modelName"])
                    row.update(
                        modelVersion=detail.version,
                        workersH=f"{detail.ready_workers}/{len(detail.workers)}",
                        batchSize=detail.batch_size,
                    )
        if render_data(rows, output):
            return
        if not rows:
            get_ui().message(f"no models on {client.server}")
            return
        render_table(rows, _LIST_COLUMNS, wide=output == "wide")

    def describe(self, model: str, version: Optional[str], *, output: str) -> None:
        with self._management() as client:
            details = client.describe_all(model, version)
        data: Any = [d.raw for d in details] if version == "all" else details[0].raw
        if not render_data(data, output):
            _render_details(details, version, output)

    def register(self, location: str, options: dict[str, Any], *, output: str, persisting: bool = False) -> None:
        with self._management() as client:
            result = client.register(location, timeout=self.timeout, **options)
            server = client.server
        if result.note:
            get_ui().warn(result.note)
        data = {"status": result.status, "message": result.message, "location": location,
                "modelName": result.model or options.get("model_name")}
        if render_data(data, output):
            return
        label = result.model or location
        state = "accepted, loading in the background" if result.in_progress else "registered"
        _answer(f"{label} {state} on {server}" + (f" (from {location})" if label != location else ""))

    def unregister(self, model: str, version: Optional[str], *, output: str) -> None:
        with self._management() as client:
            result = client.unregister(model, version)
            server = client.server
        if render_data({"status": result.status, "message": result.message, "modelName": model,
                        "version": version}, output):
            return
        state = "unregistering" if result.in_progress else "unregistered"
        _answer(f"{model}{'/' + version if version else ''} {state} on {server}")

    def scale(self, model: str, min_workers: int, max_workers: Optional[int], *, version: Optional[str],
              wait: bool, output: str) -> None:
        ui = get_ui()
        timeout = self.timeout
        with self._management(min(timeout, 30.0)) as client:
            if wait and not ui.quiet and ui.err.is_terminal:
                with ui.err.status(f"scaling {model} to {min_workers} workers…") as status:
                    def progress(detail: "ModelDetail") -> None:
                        status.update(f"scaling {model}: {detail.ready_workers}/{min_workers} workers ready…")

                    result = client.scale(model, min_workers, max_workers, version=version, wait=True,
                                          timeout=timeout, on_progress=progress)
            else:
                result = client.scale(model, min_workers, max_workers, version=version, wait=wait, timeout=timeout)
        if render_data(result.to_dict(), output):
            return
        noun = "worker" if min_workers == 1 else "workers"
        if result.waited:
            _answer(f"{model} scaled to {min_workers} {noun} ({result.ready} ready)")
        elif result.in_progress:
            _answer(f"{model} scaling to {min_workers} {noun} (the server is starting them; --wait waits)")
        else:
            _answer(f"{model} scaled to {min_workers} {noun}")

    def ping(self, *, output: str) -> None:
        _ping_servers([self.ctx], output=output, timeout=self.timeout)


# --- ping: one server, or every context (--all) ---

_PING_COLUMNS = (
    Column("Context", "context"),
    Column("URL", "url"),
    Column("Status", "status"),
    Column("Server", "server"),
    Column("Latency", "latency", justify="right"),
    Column("Version", "version", wide=True),
    Column("Source", "source", wide=True),
)


def _checked(timeout: float) -> float:
    if timeout <= 0:
        from mmsctl.errors import UsageError

        raise UsageError("--timeout must be more than 0")
    return timeout


def _every_context() -> list["Context"]:
    """Each local server as local:NAME (or `local`: MMS's ports), then contexts.toml's."""
    from mmsctl.client.contexts import LOCAL, ContextStore, instance_contexts, local_context

    store = ContextStore()
    local = instance_contexts() or ([] if LOCAL in store.names() else [local_context()])
    return [c for c in local if c.name not in store.names()] + store.all()


def _ping_servers(contexts: list["Context"], *, output: str, timeout: float) -> None:
    """Ping each context's server at once, print a row each, fail with the first failure's code."""
    from concurrent.futures import ThreadPoolExecutor

    from mmsctl.client.inference import InferenceClient, PingResult
    from mmsctl.errors import ApiError, ClientError, MmsError

    def check(ctx: "Context") -> PingResult:
        try:
            if ctx.protocol == "v2":
                from mmsctl.client.v2 import V2Client

                with V2Client(ctx, timeout=timeout) as v2:
                    return v2.ping()
            with InferenceClient(ctx, timeout=timeout) as client:
                return client.ping()
        except MmsError as exc:  # a context that cannot even be used (bad token file)
            return PingResult(ctx.inference_url, False, exc.message, error=exc)

    with ThreadPoolExecutor(max_workers=min(8, len(contexts))) as pool:
        results = list(pool.map(check, contexts))
    rows = []
    for ctx, result in zip(contexts, results):
        row = result.to_dict()
        row.update(context=ctx.name, source=ctx.source,
                   latency=None if result.latency_ms is None else f"{result.latency_ms:.0f} ms")
        rows.append(row)
    if not render_data(rows, output):
        render_table(rows, _PING_COLUMNS, wide=output == "wide")
    failed = [(ctx, r) for ctx, r in zip(contexts, results) if not r.healthy]
    if failed:
        ctx, first = failed[0]
        # A server that answered but is not healthy is an error answer (exit 8).
        error = first.error or ApiError(f"{ctx.name} ({first.url}) is not healthy: {first.status}")
        if len(contexts) > 1:
            error = _with_code(ClientError(f"{len(failed)} of {len(contexts)} servers not healthy"), error.exit_code)
        raise error


def _with_code(error: Any, code: int) -> Any:
    error.exit_code = code
    return error


def register(app: typer.Typer) -> None:
    app.add_typer(models_app, name="models")
    app.command("scale")(scale)
    app.command("ping")(ping)
