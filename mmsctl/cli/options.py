"""Options shared by many commands, defined once (like pip's cmdoptions)."""

from __future__ import annotations

from typing import Optional

import typer

__all__ = ["ContextOpt", "OutputOpt", "WideOutputOpt", "global_context"]

OutputOpt = typer.Option(
    "table", "--output", "-o", help="Output format: table, wide, json or yaml.", metavar="FORMAT"
)
WideOutputOpt = OutputOpt

ContextOpt: Optional[str] = typer.Option(
    None,
    "--context",
    help="Server context to use (see `mmsctl context list`); overrides MMSCTL_CONTEXT.",
    metavar="NAME",
)


def global_context(explicit: Optional[str]) -> Optional[str]:
    """The context named on this command, else the one given to ``mmsctl --context``."""
    if explicit:
        return explicit
    try:  # typer >= 0.17 vendors its own click; its context stack is the live one
        from typer._click.globals import get_current_context
    except ImportError:  # pragma: no cover - a typer that uses plain click
        from click import get_current_context
    ctx = get_current_context(silent=True)
    while ctx is not None:
        obj = ctx.obj
        if isinstance(obj, dict) and obj.get("context"):
            return str(obj["context"])
        ctx = ctx.parent
    return None


def check_output(output: str, allowed: tuple[str, ...] = ("table", "wide", "json", "yaml")) -> str:
    """Refuse an unknown ``-o`` value with a usage error."""
    from mmsctl.errors import UsageError

    if output not in allowed:
        raise UsageError(f"unknown output format {output!r}; choose one of: {', '.join(allowed)}")
    return output
