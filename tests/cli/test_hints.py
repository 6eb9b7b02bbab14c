"""Hints that name mmsctl's commands and flags come from the CLI (cli/hints.py), never from the core."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path
from typing import Iterator

import pytest

import mmsctl
from mmsctl.cli.hints import HINTS, hint_for
from mmsctl.errors import MmsError
from tests.client.clirun import invoke
from tests.client.standin import StandIn, running_standin

PACKAGE = Path(mmsctl.__file__).parent
#: Flags of other programs (TorchServe's) and of `top`'s own on-screen help may be named.
_FOREIGN_OR_OWN = ("--enable-model-api", "--readonly")


def _subclasses(cls: type) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_every_hint_is_keyed_by_a_real_error_reference() -> None:
    for module in ("client", "tui"):
        for info in pkgutil.walk_packages([str(PACKAGE / module)], f"mmsctl.{module}."):
            if not info.name.startswith(("mmsctl.tui.app", "mmsctl.tui.screens", "mmsctl.tui.widgets")):
                importlib.import_module(info.name)
    references = {sub.reference for sub in _subclasses(MmsError)}
    assert set(HINTS) <= references, set(HINTS) - references


def _strings(path: Path) -> Iterator[tuple[int, str]]:
    """The string constants of a module, docstrings left out."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


@pytest.mark.parametrize("package", ["client", "tui"])
def test_core_messages_name_no_mmsctl_command_or_flag(package: str) -> None:
    found = []
    for path in sorted((PACKAGE / package).rglob("*.py")):
        for line, text in _strings(path):
            cleaned = text
            for allowed in _FOREIGN_OR_OWN:
                cleaned = cleaned.replace(allowed, "")
            if "`mmsctl " in cleaned or " --" in cleaned or cleaned.startswith("--"):
                found.append(f"{path.relative_to(PACKAGE)}:{line}: {text!r}")
    assert found == []


def test_the_cli_adds_the_hint_of_a_typed_error(capsys: pytest.CaptureFixture[str]) -> None:
    r = invoke(capsys, "--context", "nowhere", "models", "list")
    assert r.code == 3
    assert r.stderr.splitlines() == ["error: context 'nowhere' not found (known: local)",
                                     "hint: add it with `mmsctl context add`"]


def test_a_version_that_is_not_there_gets_the_version_hint(capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with running_standin(StandIn(management_key=None, inference_key=None)) as standin:
        standin.add_model("nin", 1)
        monkeypatch.setenv("MMSCTL_INFERENCE_URL", standin.inference_url)
        monkeypatch.setenv("MMSCTL_MANAGEMENT_URL", standin.management_url)
        r = invoke(capsys, "models", "describe", "nin", "--model-version", "9.9")
    assert r.code == 3
    assert r.stderr.splitlines()[1] == (
        "hint: `mmsctl models describe nin` shows its default version; leave out --model-version to use it")


def test_an_error_with_its_own_hint_keeps_it() -> None:
    from mmsctl.client._errors import ConnectionRefused

    assert hint_for(ConnectionRefused("x", hint="about the data")) == "about the data"
    assert hint_for(ConnectionRefused("x")) == "is the server running? `mmsctl ping --all` checks every context"
    assert hint_for(MmsError("x")) is None
