"""`mmsctl top`: a live monitor of a model server (Textual), or one snapshot with ``--once``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import typer

from mmsctl.cli.options import ContextOpt, check_output, global_context, option, output_option
from mmsctl.cli.render import Column, get_ui, render_data, render_table

if TYPE_CHECKING:  # pragma: no cover
    from mmsctl.tui.source import DataSource

__all__ = ["one_model_words", "register"]

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
_MEMBERS = Column("MEMBERS", "members", justify="right")
_MEMBER_COLUMNS = (
    Column("MEMBER", "member"),
    Column("STATE", "state"),
    Column("KIND", "kind"),
    Column("MODELS", "models", justify="right"),
    Column("WORKERS", "workers", justify="right"),
    Column("REQ/S", "rps", justify="right"),
    Column("CPU", "cpu", justify="right", wide=True),
    Column("POLL", "poll", justify="right", wide=True),
    Column("LAST ERROR", "error"),
    Column("URL", "url", wide=True),
)


def top(
    context: Optional[str] = ContextOpt,
    interval: float = typer.Option(1.0, "--interval", "-i", help="Seconds between polls.", metavar="S"),
    readonly: bool = typer.Option(False, "--readonly", help="No scale/register/unregister actions."),
    once: bool = typer.Option(False, "--once", help="Print one snapshot (two polls, S apart) and exit."),
    output: str = output_option(help="Output format of --once."),
    timeout: float = option("--timeout", 2.0, help="Seconds to wait for each request."),
) -> None:
    """Watch a model server live: models, workers, requests/s, latency, queue (like k9s or nvitop).

    Works with mmsctl servers, TorchServe (metrics port), real MMS (describe only; what it does not publish shows as n/a)
    and SageMaker endpoints (--context sagemaker:NAME: instances, and CloudWatch's invocations and latency).
    On a fleet context (--members / --fleet) each model is combined across the members, m shows the members,
    and actions apply to every member.

    Keys: Enter opens a model, + - scale, r register, d unregister, / filter, < > sort, m members, p pause, ? help, q quit.
    """
    from mmsctl.errors import UsageError

    check_output(output)
    if interval < 0.1:
        raise UsageError(f"--interval must be at least 0.1 seconds, not {interval:g}")
    if timeout <= 0:
        raise UsageError("--timeout must be greater than 0")
    import sys

    if not once and not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("mmsctl top needs a terminal", hint="for scripts use: mmsctl top --once -o json")
    from mmsctl.client.contexts import resolve_context

    target = resolve_context(global_context(context))
    describe_every = max(5.0, 5 * interval)
    source: "DataSource"
    if target.sagemaker:  # CloudWatch's figures and the endpoint's instances, through AWS
        from mmsctl.cli.aws import aws_session
        from mmsctl.tui.sagemaker_source import SageMakerSource

        aws = aws_session(target.region, None)  # no region or credentials: said here, once
        source = SageMakerSource(target.sagemaker, lambda: aws, one_model=one_model_words(target.sagemaker))
    elif target.is_fleet:
        from mmsctl.cli.fanout import fleet_members
        from mmsctl.tui.fleet_source import FleetSource

        # Live, a poll waits for a slow member only so long; the view goes on with its last answer.
        source = FleetSource.over_http(target.name, fleet_members(target), token_file=target.token_file,
                                       timeout=timeout, describe_every=describe_every,
                                       patience=None if once else 0.8 * min(interval, timeout))
    else:
        from mmsctl.tui.source import HttpSource

        source = HttpSource(target, timeout=timeout, describe_every=describe_every)
    if once:
        _print_once(source, interval, output)
        return
    from mmsctl.tui.app import TopApp

    get_ui().quiet = True
    TopApp(source, interval=interval, readonly=readonly).run()


def one_model_words(endpoint: str) -> str:
    """Why top's register and unregister are refused on a SageMaker endpoint, and the commands that do it."""
    return (f"a SageMaker endpoint serves one model: `mmsctl sagemaker update {endpoint} --model MODEL` changes "
            f"it, `mmsctl sagemaker destroy {endpoint}` removes it")


def _print_once(source: "DataSource", interval: float, output: str) -> None:
    """One snapshot; on a fleet also the members, then exit 4 naming any member that did not answer."""
    from mmsctl.tui.once import members_down, rows_for_members, rows_for_table, snapshot_once

    snapshot = snapshot_once(source, interval)
    if not render_data(snapshot.to_dict(), output):
        wide = output == "wide"
        columns = (*_COLUMNS[:2], _MEMBERS, *_COLUMNS[2:]) if snapshot.is_fleet else _COLUMNS
        render_table(rows_for_table(snapshot), columns, wide=wide)
        if snapshot.is_fleet:
            get_ui().out.print()
            render_table(rows_for_members(snapshot), _MEMBER_COLUMNS, wide=wide)
    failure = members_down(snapshot)
    if failure is not None:
        raise failure


def register(app: typer.Typer) -> None:
    app.command("top")(top)
