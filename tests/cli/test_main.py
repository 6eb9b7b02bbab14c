"""The CLI root: global switches anywhere, and warnings that print user text as it is."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from mmsctl.cli.main import hoist_global_switches
from mmsctl.cli.render import UI, human_size
from tests.support.cli import run_mmsctl


def test_global_switches_after_the_command_are_moved_to_the_front() -> None:
    assert hoist_global_switches(["zoo", "pull", "x", "-q"]) == ["-q", "zoo", "pull", "x"]
    assert hoist_global_switches(["--debug", "models", "list"]) == ["--debug", "models", "list"]
    assert hoist_global_switches(["predict", "m", "--", "-q"]) == ["predict", "m", "--", "-q"]


def test_quiet_after_the_command_silences_messages_not_data(capsys: pytest.CaptureFixture[str]) -> None:
    proc = run_mmsctl(capsys, "zoo", "list", "-o", "json", "-q")
    assert proc.code == 0, proc.stderr
    assert proc.stdout.lstrip().startswith("[")
    assert "No such option" not in proc.stderr


def test_byte_sizes_are_rich_decimal_units_everywhere() -> None:
    assert [human_size(n) for n in (0, 291, 10_600, 3_050_000, 2 * 10**9)] == [
        "0 bytes", "291 bytes", "10.6 kB", "3.0 MB", "2.0 GB"]
    assert human_size(None) is None


def test_warnings_do_not_read_user_text_as_markup() -> None:
    buf = io.StringIO()
    ui = UI(err=Console(file=buf, no_color=True, width=200))
    ui.warn("model [bold]x[/bold] kept")
    assert "model [bold]x[/bold] kept" in buf.getvalue()


def test_usage_errors_are_one_line_with_where_to_look(capsys: pytest.CaptureFixture[str]) -> None:
    for args, message, where in [
        (("zoo", "list", "--bogus"), "No such option: --bogus", "mmsctl zoo list --help"),
        (("scale", "m", "--min-workers", "many"), "Invalid value for '--min-workers'", "mmsctl scale --help"),
        (("predict", "squeezenet"), "Missing argument", "mmsctl predict --help"),
        (("nosuch",), "No such command 'nosuch'", "mmsctl --help"),
    ]:
        proc = run_mmsctl(capsys, *args)
        assert proc.code == 2, (args, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert lines[0].startswith("error: ") and message in lines[0], (args, lines)
        assert lines[1:] == [f"hint: see `{where}`"], (args, lines)
        assert proc.stdout == ""


@pytest.mark.parametrize("args, code, message", [
    (("predict", "squeezenet", "cat.jpg", "--gpu", "-1"), 2, "Invalid value for '--gpu'"),
    (("bench", "show", "nosuch.json"), 3, "bench file not found: nosuch.json"),
    (("fleet", "cost", "--instance-type", "c5.xlarge", "--from-bench", "nosuch.json"), 3,
     "bench file not found: nosuch.json"),
    (("serve", "start", "--token-file", "/nonexistent/token"), 3, "token file /nonexistent/token not found"),
])
def test_exit_codes_follow_the_documented_table(args: tuple[str, ...], code: int, message: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """docs/cli.md: a bad flag value is 2, a missing input file 3 (as `predict MODEL nosuch.jpg` is)."""
    proc = run_mmsctl(capsys, *args)
    assert (proc.code, proc.stdout) == (code, ""), proc.stderr
    assert proc.stderr.startswith("error: ") and message in proc.stderr.splitlines()[0], proc.stderr


def test_a_group_without_a_command_shows_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    proc = run_mmsctl(capsys, "models")
    assert proc.code == 0
    assert "Usage: mmsctl models" in proc.stdout + proc.stderr
