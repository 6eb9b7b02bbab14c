"""A command line builds only the branch of typer's tree it runs (mmsctl/cli/main.py: ``command_word``).

Building click parameters for every command costs each run ~70 ms; the branch alone must behave exactly
as the whole tree does: same help, same errors, same suggestions.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from mmsctl.cli import main
from mmsctl.cli.completion import COMPLETE_VAR


@pytest.mark.parametrize("args, word", [
    (["serve", "status"], "serve"),
    (["--context", "prod", "models", "list"], "models"),
    (["--context=prod", "scale", "nin"], "scale"),
    (["-q", "--debug", "zoo", "list"], "zoo"),
    (["--help"], None),
    (["-h", "serve"], None),
    (["--version"], None),
    (["--context"], None),
    ([], None),
])
def test_the_word_a_line_runs(args: list[str], word: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(COMPLETE_VAR, raising=False)
    assert main.command_word(args) == word


def test_completion_gets_the_whole_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(COMPLETE_VAR, "complete_bash")
    assert main.command_word(["serve", "status"]) is None


def test_a_branch_holds_its_command_only_and_an_unknown_word_the_whole_tree() -> None:
    whole = set(main.command().commands)
    assert {"serve", "models", "predict", "fleet", "lambda"} <= whole
    assert set(main.command("serve").commands) == {"serve"}
    assert main.command("serv") is main.command() and main.command("serv").commands.keys() == whole


def _help(tree: object, args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[object, str, str]:
    capsys.readouterr()
    try:
        tree.main(args=args, prog_name="mmsctl", standalone_mode=False)  # type: ignore[attr-defined]
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    except Exception as exc:  # click's usage errors: compare their text
        code = f"{type(exc).__name__}: {exc}"
    out, err = capsys.readouterr()
    return code, out, err


def test_every_branch_helps_and_fails_as_the_whole_tree_does(capsys: pytest.CaptureFixture[str]) -> None:
    whole = main.command()
    lines: list[list[str]] = []
    for name, cmd in whole.commands.items():
        lines += [[name, "--help"], [name, "--no-such-option"]]
        for sub in getattr(cmd, "commands", {}):
            lines.append([name, sub, "--help"])
        if getattr(cmd, "commands", None):
            lines.append([name, "no-such-subcommand"])
    assert len(lines) > 60
    for args in lines:
        assert _help(main.command(args[0]), args, capsys) == _help(whole, args, capsys), args


def test_a_subprocess_run_through_a_branch_says_what_the_whole_tree_says() -> None:
    """The console entry end to end: a typo inside a group still gets its suggestion."""
    proc = subprocess.run([sys.executable, "-m", "mmsctl", "--context", "nope", "serve", "stauts"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Did you mean 'status'" in proc.stderr, proc.stderr
