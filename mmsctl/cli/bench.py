"""`mmsctl bench`: measure a model server the way the MMS 1.0 launch post did.

    mmsctl bench squeezenet kitten.jpg --concurrency 1,10,100
    mmsctl bench --noop --concurrency 1,10,100,200,500 --save run.json
    mmsctl bench squeezenet photos/ --rate 50,100,200 --duration 30s
    mmsctl bench --noop --context old --compare new
    mmsctl bench show run.json [other.json]
    mmsctl bench noop-archive ./store

``mmsctl bench MODEL …`` is ``mmsctl bench run MODEL …`` (``run`` may be left out).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, List, Optional

import typer
from typer.core import TyperGroup

from mmsctl.cli.options import (
    ContextOpt,
    ModelVersionOpt,
    check_output,
    complete_context_names,
    global_context,
    option,
    output_option,
)
from mmsctl.cli.hints import CommandWords
from mmsctl.cli.render import Column, get_ui, render_data, render_table

if TYPE_CHECKING:  # pragma: no cover
    from mmsctl.loadtest.results import BenchRun, Level, Sweep
    from mmsctl.loadtest.sweep import Target, Tick

__all__ = ["register"]

_OUTPUTS = ("table", "wide", "json", "csv")
#: The sweep's arguments (mmsctl/loadtest/sweep.py names them, not their flags).
_PLAN_WORDS = CommandWords(flags={name: f"--{name}" for name in
                                  ("duration", "warmup", "timeout", "rate", "concurrency", "requests", "processes")})
#: The run's arguments (mmsctl/loadtest/runner.py, noop.py, pool.py, inputs.py) and their fixes.
_RUN_WORDS = CommandWords(
    flags={"noop": "--noop", "noop_url": "--noop-url", "location": "--noop-url", "workers": "--noop-workers"},
    hints=(
        ("bench-noop-store-not-writable", "copy `mmsctl bench noop-archive DIR`'s archive there and pass --noop-url"),
        ("bench-noop-archive-needed", "write the archive with `mmsctl bench noop-archive DIR`, copy it into the "
                                      "server's model store and pass --noop-url mmsctl-noop.mar (or host it and "
                                      "pass its http(s) URL)"),
        ("processes", "run again with --processes 1"),
        ("inputs", "pass image files, folders or globs, or use --noop to measure the server alone"),
        ("bench-noop-v2", "give the context the server's MMS management URL (`mmsctl context add NAME --protocol v2 "
                          "--inference URL --management URL`, as `mmsctl serve` has), or bench a model it serves"),
    ),
)


class _RunByDefault(TyperGroup):
    """``mmsctl bench ARGS`` runs ``bench run ARGS`` unless ARGS start with a subcommand or --help."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


bench_app = typer.Typer(
    cls=_RunByDefault,
    help="Measure a model server (MMS 1.1, TorchServe 0.12, mmsctl): latency, goodput and success rate "
    "at growing concurrency or rate; compare two servers; `bench show` re-renders saved runs. "
    "`mmsctl bench MODEL [INPUT…]` is short for `mmsctl bench run …`.",
    no_args_is_help=True,
)

_COLUMNS = (
    Column("Target", "target"),
    Column("Level", "level", justify="right"),
    Column("Time", "time", justify="right", wide=True),
    Column("Sent", "sent", justify="right"),
    Column("OK", "ok", justify="right"),
    Column("Success", "success", justify="right"),
    Column("OK/s", "goodput", justify="right"),
    Column("p50", "p50", justify="right"),
    Column("p90", "p90", justify="right"),
    Column("p99", "p99", justify="right"),
    Column("p99.9", "p99.9", justify="right"),
    Column("Max", "max", justify="right"),
    Column("Srv queue", "queue", justify="right"),
    Column("Srv infer", "infer", justify="right"),
    Column("Errors", "errors"),
)
_RATIO_COLUMNS = (
    Column("Level", "level", justify="right"),
    Column("OK/s A", "goodput_a", justify="right"),
    Column("OK/s B", "goodput_b", justify="right"),
    Column("B/A", "goodput_ratio", justify="right"),
    Column("p99 A", "p99_a", justify="right"),
    Column("p99 B", "p99_b", justify="right"),
    Column("B/A ", "p99_ratio", justify="right"),
    Column("Success A", "success_a", justify="right"),
    Column("Success B", "success_b", justify="right"),
)


def _ms(value: Optional[float]) -> Optional[str]:
    return None if value is None else f"{value:,.1f} ms" if value >= 10 else f"{value:.2f} ms"


def _times(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _table_rows(run: "BenchRun") -> list[dict[str, Any]]:
    from mmsctl.loadtest.report import level_rows

    out = []
    for row in level_rows(run):
        out.append({
            "target": row["target"], "level": row["level"], "time": f"{row['duration_s']:.1f} s", "sent": f"{row['sent']:,}", "ok": f"{row['ok']:,}",
            "success": f"{row['success_pct']:.1f}%", "goodput": f"{row['goodput']:,.1f}",
            "p50": _ms(row["p50_ms"]), "p90": _ms(row["p90_ms"]), "p99": _ms(row["p99_ms"]),
            "p99.9": _ms(row["p99.9_ms"]), "max": _ms(row["max_ms"]),
            "queue": _ms(row["server_queue_ms"]), "infer": _ms(row["server_inference_ms"]),
            "errors": row["errors"] or None,
        })
    return out


def _render(run: "BenchRun", output: str) -> None:
    """The run as a table, the --compare ratios and the chart; or json / csv on stdout."""
    from mmsctl.loadtest.chart import render_chart
    from mmsctl.loadtest.report import compare_rows, level_rows, to_csv

    ui = get_ui()
    if output == "csv":
        ui.out.file.write(to_csv(level_rows(run)))
        ui.out.file.flush()
        return
    if render_data(run.to_dict(), output):
        return
    sweeps = run.sweeps
    columns = [c for c in _COLUMNS if c.key != "target" or len(sweeps) > 1]
    if not any(lvl.server for s in sweeps for lvl in s.levels):
        columns = [c for c in columns if c.key not in ("queue", "infer")]
    render_table(_table_rows(run), columns, wide=output == "wide")
    if len(sweeps) == 2:
        a, b = sweeps
        ui.out.file.write(f"\nB/A: {b.target} against {a.target}\n")
        ratios = [{"level": r["level"], "goodput_a": f"{r['goodput_a']:,.1f}", "goodput_b": f"{r['goodput_b']:,.1f}",
                   "goodput_ratio": _times(r["goodput_ratio"]), "p99_a": _ms(r["p99_a"]), "p99_b": _ms(r["p99_b"]),
                   "p99_ratio": _times(r["p99_ratio"]), "success_a": f"{r['success_a']:.1f}%",
                   "success_b": f"{r['success_b']:.1f}%"} for r in compare_rows(a, b)]
        render_table(ratios, _RATIO_COLUMNS)
    chart = render_chart(sweeps, width=min(ui.out.width, 140))
    if chart:
        ui.out.file.write("\n" + chart)
    ui.out.file.flush()


class _Live:
    """The live progress line on stderr (rich), and one line per finished level."""

    def __init__(self) -> None:
        self.ui = get_ui()
        self.progress: Any = None
        self.task: Any = None

    def __enter__(self) -> "_Live":
        if not self.ui.quiet and self.ui.err.is_terminal:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self.progress = Progress(TextColumn("{task.description}"), BarColumn(bar_width=24),
                                     TextColumn("{task.fields[figures]}"), TimeElapsedColumn(),
                                     console=self.ui.err, transient=True, refresh_per_second=8)
            self.progress.start()
            self.task = self.progress.add_task("starting", total=None, figures="")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def tick(self, t: "Tick") -> None:
        if self.progress is None:
            return
        done = t.sent if t.expected_requests else t.elapsed_s
        total = t.expected_requests or t.expected_s
        figures = f"sent {t.sent:,}  ok {t.ok:,}  ~{t.ok_per_s:,.0f} ok/s"
        if t.elapsed_s < t.warmup_s:
            figures = f"warming up  sent {t.sent:,}"
        if t.errors:
            figures += f"  errors {sum(t.errors.values()):,}"
        self.progress.update(self.task, description=f"{t.target}  level {t.level} ({t.index + 1}/{t.levels})",
                             completed=done, total=total, figures=figures)

    def level(self, target: "Target", level: "Level") -> None:
        p99 = level.latency_ms.get("p99")
        text = (f"{target.label}  level {level.label}: {level.goodput:,.1f} ok/s, "
                f"{100 * level.success_rate:.1f}% ok" + (f", p99 {p99:,.1f} ms" if p99 is not None else "")
                + ("" if level.complete else " (cut short)"))
        if self.progress is not None:
            self.progress.console.print(text, highlight=False)
        else:
            self.ui.message(text)


def _processes(text: str) -> Optional[int]:
    from mmsctl.errors import UsageError

    if text == "auto":
        return None
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"bad --processes {text!r}: a number or auto") from None


@bench_app.command("run")
def run_cmd(
    model: Optional[str] = typer.Argument(None, help="Model to load (with --noop: the no-op model's name).",
                                          metavar="MODEL", show_default=False),
    inputs: Optional[List[str]] = typer.Argument(
        None, help="Request bodies: files, folders, globs, cycled (default: kitten.jpg).", metavar="[INPUT]...",
        show_default=False),
    concurrency: str = typer.Option("1,10,100,200,500", "--concurrency", "-c", metavar="N[,N…]",
                                    help="Closed loop: clients, each with one request in flight, per level."),
    rate: Optional[str] = typer.Option(None, "--rate", metavar="R[,R…]",
                                       help="Open loop instead: requests scheduled per second, per level "
                                       "(latency counts from the scheduled time)."),
    duration: str = typer.Option("10s", "--duration", "-d", metavar="TIME", help="How long each level runs."),
    requests: Optional[int] = option("--requests", help="Send N requests per level instead of running for --duration."),
    warmup: str = typer.Option("2s", "--warmup", metavar="TIME", help="Load before each level, not measured."),
    timeout: str = option("--timeout", "30", help="Seconds per request, the whole answer included; a late answer is an error."),
    max_response_bytes: Optional[int] = typer.Option(
        None, "--max-response-bytes", min=1, metavar="N",
        help="Longest answer read, in bytes; a longer one is an error, read no further "
        "(default: the max_response_bytes setting, 64 MiB)."),
    max_connections: int = typer.Option(1000, "--max-connections", metavar="N",
                                        help="Open loop: connections at most (requests queue behind them)."),
    processes: str = typer.Option("auto", "--processes", metavar="N|auto",
                                  help="Load-generator processes per level (auto: one per 50 clients or 2000 "
                                  "requests/s, at most one per CPU, up to 4)."),
    noop: bool = typer.Option(False, "--noop", help="Register a no-op model, measure pure serving overhead, "
                              "unregister it (also after Ctrl-C or an error)."),
    noop_url: Optional[str] = typer.Option(None, "--noop-url", metavar="LOCATION",
                                           help="Where the server finds the no-op archive (its model store's file "
                                           "name, or an http(s) URL); needed for a remote server."),
    noop_workers: int = typer.Option(1, "--noop-workers", metavar="N", help="Workers for the no-op model."),
    version: Optional[str] = ModelVersionOpt,
    compare: Optional[str] = typer.Option(None, "--compare", metavar="CTX2", autocompletion=complete_context_names,
                                          help="Run the same sweep against this context too, level by level."),
    output: str = output_option("table", "wide", "json", "csv"),
    save: Optional[Path] = typer.Option(None, "--save", metavar="FILE",
                                        help="Save the run as JSON (for `bench show`, `ec2 cost --from-bench`)."),
    context: Optional[str] = ContextOpt,
) -> None:
    """Sweep a model server: sent, OK, success rate, errors, OK/s and latency percentiles per level.

    Exit codes: 0 done; 2 bad flags; 3 unknown model; 4 a level failed completely; 5 unreachable;
    6 token refused; 7 no answer in --timeout; 8 an error answer (or one over the size limit) to the
    check prediction; 130 Ctrl-C. Partial results are printed and saved in every case.
    """
    from mmsctl.config import max_response_bytes as answer_limit
    from mmsctl.loadtest.runner import BenchRequest, Hooks, run_bench
    from mmsctl.loadtest.sweep import Plan, parse_duration, parse_levels

    check_output(output, _OUTPUTS)
    with _PLAN_WORDS.applied():
        plan = Plan(
            levels=parse_levels(rate, rate=True) if rate else parse_levels(concurrency),
            open_loop=rate is not None,
            duration_s=parse_duration(duration),
            requests=requests,
            warmup_s=parse_duration(warmup, "warmup"),
            timeout_s=parse_duration(timeout, "timeout"),
            max_connections=max_connections,
            max_response_bytes=max_response_bytes or answer_limit(),
            processes=_processes(processes),
        )
    ui = get_ui()
    first = global_context(context)
    request = BenchRequest(model=model, inputs=list(inputs or []), plan=plan,
                           contexts=[first] if compare is None else [first, compare], noop=noop, noop_url=noop_url,
                           noop_workers=noop_workers, version=version, save=save)
    with _Live() as live:
        hooks = Hooks(message=ui.message, warning=ui.warn, tick=live.tick, level=live.level,
                      interrupted=lambda: ui.message("stopping: keeping what was measured so far "
                                                       "(Ctrl-C again quits at once)"))
        with _RUN_WORDS.applied():
            run, stopped = run_bench(request, hooks)
    _render(run, output)
    if stopped is not None:
        raise stopped


@bench_app.command("show")
def show_cmd(
    file: Path = typer.Argument(..., help="A run saved with --save.", metavar="FILE"),
    other: Optional[Path] = typer.Argument(None, help="A second run: compared level by level.", metavar="[FILE2]",
                                           show_default=False),
    output: str = output_option("table", "wide", "json", "csv"),
) -> None:
    """Print a saved run as table and chart, or compare two saved runs (the first server of each)."""
    from mmsctl.loadtest.results import BenchRun, load_run

    check_output(output, _OUTPUTS)
    run = load_run(file)
    if other is not None:
        second = load_run(other)
        if not run.sweeps or not second.sweeps:
            from mmsctl.errors import UsageError

            raise UsageError(f"{file if not run.sweeps else other} holds no measured sweep")
        a, b = run.sweeps[0], second.sweeps[0]
        if a.target == b.target:
            a, b = _renamed(a, f"{a.target} ({file.name})"), _renamed(b, f"{b.target} ({other.name})")
        run = BenchRun(sweeps=[a, b], started=run.started, mmsctl_version=run.mmsctl_version,
                       settings={"compared": [str(file), str(other)]}, complete=run.complete and second.complete)
    if not run.complete:
        get_ui().warn("this run was cut short: the last level may be partial")
    _render(run, output)


def _renamed(sweep: "Sweep", target: str) -> "Sweep":
    from dataclasses import replace

    return replace(sweep, target=target)


@bench_app.command("noop-archive")
def noop_archive_cmd(
    folder: Path = typer.Argument(Path("."), help="Where to write mmsctl-noop.mar.", metavar="[DIR]"),
) -> None:
    """Write the no-op model archive that `bench --noop` registers (for a remote server's model store)."""
    from mmsctl.loadtest.noop import build_noop_archive

    path = build_noop_archive(folder)
    get_ui().out.file.write(f"{path}\n")
    get_ui().message(f"then: mmsctl bench --noop --noop-url {path.name} --context REMOTE")


def register(app: typer.Typer) -> None:
    app.add_typer(bench_app, name="bench")
