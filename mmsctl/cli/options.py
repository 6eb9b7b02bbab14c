"""Options shared by many commands, defined once (like pip's cmdoptions)."""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any, Optional

import typer

__all__ = [
    "ContextOpt",
    "ModelVersionOpt",
    "OutputOpt",
    "ProfileOpt",
    "RegionOpt",
    "check_output",
    "click_module",
    "complete_context_names",
    "complete_zoo_names",
    "global_context",
    "output_option",
]


def output_option(*choices: str, default: Optional[str] = None) -> Any:
    """``-o, --output [a|b|c]``: the formats this command prints (the first is the default)."""
    formats = choices or ("table", "wide", "json", "yaml")
    return typer.Option(default or formats[0], "--output", "-o", metavar="[" + "|".join(formats) + "]",
                        help="Output format.")


OutputOpt = output_option()


def complete_context_names(incomplete: str) -> list[str]:
    """Shell completion for ``--context``: ``local``, each running local server, contexts.toml's names."""
    try:
        from mmsctl.client.contexts import context_names

        return [n for n in context_names() if n.startswith(incomplete)]
    except Exception:  # noqa: BLE001 - completion stays silent
        return []


def complete_instance_names(incomplete: str) -> list[str]:
    """Shell completion for ``serve logs/status --name``: every local server instance with a state file."""
    try:
        from mmsctl.local_servers import list_instances

        return [i.name for i in list_instances() if i.name.startswith(incomplete)]
    except Exception:  # noqa: BLE001 - completion stays silent
        return []


def complete_running_instance_names(incomplete: str) -> list[str]:
    """Shell completion for ``serve stop --name``: the local servers running now."""
    try:
        from mmsctl.local_servers import running_instances

        return [s.name for s in running_instances() if s.name.startswith(incomplete)]
    except Exception:  # noqa: BLE001 - completion stays silent
        return []


def complete_zoo_names(incomplete: str) -> list[str]:
    """Shell completion for a model: the zoo's names and aliases (offline: the catalog is built in).
    Nothing matches ``./…``, so the shell completes files there."""
    try:
        from mmsctl.zoo.catalog import CATALOG

        names = [n for entry in CATALOG for n in (entry.name, *entry.aliases)]
        return sorted(n for n in dict.fromkeys(names) if n.startswith(incomplete))
    except Exception:  # noqa: BLE001 - completion stays silent
        return []


ContextOpt: Optional[str] = typer.Option(
    None,
    "--context",
    help="Server context to use (see `mmsctl context list`); overrides MMSCTL_CONTEXT.",
    metavar="NAME",
    autocompletion=complete_context_names,
)

ModelVersionOpt: Optional[str] = typer.Option(
    None, "--model-version", help="Model version (TorchServe; default: the model's default version).", metavar="V"
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


def note_model_locations(values: "list[str]") -> None:
    """Say which one is used where a model argument is a zoo name and a local file or folder
    of the same name exists (the zoo's; ``./NAME`` is the folder): :func:`mmsctl.names.model_location`."""
    from mmsctl.cli.render import get_ui
    from mmsctl.names import model_location
    from mmsctl.zoo.catalog import lookup

    for value in values:
        for item in value.split(",") if "://" not in value else [value]:
            where = model_location(item) if item.strip() else None
            # (a word the catalog does not know fails to resolve, and that error's hint names the folder)
            if where is not None and where.shadowed is not None and lookup(where.value) is not None:
                kind = "folder" if os.path.isdir(where.shadowed) else "file"
                get_ui().message(f"note: {where.value} is the zoo model; for the local {kind} "
                                 f"{where.local_spelling}, write {where.local_spelling}")
