"""The typer root: global flags, the command groups, and the one place errors become exit codes.

Each command module exposes ``register(app)``. They import only typer and rich
at module level, so ``mmsctl --help`` stays fast; the heavy parts (mxnet,
boto3, textual) are imported inside the commands that need them.
"""

from __future__ import annotations

import importlib
import sys
from typing import Optional

import typer

from mmsctl import __version__
from mmsctl.cli import exit_codes
from mmsctl.cli.render import UI, get_ui, set_ui

__all__ = ["app", "run"]

# Command modules, in the order their commands appear in --help.
COMMAND_MODULES = (
    "mmsctl.cli.predict",
    "mmsctl.cli.archive",
    "mmsctl.cli.zoo",
    "mmsctl.cli.serve",
    "mmsctl.cli.models",
    "mmsctl.cli.context",
    "mmsctl.cli.top",
    "mmsctl.cli.ec2",
    "mmsctl.cli.completion",
)

app = typer.Typer(
    name="mmsctl",
    help="Serve MXNet models from the terminal: predict locally, run an MMS-compatible server, "
    "manage MMS/TorchServe/mmsctl servers, launch on EC2, watch with `mmsctl top`.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode="rich",
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mmsctl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    context: Optional[str] = typer.Option(
        None, "--context", help="Server context for every command (see `mmsctl context`).", metavar="NAME"
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print data only, no progress or status lines."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks instead of one-line errors."),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    ctx.obj = {"context": context, "quiet": quiet, "debug": debug}
    ui = get_ui()
    ui.quiet = quiet
    ui.debug = debug


for _name in COMMAND_MODULES:
    try:
        _module = importlib.import_module(_name)
    except ModuleNotFoundError as _exc:  # a command group not built yet
        if _exc.name != _name:
            raise
        continue
    _module.register(app)


#: Global switches that may also be written after the command, as kubectl allows.
_GLOBAL_SWITCHES = ("-q", "--quiet", "--debug")


def hoist_global_switches(args: list[str]) -> list[str]:
    """Move ``-q``/``--quiet``/``--debug`` found after the command to the front.

    ``mmsctl zoo pull x -q`` then means ``mmsctl -q zoo pull x``. Nothing after a
    literal ``--`` is touched.
    """
    end = args.index("--") if "--" in args else len(args)
    switches = [a for a in args[:end] if a in _GLOBAL_SWITCHES]
    if not switches:
        return args
    rest = [a for a in args[:end] if a not in _GLOBAL_SWITCHES]
    return switches + rest + args[end:]


def run(argv: Optional[list[str]] = None) -> None:
    """Entry point of the ``mmsctl`` console script."""
    from mmsctl.errors import MmsError

    set_ui(UI())
    args = hoist_global_switches(list(sys.argv[1:] if argv is None else argv))
    try:
        app(args=args, prog_name="mmsctl")
    except MmsError as exc:
        ui = get_ui()
        if ui.debug:
            raise
        ui.error(exc.message, exc.hint)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        get_ui().error("interrupted")
        sys.exit(exit_codes.INTERRUPTED)
    except SystemExit as exc:
        # typer turns Ctrl-C inside a command into a silent exit 130: say what happened.
        if exc.code == exit_codes.INTERRUPTED:
            get_ui().error("interrupted")
        raise
    except BrokenPipeError:
        sys.exit(exit_codes.SUCCESS)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: never a traceback
        ui = get_ui()
        if ui.debug:
            raise
        ui.error(f"internal error: {type(exc).__name__}: {exc}", "run again with --debug for the traceback")
        sys.exit(exit_codes.ERROR)
