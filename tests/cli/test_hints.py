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
from mmsctl.cli.hints import HINTS, CommandWords, hint_for
from mmsctl.errors import MmsError
from tests.support.cli import run_mmsctl
from tests.client.standin import StandIn, running_standin

PACKAGE = Path(mmsctl.__file__).parent
#: Flags of other programs (TorchServe's) and of `top`'s own on-screen help may be named.
_FOREIGN_OR_OWN = ("--enable-model-api", "--readonly")


def _subclasses(cls: type) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


#: Modules that cannot be imported in a test process (textual apps; the Lambda handler reads its environment).
_NOT_IMPORTED = ("mmsctl.tui.app", "mmsctl.tui.screens", "mmsctl.tui.widgets", "mmsctl.lambda_.handler")


def _references() -> set[str]:
    """The reference of every MmsError type of the packages whose errors the CLI words."""
    for module in ("client", "tui", "cloud", "loadtest", "lambda_"):
        for info in pkgutil.walk_packages([str(PACKAGE / module)], f"mmsctl.{module}."):
            if not info.name.startswith(_NOT_IMPORTED):
                importlib.import_module(info.name)
    return {sub.reference for sub in _subclasses(MmsError)}


def test_every_hint_is_keyed_by_a_real_error_reference() -> None:
    references = _references()
    assert set(HINTS) <= references, set(HINTS) - references


def test_every_command_hint_keyed_by_a_reference_names_a_real_one() -> None:
    """A key with a dash is a reference (an argument's name has none): a typo would never match."""
    references = _references()
    keys = set()
    for info in pkgutil.iter_modules([str(PACKAGE / "cli")], "mmsctl.cli."):
        for value in vars(importlib.import_module(info.name)).values():
            if isinstance(value, CommandWords):
                keys.update(key for key, _ in value.hints if isinstance(key, str) and "-" in key)
    assert keys and keys <= references, keys - references


def test_command_words_name_every_flag_of_an_error_and_match_hints_by_reference_or_argument() -> None:
    words = CommandWords(flags={"warm": "--warm", "provisioned": "--provisioned"},
                         hints=(("lambda-schedule-too-short", "use --warm 1m"), ("provisioned", "use --provisioned 1"),
                                (MmsError, lambda exc: f"about {exc.param}")))
    both = MmsError("a schedule or provisioned concurrency, not both", params=("warm", "provisioned"))
    words.reword(both)
    assert both.message == "a schedule or provisioned concurrency, not both (--warm, --provisioned)"
    assert both.hint == "use --provisioned 1" and both.param == "warm"
    from mmsctl.cloud.lambda_.spec import ScheduleTooShort

    short = ScheduleTooShort("30s: too short (--warm)", param="warm", hint="the core's")
    words.reword(short)
    assert (short.message, short.hint) == ("30s: too short (--warm)", "use --warm 1m")  # a flag named once
    other = MmsError("x", param="timeout")
    words.reword(other)
    assert (other.message, other.hint) == ("x", "about timeout")


def _strings(path: Path, command_lines: frozenset[str] = frozenset()) -> Iterator[tuple[int, str]]:
    """The string constants of a module, docstrings (and the command lines in *command_lines*) left out."""
    tree = ast.parse(path.read_text())
    skip = _command_line_strings(tree, command_lines)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings \
                and id(node) not in skip:
            yield node.lineno, node.value


#: A flag: two dashes, a letter, not inside a word (``x--y``) or a longer dash run.
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
#: Flags of other programs a core module writes into scripts and commands it generates or quotes:
#: docker/podman, pip, aws (``ssm start-session`` too), multi-model-server (MMS/TorchServe's ``--enable-model-api`` included).
_OTHER_PROGRAMS = {"--platform", "--provenance", "--load", "--format", "--username", "--password-stdin",
                   "--no-cache-dir", "--expires-in", "--start", "--foreground", "--mms-config", "--model-store",
                   "--enable-model-api", "--convert", "--target", "--document-name", "--parameters", "--endpoint-url",
                   "--function-name",
                   "--ol-s3"}  # not a flag: S3's reserved bucket-name suffix (lambda_/spec.py)
#: Strings that are a command line a core module writes, not a message, found by the name of the
#: assignment, call or function that holds them (module -> names): the EC2 boot script's own
#: ``mmsctl serve start --inference-address …`` line, the Dockerfile's comment, and the child
#: ``python -m mmsctl.lambda_.local --handler …`` of ``lambda run-local --build`` with its parser, and the
#: ``curl`` line ``sagemaker run-local`` shows once the container answers.
_COMMAND_LINES: dict[str, frozenset[str]] = {
    "cloud/instance/userdata.py": frozenset({"exec_line", "_pip_part", "_fetch_part"}),
    "cloud/instance/wheelhouse.py": frozenset({"_pip"}),
    "cloud/lambda_/build.py": frozenset({"dockerfile_text"}),
    "lambda_/run_local.py": frozenset({"args"}),
    "lambda_/local.py": frozenset({"add_argument"}),
    "sagemaker/run_local.py": frozenset({"curl_line"}),
}
#: Core modules that still name mmsctl flags, and how many strings do (issue 11): the CLI should
#: say these through cli/hints.py. The list may only shrink; a module not on it may name none.
#: (server/, engine/ and predict/ are being rewritten elsewhere.)
KNOWN_FLAG_STRINGS: dict[str, int] = {
}


def _core_modules() -> Iterator[Path]:
    """Every module of the core: all of mmsctl/ but the CLI."""
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] != "cli":
            yield path


def _command_line_strings(tree: ast.AST, names: frozenset[str]) -> set[int]:
    """The ids of the string constants inside an assignment to, a call of, or a function named one of *names*."""
    inside: set[int] = set()
    for node in ast.walk(tree) if names else ():
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            hit = any(isinstance(t, ast.Name) and t.id in names for t in targets)
        elif isinstance(node, ast.Call):
            func = node.func
            hit = (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) in names
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            hit = node.name in names
        else:
            continue
        if hit:
            inside.update(id(sub) for sub in ast.walk(node) if isinstance(sub, ast.Constant))
    return inside


def flag_strings(path: Path, command_lines: frozenset[str] = frozenset()) -> list[str]:
    """The strings of *path* that name an mmsctl flag (docstrings, other programs' flags and the
    command lines inside *command_lines* left out)."""
    found = []
    for line, text in _strings(path, command_lines):
        cleaned = text
        for allowed in _FOREIGN_OR_OWN:
            cleaned = cleaned.replace(allowed, "")
        flags = [f for f in _FLAG.findall(cleaned) if f not in _OTHER_PROGRAMS]
        if flags:
            found.append(f"{line}: {text!r}")
    return found


def test_core_messages_name_no_mmsctl_flag() -> None:
    counts = {}
    for path in _core_modules():
        name = str(path.relative_to(PACKAGE))
        counts[name] = len(flag_strings(path, _COMMAND_LINES.get(name, frozenset())))
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


def test_a_command_line_is_allowed_only_where_it_is_named(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('def f(port):\n    exec_line = " ".join(["mmsctl serve", f"--inference-address :{port}"])\n'
                      '    if not port:\n        raise ValueError(f"--inference-address {port} is bad")\n')
    assert [found.split(":")[0] for found in flag_strings(module, frozenset({"exec_line"}))] == ["4"]
    assert len(flag_strings(module)) == 2


@pytest.mark.parametrize("package", ["client", "tui"])
def test_core_messages_name_no_mmsctl_command(package: str) -> None:
    found = []
    for path in sorted((PACKAGE / package).rglob("*.py")):
        for line, text in _strings(path):
            if "`mmsctl " in text:
                found.append(f"{path.relative_to(PACKAGE)}:{line}: {text!r}")
    assert found == []


def test_the_cli_adds_the_hint_of_a_typed_error(capsys: pytest.CaptureFixture[str]) -> None:
    r = run_mmsctl(capsys, "--context", "nowhere", "models", "list")
    assert r.code == 3
    assert r.stderr.splitlines() == ["error: context 'nowhere' not found (known: local)",
                                     "hint: add it with `mmsctl context add`"]


def test_a_version_that_is_not_there_gets_the_version_hint(capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with running_standin(StandIn(management_key=None, inference_key=None)) as standin:
        standin.add_model("nin", 1)
        monkeypatch.setenv("MMSCTL_INFERENCE_URL", standin.inference_url)
        monkeypatch.setenv("MMSCTL_MANAGEMENT_URL", standin.management_url)
        r = run_mmsctl(capsys, "models", "describe", "nin", "--model-version", "9.9")
    assert r.code == 3
    assert r.stderr.splitlines()[1] == (
        "hint: `mmsctl models describe nin` shows its default version; leave out --model-version to use it")


def test_an_error_with_its_own_hint_keeps_it() -> None:
    from mmsctl.client._errors import ConnectionRefused

    assert hint_for(ConnectionRefused("x", hint="about the data")) == "about the data"
    assert hint_for(ConnectionRefused("x")) == "is the server running? `mmsctl ping --all` checks every context"
    assert hint_for(MmsError("x")) is None


@pytest.mark.parametrize("product", ["lambda_", "sagemaker"])
def test_a_deploy_that_stopped_part_way_hints_its_cause_and_its_own_destroy(product: str) -> None:
    """Both products' deploys stop part way with one error: the failed step's hint first, then the destroy
    command for the name deployed (not a placeholder)."""
    import importlib

    from mmsctl.cloud.aws.changes import Change
    from mmsctl.errors import CloudError

    stopped = importlib.import_module(f"mmsctl.cloud.{product}.deploy.run").DeployIncomplete
    words = importlib.import_module(f"mmsctl.cli.{product}.deploy")._DEPLOY_WORDS
    exc = stopped("kitten", CloudError("AWS said no", hint="choose another NAME"), [Change("create", "role", "r")])
    words.reword(exc)
    command = "lambda" if product == "lambda_" else "sagemaker"
    assert exc.message == "AWS said no; deploy of kitten stopped there, after it made: role r (destroying kitten " \
                          "removes them)"
    assert exc.hint is not None and exc.hint.startswith("choose another NAME; fix it and ")
    assert exc.hint.endswith(f"mmsctl {command} destroy kitten")
