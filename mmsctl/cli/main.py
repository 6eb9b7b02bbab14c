"""The typer root: global flags, the command groups, and the one place errors become exit codes.

Each command module exposes ``register(app)``. They import only typer and rich
at module level, so ``mmsctl --help`` stays fast; the heavy parts (mxnet,
boto3, textual) are imported inside the commands that need them.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType
from typing import Any, Optional

import typer

from mmsctl import __version__
from mmsctl import exit_codes
from mmsctl.cli.options import option
from mmsctl.cli.render import UI, get_ui, set_ui

__all__ = ["app", "command", "run"]

# Command modules, in the order their commands appear in --help.
COMMAND_MODULES = (
    "mmsctl.cli.predict",
    "mmsctl.cli.archive",
    "mmsctl.cli.zoo",
    "mmsctl.cli.serve",
    "mmsctl.cli.models",
    "mmsctl.cli.context",
    "mmsctl.cli.top",
    "mmsctl.cli.bench",
    "mmsctl.cli.ec2",
    "mmsctl.cli.fleet",
    "mmsctl.cli.lambda_",
    "mmsctl.cli.sagemaker",
    "mmsctl.cli.completion",
)

app = typer.Typer(
    name="mmsctl",
    help="Serve MXNet models from the terminal: predict locally, run an MMS-compatible server, "
    "manage MMS/TorchServe/mmsctl servers, benchmark them, launch on EC2, a fleet, Lambda or SageMaker, watch with `mmsctl top`.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,  # click's plain help, polished in cli/helptext.py
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mmsctl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    context: Optional[str] = option("--context", help="Server context for every command (see `mmsctl context`)."),
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


_commands: dict[Optional[str], Any] = {}
#: Root options that take a value: skipped when looking for the command a line runs.
_VALUE_OPTIONS = ("--context",)


def _entry_name(entry: Any) -> str:
    """The name a registered group or command is typed as."""
    from typer.main import get_command_name

    if hasattr(entry, "typer_instance"):
        return str(entry.name or entry.typer_instance.info.name)
    return str(entry.name or get_command_name(entry.callback.__name__))


def command_word(args: list[str]) -> Optional[str]:
    """The root command *args* run (``serve`` in ``mmsctl --context prod serve status``); None for anything
    that needs the whole tree: help, completion, no command, an option the root does not know."""
    from mmsctl.cli.completion import COMPLETE_VAR

    if COMPLETE_VAR in os.environ:
        return None
    it = iter(args)
    for arg in it:
        if arg in _VALUE_OPTIONS:
            next(it, None)
        elif arg in _GLOBAL_SWITCHES or arg.startswith(tuple(f"{o}=" for o in _VALUE_OPTIONS)):
            continue
        elif arg.startswith("-"):
            return None
        else:
            return arg
    return None


def command(name: Optional[str] = None) -> Any:
    """The click command tree ``mmsctl`` runs: typer's, built once, with kubectl-like help.

    With *name*, a root command, only that branch is built (an unknown name: the whole tree, whose error
    suggests the close names): typer turns every command's signature into click parameters when it builds
    a tree, so a run builds the one group it needs."""
    entries = [*app.registered_groups, *app.registered_commands]
    if name is not None and name not in {_entry_name(e) for e in entries}:
        name = None
    if name not in _commands:
        import copy

        import typer.main

        from mmsctl.cli.helptext import polish

        root = app
        if name is not None:
            root = copy.copy(app)
            root.registered_groups = [g for g in app.registered_groups if _entry_name(g) == name]
            root.registered_commands = [c for c in app.registered_commands if _entry_name(c) == name]
        _commands[name] = polish(typer.main.get_command(root))
    return _commands[name]


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


def _click_exceptions() -> ModuleType:
    """The click exception classes typer raises (typer >= 0.17 vendors its own click)."""
    from mmsctl.cli.options import click_module

    return click_module("exceptions")


def run(argv: Optional[list[str]] = None) -> None:
    """Entry point of the ``mmsctl`` console script."""
    from mmsctl.cli import restore_sigint
    from mmsctl.errors import MmsError

    restore_sigint()
    set_ui(UI())
    # httpx imports its own command-line client with itself (click, pygments, rich.syntax), which mmsctl never
    # runs. None in sys.modules makes that one import fail,
    # and httpx then defines a stub in its place (its own `except ImportError`; tests/cli/test_lazy_imports.py).
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
    args = hoist_global_switches(list(sys.argv[1:] if argv is None else argv))
    click_exc = _click_exceptions()
    try:
        code = command(command_word(args)).main(args=args, prog_name="mmsctl", standalone_mode=False)
    except click_exc.NoArgsIsHelpError as exc:  # `mmsctl models`: the group's help, like kubectl
        get_ui().err.file.write(exc.format_message() + "\n")
        sys.exit(exit_codes.SUCCESS)
    except click_exc.UsageError as exc:  # bad flag, missing argument, bad value: one line
        where = f"`{exc.ctx.command_path} --help`" if exc.ctx is not None else "`mmsctl --help`"
        get_ui().error(exc.format_message(), f"see {where}")
        sys.exit(exit_codes.USAGE)
    except click_exc.ClickException as exc:
        get_ui().error(exc.format_message())
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):  # Ctrl+C: the shell shows ^C; no message, no traceback
        sys.exit(exit_codes.INTERRUPTED)
    except MmsError as exc:
        ui = get_ui()
        if ui.debug:
            raise
        from mmsctl.cli.hints import hint_for

        ui.error(exc.message, hint_for(exc))
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.exit(exit_codes.SUCCESS)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: never a traceback
        ui = get_ui()
        if ui.debug:
            raise
        ui.error(f"internal error: {type(exc).__name__}: {exc}", "run again with --debug for the traceback")
        sys.exit(exit_codes.ERROR)
    # typer returns the code of a typer.Exit (130 for a Ctrl+C a command handled itself).
    if isinstance(code, int) and code != exit_codes.SUCCESS:
        sys.exit(code)
