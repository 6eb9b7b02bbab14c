"""One meaning per flag across every command (as in kubectl), and `--help` that shows them whole.

The walk goes over the click command tree ``mmsctl`` runs (``mmsctl.cli.main.command()``), so a
command added later is checked without anyone listing it here.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mmsctl.cli.main import command
from mmsctl.cli.options import SHARED_FLAGS
from tests.support.cli import run_mmsctl

CLI = Path(__file__).resolve().parents[2] / "mmsctl" / "cli"

#: Long options that are the same thing under two spellings on one command (kept for people who
#: know MMS/kubectl): they share a short option and a meaning.
SAME_MEANING = {("--min-workers", "--replicas"), ("--config", "--mms-config")}


def _commands(cmd: Any = None, path: tuple[str, ...] = ("mmsctl",)) -> Iterator[tuple[tuple[str, ...], Any]]:
    cmd = cmd or command()
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def _options() -> Iterator[tuple[str, Any]]:
    for path, cmd in _commands():
        for param in cmd.params:
            if param.param_type_name == "option":
                yield " ".join(path), param


def _takes(param: Any) -> str:
    """What the option takes: nothing (a flag), or its metavar (any choice list counts as one kind)."""
    if param.is_flag:
        return "flag"
    return re.sub(r"^\[.*\]$", "[choice]", param.metavar or "?")


def test_every_short_and_long_option_means_one_thing() -> None:
    shorts: dict[str, set[str]] = defaultdict(set)  # -f -> {--follow}
    longs: dict[str, set[tuple[str, str]]] = defaultdict(set)  # --timeout -> {(short, takes)}
    where: dict[str, list[str]] = defaultdict(list)
    for path, param in _options():
        names = [o for o in param.opts + param.secondary_opts if o.startswith("--")]
        short = next((o for o in param.opts if not o.startswith("--")), "")
        long_ = names[0]
        if short:
            shorts[short].add(long_)
        longs[long_].add((short, _takes(param)))
        where[long_].append(path)
    problems = [f"{s} means {sorted(ls)}" for s, ls in shorts.items()
                if len(ls) > 1 and tuple(sorted(ls)) not in SAME_MEANING]
    for long_, kinds in longs.items():
        with_short = {s for s, _ in kinds if s}
        if len(with_short) > 1:
            problems.append(f"{long_} has the short options {sorted(with_short)}")
        takes = {t for _, t in kinds}
        if len(takes) > 1:
            problems.append(f"{long_} takes {sorted(takes)} in {sorted(set(where[long_]))}")
    assert problems == []


def test_the_conventions_hold() -> None:
    """The choices docs/cli.md states, checked where they matter most."""
    by_long = {(path, p.opts[0] if p.opts[0].startswith("--") else p.opts[-1]): p for path, p in _options()}
    assert "--model-version" in {o for _, p in _options() for o in p.opts}
    assert all(p.is_flag for (path, o), p in by_long.items() if o == "--version")  # only mmsctl --version
    for _, param in _options():
        if "-n" in param.opts:
            assert "--name" in param.opts
        if "-f" in param.opts:
            assert "--follow" in param.opts
        if "-A" in param.opts:
            assert "--all" in param.opts


def _declared_flags(sources: dict[str, str]) -> list[str]:
    """Where a flag is declared twice: a ``typer.Option`` naming a flag of SHARED_FLAGS (``option`` declares
    those), or one flag that ``typer.Option`` declares in two modules (module name -> its source)."""
    modules: dict[str, set[str]] = defaultdict(set)
    for module, source in sources.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "Option":
                names = [a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")]
                if names:
                    modules[names[0]].add(module)
    return sorted([f"{flag}: typer.Option in {sorted(found)}, not option()" for flag, found in modules.items()
                   if flag in SHARED_FLAGS]
                  + [f"{flag}: declared in {sorted(found)}" for flag, found in modules.items()
                     if flag not in SHARED_FLAGS and len(found) > 1])


def test_a_flag_several_modules_take_is_declared_once() -> None:
    """cli/options.py names each shared flag and what it takes; the command modules give a default and help."""
    sources = {str(p.relative_to(CLI)): p.read_text(encoding="utf-8") for p in sorted(CLI.rglob("*.py"))
               if p.name != "options.py"}
    assert _declared_flags(sources) == []
    bad = {"ec2.py": 'x = typer.Option(None, "--eia", metavar="SIZE")\ny = typer.Option(1, "--spot", metavar="N")',
           "fleet.py": 'z = typer.Option(2, "--spot", metavar="N")\nw = typer.Option(2, "--fleet-only")'}
    assert _declared_flags(bad) == ["--eia: typer.Option in ['ec2.py'], not option()",
                                    "--spot: declared in ['ec2.py', 'fleet.py']"]
    for _, param in _options():  # and the tree has them as the table says
        long_ = next((o for o in param.opts if o in SHARED_FLAGS), None)
        if long_ is not None:
            short, metavar = SHARED_FLAGS[long_]
            assert set(param.opts) <= {long_, short} and (param.metavar if not param.is_flag else None) == metavar


def _help_pages() -> list[list[str]]:
    return [list(path[1:]) for path, _ in _commands()]


@pytest.mark.parametrize("args", _help_pages(), ids=lambda a: " ".join(a) or "mmsctl")
def test_help_at_80_columns_shows_whole_options_and_choices(args: list[str], capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_mmsctl(capsys, *args, "--help")
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= 80
    assert not re.search(r"<(str|int|float|bool|path|text|int range|float range|list\[[^]]*\])>", out), out
    # click's type names say nothing to a user: each option names what it takes (NAME, S, N, FILE, …)
    assert not re.search(r"(?<![$\w])(TEXT|INTEGER|FLOAT|BOOLEAN|FILENAME|DIRECTORY|UUID)(?![\w])", out), out
    cmd = dict(_commands())[("mmsctl", *args)]
    for param in (p for p in cmd.params if p.param_type_name == "option"):
        for name in param.opts + param.secondary_opts:
            assert name in out  # never cut
        if "--output" in getattr(param, "opts", []):
            assert re.search(r"-o, --output \[[a-z]+(\|[a-z]+)+\]", out), out


#: Words click takes for the end of a sentence when it cuts a command's short help (the list under
#: "Commands:"): an abbreviation there leaves the line hanging ("…, e.g.").
ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "approx.", "incl.", "no.")


def test_every_commands_short_help_is_a_whole_sentence() -> None:
    cut = []
    for path, cmd in _commands():
        short = cmd.get_short_help_str(limit=10_000)  # where the first sentence is taken to end, at any width
        if short.lower().endswith(ABBREVIATIONS) or short.rstrip(".").endswith(("(", ",")):
            cut.append(f"{' '.join(path)}: {short}")
    assert cut == []


def test_every_option_and_argument_has_help() -> None:
    """`--help` explains every option (a bare `--eia` tells a new user nothing), and every argument of a command."""
    bare = [f"{' '.join(path)} {param.opts[0]}" for path, cmd in _commands() for param in cmd.params
            if not (getattr(param, "help", None) or "").strip() and not getattr(param, "hidden", False)]
    assert bare == []


def test_a_group_summary_that_lists_its_commands_lists_them_all() -> None:
    """`mmsctl fleet` says "(create, list, …)": a command added later is named there too."""
    missing = []
    for path, cmd in _commands():
        listed = re.search(r"\(([a-z-]+(?:, [a-z-]+)+)\)\.?\s*$", (cmd.help or "").split("\n\n")[0])
        if getattr(cmd, "commands", None) and listed:
            missing += [f"{' '.join(path)} {name}" for name in sorted(set(cmd.commands) - set(listed[1].split(", ")))]
    assert missing == []
