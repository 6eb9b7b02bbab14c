"""``mmsctl serve start|stop|status|logs|prune``: run the embedded MMS-compatible server.

Each server started here is an instance with a name (``--name``, default its inference
port) and is the context ``local:NAME``; ``local`` is the one running instance.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, List, Optional

import typer

from mmsctl.cli.hints import CommandWords
from mmsctl.cli.options import (
    OutputOpt,
    check_output,
    complete_instance_names,
    complete_running_instance_names,
    complete_zoo_names,
    option,
)
from mmsctl.cli.render import Column, get_ui, render_data, render_table
from mmsctl.errors import AmbiguousInstanceError, InstanceRunningError, MmsError
from mmsctl.exit_codes import INTERRUPTED

if TYPE_CHECKING:
    from mmsctl.server.config import ServerConfig

__all__ = ["register"]

serve_app = typer.Typer(
    name="serve",
    help="Run the embedded model server (speaks the MMS 1.1 inference and management APIs).",
    no_args_is_help=True,
)

def _held_hint(exc: MmsError) -> str:
    """What to do when another server holds the name or a port: stop that one (by name where several run)."""
    holder = getattr(exc, "holder", None)
    if holder is None:
        return "wait for the other `mmsctl serve` command, or end it"
    stop = f"`mmsctl serve stop -n {holder}`" if getattr(exc, "several", False) else "`mmsctl serve stop`"
    other = "another --name and --port" if getattr(exc, "held", "") == "the name" else "another --port"
    return f"stop it with {stop}, or start this one with {other}"


_PORT_HINT = "another program listens there: start this one with --port N (N, N+1 and N+2 free)"


def _which(also: str = "") -> Callable[[MmsError], str]:
    def hint(exc: MmsError) -> str:
        names = getattr(exc, "names", None) or ["NAME"]
        return f"say which with {' or '.join(f'-n {n}' for n in names[:3])}{also}"

    return hint


_START_WORDS = CommandWords(
    flags={"models": "--models", **{f"{api}_address": f"--{api}-address" for api in ("inference", "management", "metrics")}},
    hints=((InstanceRunningError, _held_hint),),
)
_PORT_WORDS = CommandWords(
    flags={"models": "--models", **{f"{api}_address": "--port" for api in ("inference", "management", "metrics")}},
    hints=_START_WORDS.hints,
)
#: No address typed (MMS's 8080, 8081, 8082): a taken port names no flag, it says which one to use.
_DEFAULT_WORDS = CommandWords(flags={"models": "--models"}, hints=(*_START_WORDS.hints, ("address-in-use", _PORT_HINT)))
_STOP_WORDS = CommandWords(hints=((AmbiguousInstanceError, _which(", or stop them all with --all")),))
_LOGS_WORDS = CommandWords(hints=((AmbiguousInstanceError, _which()),))

NameOpt: Optional[str] = option("--name", help="The instance (`serve status` lists them); default: the one running here.", autocompletion=complete_instance_names)
RunningNameOpt: Optional[str] = option("--name", help="The instance (`serve status` lists them); default: the one running here.", autocompletion=complete_running_instance_names)


@serve_app.command("start")
def start(
    models: List[str] = option("--models", [], help="Model to load at start-up: a zoo name (served under that name), a path (./m.mar, "
                               "./folder/), an http(s) URL or a file in --model-store; NAME=LOCATION names it. Repeat for more.", autocompletion=complete_zoo_names),
    port: Optional[int] = option("--port", help="Inference API on 127.0.0.1:N, management on N+1, metrics on N+2 "
                                 "(default 8080, 8081, 8082).", min=1, max=65533),
    model_store: Optional[Path] = typer.Option(None, "--model-store", help="Folder register urls resolve against.",
                                               metavar="DIR"),
    config_file: Optional[Path] = typer.Option(
        None, "--config", "--mms-config", help="An MMS config.properties file.", metavar="FILE"
    ),
    inference_address: Optional[str] = typer.Option(None, "--inference-address", metavar="URL",
                                                    help="Inference API address (MMS's inference_address)."),
    management_address: Optional[str] = typer.Option(None, "--management-address", metavar="URL",
                                                     help="Management API address."),
    metrics_address: Optional[str] = typer.Option(None, "--metrics-address", metavar="URL",
                                                  help="Metrics address."),
    workers: Optional[int] = option("--workers", help="Workers per start-up model and per register without "
                                    "initial_workers (default_workers_per_model; unset: 1 and 0).", min=0),
    worker_limit: Optional[int] = typer.Option(
        None, "--worker-limit", min=1, metavar="N",
        help="Most worker processes of all models together (worker_limit; default: 4 per core, "
        "at most one per 256 MiB of memory)."),
    token_file: Optional[Path] = option("--token-file", help="Require a bearer token (plain file or TorchServe key_file.json)."),
    name: Optional[str] = option("--name", help="Instance name (default: the inference port, e.g. 8080); its context is "
                                 "local:NAME."),
    foreground: bool = typer.Option(False, "--foreground", help="Run in this terminal until Ctrl+C."),
    timeout: float = option("--timeout", 300.0, help="Seconds to wait for the server to be ready."),
) -> None:
    """Start a server; return once its APIs answer and the start-up models have READY workers."""
    from mmsctl.server.control import build_config, start_background, start_foreground

    ui = get_ui()
    from mmsctl.cli.options import note_model_locations

    note_model_locations(models)
    typed = port is not None or any((inference_address, management_address, metrics_address))
    with (_PORT_WORDS if port is not None else _START_WORDS if typed else _DEFAULT_WORDS).applied():
        config = build_config(
            models=models, model_store=model_store, config_file=config_file,
            inference_address=inference_address, management_address=management_address,
            metrics_address=metrics_address, workers=workers, token_file=token_file, name=name, port=port,
            worker_limit=worker_limit,
        )
        if foreground:
            raise typer.Exit(start_foreground(config))
        state = start_background(config, timeout=timeout, on_wait=lambda: ui.message(
            f"starting mmsctl server {config.instance_name} (log: {_log_hint(config)}) ..."))
    ui.message(f"server {state.name} ready (pid {state.pid}; context local:{state.name})")
    ui.message(f"  inference:  {state.inference_url}")
    ui.message(f"  management: {state.management_url}")
    ui.message(f"  metrics:    {state.metrics_url}/metrics")
    if state.models:
        ui.message(f"  models:     {', '.join(state.models)}")
    for note in state.notes:
        ui.message(f"  {note}")


def _log_hint(config: ServerConfig) -> str:
    from mmsctl.local_servers import Instance

    return str(Instance(config.instance_name).log_file)


_STOPPED = {
    "stopped": "server {name} stopped",
    "killed": "server {name} stopped (killed after the timeout)",
    "died": "server {name} had died (killed or crashed); marked died and cleaned up",
    "not running": "server {name} is not running; nothing to stop",
}


@serve_app.command("stop")
def stop(
    name: Optional[str] = RunningNameOpt,
    all_: bool = option("--all", False, help="Stop every running instance.", short=False),
    timeout: float = option("--timeout", 30.0, help="Seconds to answer queued and in-flight requests before killing."),
) -> None:
    """Stop a server after it has answered queued and in-flight requests.

    Without --name: the one server running here (several: say which, or --all). Nothing running is not an
    error (exit 0, with a note); a --name that is no instance here is (exit 3).
    """
    from mmsctl.server.control import stop_instances

    stopped_any = False
    with _STOP_WORDS.applied():
        for stopped, outcome in stop_instances(name, all_=all_, timeout=timeout):
            stopped_any = True
            get_ui().message(_STOPPED[outcome].format(name=stopped))
    if not stopped_any:
        get_ui().message("no mmsctl server is running; nothing to stop")


@serve_app.command("status")
def status(
    name: Optional[str] = NameOpt,
    output: str = OutputOpt,
) -> None:
    """Show the servers started here: status, pid, addresses, models."""
    from mmsctl.server.control import status_rows

    output = check_output(output)
    rows = status_rows(name)
    if render_data(rows, output):
        return
    if not rows:
        get_ui().message("no mmsctl server instances")
        return
    render_table(rows, [
        Column("Name", "name"), Column("Status", "status"), Column("Pid", "pid", justify="right"),
        Column("Inference", "inference_url"), Column("Management", "management_url"),
        Column("Metrics", "metrics_url", wide=True), Column("Models", "models"),
        Column("Uptime", "uptime", justify="right"), Column("Log", "log_file", wide=True),
    ], wide=output == "wide")


@serve_app.command("logs")
def logs(
    name: Optional[str] = NameOpt,
    follow: bool = option("--follow", False, help="Keep printing new lines (Ctrl+C stops)."),
    tail: int = typer.Option(-1, "--tail", help="Only the last N lines (-1: all).", metavar="N"),
) -> None:
    """Print a server's log (worker output included)."""
    from mmsctl.server.control import print_logs

    with _LOGS_WORDS.applied():
        try:
            print_logs(name, follow=follow, tail=tail, out=get_ui().out.file)
        except KeyboardInterrupt:
            if not follow:
                raise
            raise typer.Exit(INTERRUPTED) from None  # Ctrl+C is how following ends


@serve_app.command("prune")
def prune() -> None:
    """Remove the stopped instances (their state, config and log) from `serve status`."""
    from mmsctl.server.control import prune_instances

    removed = prune_instances()
    get_ui().message(f"removed {len(removed)} stopped instance{'s' if len(removed) != 1 else ''}"
                     + (f": {', '.join(removed)}" if removed else ""))


def register(app: typer.Typer) -> None:
    app.add_typer(serve_app, name="serve")
