"""The command examples of README.md and docs/*.md, block by block, with the marker that says who runs them.

Every fenced block that shows commands (```sh, ```bash, ```shell, the ``$ `` lines of ```console, and the
command lines of an unlabelled block) carries, on the line right above its fence, one HTML comment a reader
of the rendered page does not see:

    <!-- examples: run by tests/recipes/test_doc_examples.py::test_v2_examples_run_as_pasted -->
    <!-- examples: not run: each line needs an AWS account -->

``run by`` names the test that runs the block's commands (it reads them from the page, so what is pasted is
what is run); ``not run`` says why that cannot be. ``tests/recipes/test_doc_examples.py`` holds every block to
one of the two.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tests.support.paths import REPO

__all__ = ["Block", "PAGES", "blocks", "block_at", "indented_commands"]

PAGES = sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
_MARKER = re.compile(r"<!-- examples: (run by (?P<test>\S+)|not run: (?P<why>.+?)) -->\s*$")
_SHELL = {"sh", "bash", "shell"}
#: What a command line of an unlabelled block starts with (the rest of such blocks is output or logs).
_COMMAND = re.compile(r"^\s*(\$ |mmsctl |\.venv/bin/python |python3? |curl |make |aws |[A-Z_]+=\S+ (mmsctl|\.venv))")
_INDENTED_COMMAND = re.compile(r"^(\$ |mmsctl )")
_HEREDOC = re.compile(r"<<-?\s*'?(\w+)'?")


@dataclass(frozen=True)
class Block:
    """One fenced block's commands, where it is, and its marker (``run_by`` a test id, or ``why`` not run)."""

    page: Path
    line: int
    commands: tuple[str, ...]
    run_by: Optional[str]
    why: Optional[str]
    #: An indented code block (no fence, so no marker can sit above it): refused, it is to be fenced.
    indented: bool = False

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def _logical(lines: list[str]) -> Iterator[str]:
    """Shell lines joined: backslash continuations, and a here-document's body with its command."""
    it = iter(lines)
    for line in it:
        text = line
        while text.rstrip().endswith("\\"):
            text = text.rstrip()[:-1] + " " + next(it, "").strip()
        heredoc = _HEREDOC.search(text.split(" #", 1)[0])
        if heredoc:
            body = []
            for more in it:
                body.append(more)
                if more.strip() == heredoc.group(1):
                    break
            text = "\n".join([text, *body])
        yield text


def _commands(lang: str, text: str) -> list[str]:
    lines = text.splitlines()
    if lang in _SHELL:
        picked = lines
    elif lang == "console":
        picked, inside = [], False
        for line in lines:  # "$ " lines and their continuations; the rest is output
            if line.startswith("$ "):
                picked.append(line[2:])
                inside = line.rstrip().endswith("\\")
            elif inside:
                picked.append(line)
                inside = line.rstrip().endswith("\\")
    elif lang == "":
        picked = [line.lstrip("$ ") if line.startswith("$ ") else line for line in lines if _COMMAND.match(line)]
    else:
        return []
    return [c.strip() for c in _logical(picked) if c.strip() and not c.strip().startswith("#")]


def indented_commands(text: str) -> Iterator[tuple[int, tuple[str, ...]]]:
    """The indented code blocks of *text* (outside fences, after a blank line) that start with ``mmsctl `` or
    ``$ ``, as (line, commands): a reader pastes them as surely as a fenced block's."""
    lines = _FENCE.sub(lambda m: "```\n" * m.group(0).count("\n"), text).split("\n")  # a fence ends a block
    i = 0
    while i < len(lines):
        if not (lines[i].startswith("    ") and lines[i].strip() and (i == 0 or not lines[i - 1].strip())):
            i += 1
            continue
        start, body = i, []
        while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
            body.append(lines[i][4:])
            i += 1
        if _INDENTED_COMMAND.match(body[0]):
            yield start + 1, tuple(_commands("console" if body[0].startswith("$ ") else "sh", "\n".join(body)))


def blocks() -> list[Block]:
    """Every block with commands, on every page."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        found += [Block(page, line, commands, None, None, indented=True) for line, commands in indented_commands(text)]
        for match in _FENCE.finditer(text):
            commands = _commands(match.group(1), match.group(2))
            if not commands:
                continue
            before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            marker = _MARKER.search(before)
            found.append(Block(page, text[:match.start()].count("\n") + 1, tuple(commands),
                               marker.group("test") if marker else None, marker.group("why") if marker else None))
    return found


def block_at(page: str, test: str) -> list[Block]:
    """The blocks of *page* (``docs/server.md``) that name *test* (``test_doc_examples.py::test_x``) as their runner."""
    return [b for b in blocks() if str(b.page.relative_to(REPO)) == page and b.run_by and b.run_by.endswith(test)]


def without_comment(command: str) -> str:
    """A command line without its trailing ``# comment`` (outside quotes, as the shell reads it)."""
    out, quote = [], ""
    for i, ch in enumerate(command):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or command[i - 1].isspace()):
            break
        out.append(ch)
    return "".join(out).rstrip()
