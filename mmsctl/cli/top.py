"""`mmsctl top`: a live monitor of a model server (Textual), or one snapshot with ``--once``."""

from __future__ import annotations

from typing import Optional

import typer

from mmsctl.cli.options import ContextOpt, check_output, global_context
from mmsctl.cli.render import Column, get_ui, render_data, render_table

__all__ = ["register"]

_COLUMNS = (
    Column("NAME", "name"),
    Column("VERSION", "version"),
    Column("READY", "ready", justify="right"),
    Column("MIN", "min", justify="right"),
    Column("MAX", "max", justify="right"),
    Column("BATCH", "batch", justify="right"),
    Column("QUEUE", "queue", justify="right"),
    Column("REQ/S", "rps", justify="right"),
    Column("P50", "p50", justify="right"),
    Column("P99", "p99", justify="right"),
    Column("MEAN", "mean", justify="right", wide=True),
    Column("ERR/S", "errors", justify="right"),
    Column("URL", "url", wide=True),
)


def top(
    context: Optional[str] = ContextOpt,
    interval: float = typer.Option(1.0, "--interval", "-i", help="Seconds between polls.", metavar="S"),
    readonly: bool = typer.Option(False, "--readonly", help="No scale/register/unregister actions."),
    once: bool = typer.Option(False, "--once", help="Print one snapshot (two polls, S apart) and exit."),
    output: str = typer.Option("table", "--output", "-o", help="Output format of --once.",
                               metavar="[table|wide|json|yaml]"),
    timeout: float = typer.Option(2.0, "--timeout", help="Seconds to wait for each request.", metavar="S"),
) -> None:
    """Watch a model server live: models, workers, requests/s, latency, queue (like k9s or nvitop).

    Works with mmsctl servers, TorchServe (metrics port) and real MMS (describe only; what it does not publish shows as n/a).

    Keys: Enter opens a model, + - scale, r register, d unregister, / filter, < > sort, p pause, ? help, q quit.
    """
    from mmsctl.errors import UsageError

    check_output(output)
    if interval < 0.1:
        raise UsageError(f"--interval must be at least 0.1 seconds, not {interval:g}")
    if timeout <= 0:
        raise UsageError("--timeout must be greater than 0")
    from mmsctl.client.contexts import resolve_context

    target = resolve_context(global_context(context))
    if target.is_fleet:  # the fleet view (models across members, a members view) is not built yet
        raise UsageError(f"context {target.name!r} is a fleet; `mmsctl top` watches one server",
                         hint="`mmsctl models list` and `mmsctl ping` show every member; for one member add "
                              "a context with its --inference and --management URLs")
    from mmsctl.tui.source import HttpSource

    source = HttpSource(target, timeout=timeout, describe_every=max(5.0, 5 * interval))
    if once:
        from mmsctl.tui.once import rows_for_table, snapshot_once

        snapshot = snapshot_once(source, interval)
        if not render_data(snapshot.to_dict(), output):
            render_table(rows_for_table(snapshot), _COLUMNS, wide=output == "wide")
        return
    import sys

    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("mmsctl top needs a terminal", hint="for scripts use: mmsctl top --once -o json")
    from mmsctl.tui.app import TopApp

    get_ui().quiet = True
    TopApp(source, interval=interval, readonly=readonly).run()


def register(app: typer.Typer) -> None:
    app.command("top")(top)
