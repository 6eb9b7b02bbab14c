"""Options shared by many commands, defined once (like pip's cmdoptions and sam-cli's commands/_utils/options.py).

A flag that more than one command module takes is declared here: its long and short names and the kind of
value it takes (:data:`SHARED_FLAGS`, read by :func:`option`), so it means one thing on every command
(docs/cli.md's table; ``tests/cli/test_flags.py`` fails on a second declaration elsewhere). A command gives its
own default and help; where both are the same everywhere, the option itself is here (``RegionOpt``, ``DryRunOpt``).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any, Optional

import typer

__all__ = [
    "SHARED_FLAGS",
    "ContextOpt",
    "DryRunOpt",
    "IdentityDirOpt",
    "ModelVersionOpt",
    "OutputOpt",
    "ProfileOpt",
    "RegionOpt",
    "YesOpt",
    "check_output",
    "click_module",
    "complete_context_names",
    "complete_zoo_names",
    "global_context",
    "option",
    "output_option",
]

#: Every flag that several command modules take: its short form ("" for none) and what it takes (a metavar, or
#: None for a switch). Where docs/cli.md gives a command the long form only, that command passes ``short=False``.
SHARED_FLAGS: dict[str, tuple[str, Optional[str]]] = {
    "--accelerator": ("", "KIND"),
    "--all": ("-A", None),
    "--allow-world-ssh": ("", None),
    "--ami": ("", "AMI"),
    "--batch-size": ("-b", "N"),
    "--bench-target": ("", "TARGET"),
    "--build": ("", "DIR"),
    "--context": ("", "NAME"),
    "--count": ("", "N"),
    "--delete-data": ("", None),
    "--dry-run": ("", None),
    "--duration-ms": ("", "MS"),
    "--eia": ("", "SIZE"),
    "--fetch-allow": ("", "LIST"),
    "--follow": ("-f", None),
    "--force": ("", None),
    "--from-bench": ("", "FILE"),
    "--handler": ("", "MODULE[:FN]"),
    "--identity-dir": ("", "DIR"),
    "--image": ("", "URI"),
    "--input-bucket": ("", "BUCKET"),
    "--input-prefix": ("", "PREFIX"),
    "--instance-python": ("", "X.Y"),
    "--instance-type": ("", "TYPE"),
    "--key-name": ("", "KEY"),
    "--max": ("", "N"),
    "--max-concurrency": ("", "N"),
    "--memory": ("", "MB"),
    "--min": ("", "N"),
    "--model": ("", "MODEL"),
    "--model-name": ("", "NAME"),
    "--model-source": ("", "[s3|image]"),
    "--model-version": ("", "V"),
    "--models": ("-m", "NAME=LOCATION"),
    "--name": ("-n", "NAME"),
    "--output-bucket": ("", "BUCKET"),
    "--output-prefix": ("", "PREFIX"),
    "--pip-spec": ("", "REQ"),
    "--port": ("-p", "N"),
    "--price": ("", "USD"),
    "--profile": ("", "PROFILE"),
    "--region": ("", "REGION"),
    "--requests": ("", "N"),
    "--runtime": ("", "RUNTIME"),
    "--server": ("", "[mmsctl|mms]"),
    "--serverless": ("", "MB"),
    "--table": ("", "NAME"),
    "--target-requests-per-instance": ("", "N"),
    "--throughput": ("", "RPS"),
    "--timeout": ("", "S"),
    "--token-file": ("", "FILE"),
    "--top-k": ("-k", "K"),
    "--wait": ("", None),
    "--wait-timeout": ("", "S"),
    "--workers": ("-w", "N"),
    "--yes": ("-y", None),
}


def option(flag: str, default: Any = None, help: Optional[str] = None, *, short: bool = True, **extra: Any) -> Any:
    """The typer option for *flag* of :data:`SHARED_FLAGS`: its names and metavar from there, this command's
    *default* and *help* (and any other typer.Option argument in *extra*); ``short=False``: the long form only."""
    short_name, metavar = SHARED_FLAGS[flag]
    names = (flag, short_name) if short and short_name else (flag,)
    if metavar is not None:
        extra["metavar"] = metavar
    if flag == "--context":
        extra.setdefault("autocompletion", complete_context_names)
    return typer.Option(default, *names, help=help, **extra)


def output_option(*choices: str, default: Optional[str] = None, help: str = "Output format.", **extra: Any) -> Any:
    """``-o, --output [a|b|c]``: the formats this command prints (the first is the default)."""
    formats = choices or ("table", "wide", "json", "yaml")
    return typer.Option(formats[0] if default is None else default, "--output", "-o",
                        metavar="[" + "|".join(formats) + "]", help=help, **extra)


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


ContextOpt: Optional[str] = option(
    "--context", help="Server context to use (see `mmsctl context list`); overrides MMSCTL_CONTEXT.")

ModelVersionOpt: Optional[str] = option(
    "--model-version", help="Model version (TorchServe; default: the model's default version).")

#: The AWS commands' (``ec2``, ``fleet``, ``lambda``, ``sagemaker``) region and profile, as the aws CLI names them.
RegionOpt: Optional[str] = option("--region", help="AWS region (default: AWS_DEFAULT_REGION / profile).")
ProfileOpt: Optional[str] = option("--profile", help="AWS profile from ~/.aws/config.")
#: A command that changes AWS resources prints the calls instead.
DryRunOpt: bool = option("--dry-run", False, help="Print every AWS call instead of making the changes.")
#: Where ``ssh-config`` finds each key pair's KEY.pem (``ec2``, ``fleet``).
IdentityDirOpt: str = option("--identity-dir", "~/.ssh", help="Where KEY.pem files live.")
#: A command that asks before it deletes data goes on without asking.
YesOpt: bool = option("--yes", False, help="Do not ask (for scripts).")


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
