"""``--help`` that reads like kubectl's: full option names, choices, no ``<str>``/``<bool>`` noise.

Typer's rich help squeezes six table columns into the terminal, so at 80 columns
option names are cut (``--response-timeo…``), and it prints a type after every
option. :func:`polish` walks the click tree typer builds, once, and makes click's
plain help formatter print it instead:

* every option that takes a value shows a metavar (its own, ``[a|b|c]`` for a
  choice, else one from its type: ``N``, ``NUMBER``, ``PATH``, ``TEXT``), flags none;
* arguments show their name only (``LOCATION``, not ``LOCATION <str>``);
* each command's line in its group's list is its first sentence, never cut with ``...``.
"""

from __future__ import annotations

import re
from typing import Any, Optional

__all__ = ["polish"]

_FIRST_SENTENCE = re.compile(r"^(.+?[.!?])(\s|$)", re.S)


def _value_metavar(param: Any, ctx: Any) -> str:
    desc = getattr(param, "type_descriptor", None)  # typer 0.29 (pydantic); before it, click's param types
    choices = (desc.choices if desc.is_choice else None) if desc is not None else getattr(param.type, "choices", None)
    if choices:
        return "[" + "|".join(str(getattr(c, "value", c)) for c in choices) + "]"
    label = param.display_type(ctx).strip("<>") if desc is not None else str(getattr(param.type, "name", "")).lower()
    if label.startswith("int"):
        return "N"
    if label.startswith("float"):
        return "NUMBER"
    if label in ("path", "file", "directory"):
        return "PATH"
    return "TEXT"


def _no_type(ctx: Any) -> Optional[str]:
    return None


def _usage_pieces(param: Any) -> Any:
    """``LOCATION`` / ``[FILE2]`` / ``INPUT...`` in the usage line (typer writes ``{LOCATION}``)."""
    name = param.metavar or param.name.upper()
    if param.nargs != 1 and not name.endswith(("...", "…")):
        name += "..."
    if not param.required and not name.startswith("["):
        name = f"[{name}]"
    return lambda ctx: [name]


def _short_help(help_text: Optional[str]) -> Optional[str]:
    if not help_text:
        return None
    first = help_text.strip().split("\n\n", 1)[0]
    found = _FIRST_SENTENCE.match(first)
    text = found.group(1) if found else first
    return " ".join(text.split())


def polish(command: Any, ctx: Any = None) -> Any:
    """Give *command* and every command under it plain, kubectl-like help (in place); return it."""
    from mmsctl.cli.options import click_module

    core = click_module("core")
    ctx = ctx or core.Context(command)
    if hasattr(command, "rich_markup_mode"):
        command.rich_markup_mode = None
    for param in command.params:
        if param.param_type_name == "argument":
            param.display_type_rich = _no_type  # an instance attribute over typer's method
            param.get_usage_pieces = _usage_pieces(param)
        elif not param.is_flag and not param.count and param.metavar is None:
            param.metavar = _value_metavar(param, ctx)
    if command.short_help is None:
        command.short_help = _short_help(command.help)
    for sub in getattr(command, "commands", {}).values():
        polish(sub, ctx)
    return command
