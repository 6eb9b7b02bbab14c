"""Find the ``mmsctl …`` command lines in recipes and docs, and check them against the real CLI.

A recipe that uses a flag mmsctl does not have rots silently; parsing every command
line with mmsctl's own click command tree (the one ``mmsctl`` runs) catches that
without running anything: unknown commands and options, missing arguments and bad
values (``--min-workers many``) all fail to parse.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Found", "check_synopsis", "commands_in_file", "commands_in_markdown", "commands_in_shell", "parse_mmsctl"]

# Values for shell variables, so `--min-workers "$WORKERS"` parses like the recipe's default would.
SAMPLE_VALUES = {
    "WORKERS": "2",
    "PORT": "8080",
    "WAIT": "120",
}
_VAR = re.compile(r"\$\{(\w+)(?::-[^}]*)?\}|\$(\w+)")
_SUBST = re.compile(r"\$\((mmsctl\b[^()]*)\)")
_SHELL_LANGS = {"", "sh", "bash", "shell", "console", "ini", "systemd"}


@dataclass(frozen=True)
class Found:
    """One mmsctl command line: where it is and its arguments (after ``mmsctl``)."""

    where: str
    args: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.where}: mmsctl {shlex.join(self.args)}"


def _expand(line: str) -> str:
    return _VAR.sub(lambda m: SAMPLE_VALUES.get(m.group(1) or m.group(2), "x"), line)


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        if not pending:
            start = number
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        yield start, pending + raw
        pending = ""
    if pending:
        yield start, pending


def _tokens(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: not a command line
        return []


def _invocations(line: str) -> Iterator[tuple[str, ...]]:
    for text in [line, *_SUBST.findall(line)]:
        tokens = _tokens(_expand(text))
        for i, token in enumerate(tokens):
            if token != "mmsctl" and not (token.endswith("/mmsctl") and "=" not in token):
                continue  # (MMSCTL=.venv/bin/mmsctl is an assignment, not a command)
            if not _command_position(tokens[:i]):
                continue  # an argument such as `--name mmsctl`
            args = []
            for arg in tokens[i + 1 :]:
                if _is_punctuation(arg):
                    break
                args.append(arg)
            if args:
                yield tuple(args)


def _is_punctuation(token: str) -> bool:
    return bool(token) and all(c in "();<>|&{}" for c in token)


def _command_position(before: list[str]) -> bool:
    """Is the next token a command name (first word, after | ; && ( or VAR=x / sudo / exec)?"""
    for token in reversed(before):
        if _is_punctuation(token):
            return True
        if re.match(r"^\w+=", token) or token in (
            "sudo",
            "exec",
            "command",
            "time",
            "then",
            "do",
            "!",
            "env",
        ):
            continue
        return False
    return True


def commands_in_shell(text: str, where: str, *, first_line: int = 1) -> list[Found]:
    """Every ``mmsctl`` invocation in shell text (continued lines joined, ``$(…)`` included)."""
    return [
        Found(f"{where}:{n + first_line - 1}", args)
        for n, line in _logical_lines(text)
        for args in _invocations(line)
    ]


def commands_in_markdown(text: str, where: str) -> list[Found]:
    """``mmsctl`` lines in fenced shell blocks (only the ``$ `` lines where a block has prompts)."""
    found: list[Found] = []
    lang = None
    block: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        fence = re.match(r"^\s*```\s*([\w-]*)", line)
        if fence and lang is None:
            lang, block = fence.group(1).lower(), []
        elif fence:
            if lang in _SHELL_LANGS:
                found += _commands_in_block(block, where)
            lang = None
        elif lang is not None:
            block.append((number, line))
    return found


def _commands_in_block(block: list[tuple[int, str]], where: str) -> list[Found]:
    prompted = any(line.lstrip().startswith("$ ") for _, line in block)
    if not prompted:
        start = block[0][0] if block else 0
        return commands_in_shell("\n".join(line for _, line in block), where, first_line=start)
    found: list[Found] = []
    for i, (number, line) in enumerate(block):
        if not line.lstrip().startswith("$ "):
            continue
        text = [line.lstrip()[2:]]
        for _, more in block[i + 1 :]:  # a prompt line ending in \ goes on without a prompt
            if not text[-1].rstrip().endswith("\\"):
                break
            text.append(more)
        found += commands_in_shell("\n".join(text), where, first_line=number)
    return found


def commands_in_file(path: Path, where: str) -> list[Found]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".md":
        return commands_in_markdown(text, where)
    if path.suffix == ".service":
        lines = [ln.split("=", 1)[1] for ln in text.splitlines() if re.match(r"^Exec\w*=", ln)]
        return commands_in_shell("\n".join(lines), where)
    return commands_in_shell(text, where)


def _protected(ctx: Any) -> list[str]:
    return list(getattr(ctx, "_protected_args", None) or getattr(ctx, "protected_args", []))


def parse_mmsctl(args: Sequence[str]) -> str:
    """Parse *args* the way ``mmsctl`` would, without running anything; return the command path.

    Raises:
        Exception: the CLI's own usage error (unknown command or option, missing argument,
            bad value), or ValueError when no command is given.
    """
    from mmsctl.cli.main import command as mmsctl_command

    if any(a.startswith("[") for a in args):
        return check_synopsis(args)
    root = mmsctl_command()  # typer ships its own click: no isinstance(click.Group)
    ctx = root.make_context("mmsctl", list(args))
    command: Any = root
    path = ["mmsctl"]
    while hasattr(command, "resolve_command"):
        rest = [*_protected(ctx), *ctx.args]
        if not rest:
            raise ValueError(f"{' '.join(path)}: no command given")
        name, sub, rest = command.resolve_command(ctx, rest)
        if sub is None or name is None:
            raise ValueError(f"{' '.join(path)}: no such command {rest[:1]}")
        ctx = sub.make_context(name, rest, parent=ctx)
        command = sub
        path.append(name)
    return " ".join(path)


def check_synopsis(args: Sequence[str]) -> str:
    """A usage synopsis (``models describe MODEL [--model-version V|all]``): the command exists and
    every option it names is one of that command's (values are placeholders, so not parsed)."""
    from mmsctl.cli.main import command as mmsctl_command

    command: Any = mmsctl_command()
    path = ["mmsctl"]
    words = list(args)
    while hasattr(command, "commands") and words and words[0] in command.commands:
        command = command.commands[words[0]]
        path.append(words.pop(0))
    if hasattr(command, "commands"):
        raise ValueError(f"{' '.join(path)}: no such command {words[:1]}")
    known = {o for p in command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")}
    known |= {"--context", "-q", "--quiet", "--debug"}  # global flags that may follow the command
    for word in words:
        for option in re.findall(r"(?:^|[\[|])(--?[A-Za-z][\w-]*)", word):
            if option not in known:
                raise ValueError(f"{' '.join(path)}: no such option {option}")
    return " ".join(path)
