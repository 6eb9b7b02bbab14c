"""Hints that name mmsctl's commands and flags come from the CLI (cli/hints.py), never from the core."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
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


#: A flag: two dashes, a letter, not inside a word (``x--y``) or a longer dash run.
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
#: Flags of other programs a core module writes into scripts and commands it generates or quotes:
#: docker/podman, pip, aws (``ssm start-session`` too), multi-model-server (MMS/TorchServe's ``--enable-model-api`` included).
_OTHER_PROGRAMS = {"--platform", "--provenance", "--load", "--format", "--username", "--password-stdin",
                   "--no-cache-dir", "--expires-in", "--start", "--foreground", "--mms-config", "--model-store",
                   "--enable-model-api", "--target", "--document-name", "--parameters"}
#: Core modules that still name mmsctl flags, and how many strings do (issue 11): the CLI should
#: say these through cli/hints.py. The list may only shrink; a module not on it may name none.
KNOWN_FLAG_STRINGS: dict[str, int] = {
    "bench/inputs.py": 1,
    "bench/noop.py": 6,
    "bench/pool.py": 1,
    "bench/runner.py": 3,
    "cloud/_session.py": 1,
    "cloud/accelerators.py": 3,
    "cloud/ami.py": 3,
    "cloud/cost.py": 6,
    "cloud/ec2.py": 4,
    "cloud/ei.py": 1,
    "cloud/errors.py": 1,
    "cloud/fleet/create.py": 9,
    "cloud/fleet/scale.py": 1,
    "cloud/lambda_build.py": 5,
    "cloud/lambda_deploy.py": 2,
    "cloud/lambda_destroy.py": 1,
    "cloud/lambda_invoke.py": 2,
    "cloud/lambda_logs.py": 2,
    "cloud/lambda_spec.py": 28,
    "cloud/network.py": 4,
    "cloud/userdata.py": 14,
    "engine/loader.py": 1,
    "server/config.py": 1,
    "serverless/local.py": 10,
    "serverless/run_local.py": 11,
    "serverless/settings.py": 1,
}


def _core_modules() -> Iterator[Path]:
    """Every module of the core: all of mmsctl/ but the CLI."""
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] != "cli":
            yield path


def flag_strings(path: Path) -> list[str]:
    """The strings of *path* that name an mmsctl flag (docstrings and other programs' flags left out)."""
    found = []
    for line, text in _strings(path):
        cleaned = text
        for allowed in _FOREIGN_OR_OWN:
            cleaned = cleaned.replace(allowed, "")
        flags = [f for f in _FLAG.findall(cleaned) if f not in _OTHER_PROGRAMS]
        if flags:
            found.append(f"{line}: {text!r}")
    return found


def test_core_messages_name_no_mmsctl_flag() -> None:
    counts = {str(path.relative_to(PACKAGE)): len(flag_strings(path)) for path in _core_modules()}
    grown = {name: n for name, n in counts.items() if n > KNOWN_FLAG_STRINGS.get(name, 0)}
    assert grown == {}, "say the flag in mmsctl/cli (hints.py, CommandWords), not in the core"
    shrunk = {name: n for name, n in KNOWN_FLAG_STRINGS.items() if counts.get(name, 0) < n}
    assert shrunk == {}, "fewer flags named now: lower KNOWN_FLAG_STRINGS to match"


def test_the_flag_check_sees_a_flag_in_a_message(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""Pass --doc in a docstring is fine."""\n'
                      'def f():\n    raise ValueError("--noop-workers must be 1 to 64")\n'
                      'HINT = "pass --region us-east-1"\nCMD = "docker buildx build --platform linux/amd64"\n'
                      'RULE = "a ---- b"\n')
    assert sorted(found.split(":")[0] for found in flag_strings(module)) == ["3", "4"]


@pytest.mark.parametrize("package", ["client", "tui"])
def test_core_messages_name_no_mmsctl_command(package: str) -> None:
    found = []
    for path in sorted((PACKAGE / package).rglob("*.py")):
        for line, text in _strings(path):
            if "`mmsctl " in text:
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
