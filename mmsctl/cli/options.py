"""Options shared by many commands, defined once (like pip's cmdoptions)."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Optional

import typer

__all__ = ["ContextOpt", "OutputOpt", "ProfileOpt", "RegionOpt", "check_output", "click_module", "global_context"]

OutputOpt = typer.Option(
    "table", "--output", "-o", help="Output format: table, wide, json or yaml.", metavar="FORMAT"
)

ContextOpt: Optional[str] = typer.Option(
    None,
    "--context",
    help="Server context to use (see `mmsctl context list`); overrides MMSCTL_CONTEXT.",
    metavar="NAME",
)

#: The AWS commands' (``ec2``, ``fleet``, ``lambda``) region and profile, as the aws CLI names them.
RegionOpt: Optional[str] = typer.Option(None, "--region", help="AWS region (default: AWS_DEFAULT_REGION / profile).",
                                        metavar="REGION")
ProfileOpt: Optional[str] = typer.Option(None, "--profile", help="AWS profile from ~/.aws/config.",
                                         metavar="PROFILE")


def click_module(name: str) -> ModuleType:
    """``typer._click.<name>``: typer >= 0.17 vendors its own click, whose context stack and
    exceptions are the live ones; ``click.<name>`` for a typer that uses plain click."""
    try:
        return importlib.import_module(f"typer._click.{name}")
    except ImportError:  # pragma: no cover - a typer that uses plain click
        return importlib.import_module(f"click.{name}")


def global_context(explicit: Optional[str]) -> Optional[str]:
    """The context named on this command, else the one given to ``mmsctl --context``."""
    if explicit:
        return explicit
    ctx = click_module("globals").get_current_context(silent=True)
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
