"""Every command example of README.md and docs/*.md is run by a test, or says why it cannot be.

``tests/recipes/doc_examples.py`` finds the blocks and their markers. Here: each block carries one, a ``run
by`` names a test that exists and reads that page; and the two runners of this module run what they are
named for, read from the page as a reader pastes it: the v2 ``curl`` examples against a real server, and the
commands that need neither a server nor AWS in a folder holding what they name.
"""

from __future__ import annotations

import ast
import json
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from tests.recipes.doc_examples import Block, _commands, block_at, blocks, indented_commands, without_comment
from tests.support.cli import run_here
from tests.support.http_mirror import serving_folder
from tests.support.mmsctl_server import ServerInfo, echo_and_squeezenet_server
from tests.support.paths import KITTEN_JPG, REPO, SQUEEZENET_DIR, require_shared

HERE = "tests/recipes/test_doc_examples.py"


def test_every_command_example_is_run_by_a_test_or_says_why_not() -> None:
    found = blocks()
    assert len(found) >= 25  # the extractor sees the pages' blocks
    for block in found:
        assert not block.indented, f"{block.where}: commands in an indented block: fence it (```sh) under its marker"
        assert block.run_by or block.why, f"{block.where}: no <!-- examples: run by … | not run: … --> above it"
        if block.why:
            assert len(block.why.strip()) > 10, f"{block.where}: say why it is not run"
            continue
        file, _, test = block.run_by.partition("::")  # type: ignore[union-attr]
        source = (REPO / file).read_text(encoding="utf-8")
        names = {n.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)}
        assert test in names, f"{block.where}: {block.run_by} is no test"
        page = str(block.page.relative_to(REPO))
        assert page in source or file == HERE, f"{block.where}: {file} does not read {page}"


def test_the_extractor_sees_what_a_reader_pastes() -> None:
    console = "$ mmsctl a \\\n    --b c   # why\nan output line\n$ curl x\n"
    assert _commands("console", console) == ["mmsctl a  --b c   # why", "curl x"]
    sh = "# a comment\nmmsctl z\npython3 - <<'EOF'   # a note\nprint(1)\nEOF\ncurl y\n"
    assert _commands("sh", sh) == ["mmsctl z", "python3 - <<'EOF'   # a note\nprint(1)\nEOF", "curl y"]
    assert _commands("", "[INFO] a log line\n.venv/bin/python bench/x.py   # c\n") == [".venv/bin/python bench/x.py   # c"]
    assert without_comment("curl 'a # b'  # c") == "curl 'a # b'"
    page = ("Text.\n\n    mmsctl a --b\n    mmsctl c   # d\n\nMore.\n\n    none ──▶ done\n\n"
            "```\n    mmsctl e\n```\n\n    $ mmsctl f\n    output\n")
    assert list(indented_commands(page)) == [(3, ("mmsctl a --b", "mmsctl c   # d")), (14, ("mmsctl f",))]


# -- the v2 examples (docs/server.md), as pasted ------------------------------------------------------


@pytest.fixture(scope="module")
def v2_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    with echo_and_squeezenet_server(tmp_path_factory) as info:
        yield info


def test_the_v2_examples_run_as_pasted(v2_server: ServerInfo, tmp_path: Path) -> None:
    """docs/server.md's v2 block, each command as it is written, in one bash with ``set -e``: only the port is
    this server's. The binary request is built by the page's own here-document."""
    (block,) = block_at("docs/server.md", "test_the_v2_examples_run_as_pasted")
    shutil.copy(require_shared(KITTEN_JPG), tmp_path / "kitten.jpg")
    port = v2_server.inference_url.rsplit(":", 1)[1]
    script = "set -euo pipefail\n" + "\nprintf '\\n@@@\\n'\n".join(c.replace("127.0.0.1:8080", f"127.0.0.1:{port}")
                                                                    for c in block.commands)
    run = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    said = [part.strip() for part in run.stdout.split("\n@@@\n")]
    assert len(said) == len(block.commands) == 10
    assert json.loads(said[0])["name"] == "mmsctl" and json.loads(said[1]) == {"live": True}
    assert json.loads(said[2]) == {"ready": True} and json.loads(said[5]) == {"name": "squeezenet", "ready": True}
    assert json.loads(said[3]) == json.loads(said[4]) and json.loads(said[3])["inputs"][0]["name"] == "data_0"
    assert {m["name"] for m in json.loads(said[6])} == {"echo", "squeezenet"}
    assert json.loads(said[7])["outputs"][0]["data"] == ["hello"]
    top = json.loads(said[9])["outputs"][0]["data"]
    assert len(top) == 5 and "cat" in top[0].split(":", 2)[2], top


# -- what needs no server and no AWS ---------------------------------------------------------------

#: Lines of the blocks run here that are not run, and why (each must still be on its page).
NOT_HERE = {
    "mmsctl predict squeezenet photos/ 'more/*.png' https://example.com/cat.jpg -o jsonl":
        "fetches from example.com; tests/predict/test_fetch.py runs URL inputs against a loopback server",
    "cat cat.jpg | mmsctl predict ./squeezenet.mar - -o json": "tests/cli/test_predict.py::test_stdin reads stdin",
    "mmsctl --context prod predict squeezenet kitten.jpg": "needs a server named prod (tests/cli/test_predict_remote.py)",
    "mmsctl ec2 cost --instance-type m5.large --throughput 4.5 --live --region eu-west-1": "AWS's price list API",
    "mmsctl ec2 cost --instance-type c5.xlarge --from-bench run.json": "a saved `mmsctl bench` run against a server",
    "mmsctl fleet cost prod --from-bench squeezenet.json": "a fleet on AWS",
}


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A zoo mirror on loopback (downloads land in the cache, as the zoo's do): the zoo's squeezenet (the shared
    checkpoint) and a resnet-18 (its bytes, as a stand-in)."""
    from mmsctl.archive import create_archive

    folder = tmp_path_factory.mktemp("mirror")
    create_archive(require_shared(SQUEEZENET_DIR), model_name="squeezenet_v1.1", export_path=folder)
    shutil.copy(folder / "squeezenet_v1.1.mar", folder / "resnet-18.mar")
    with serving_folder(folder) as served:
        yield served.url


def _folder(tmp_path: Path, block: Block) -> Path:
    """A fresh folder with what the page's commands name: the checkpoint, its ONNX file, the synset, the kitten."""
    work = tmp_path / f"{block.page.stem}-{block.line}"
    work.mkdir()
    shared = require_shared(SQUEEZENET_DIR)
    (work / "squeezenet_v1.1").symlink_to(shared)
    (work / "SqueezeNet_fp16.onnx").symlink_to(require_shared(shared.parent / "onnx" / "SqueezeNet_fp16.onnx"))
    shutil.copy(shared / "synset.txt", work / "synset.txt")
    shutil.copy(require_shared(KITTEN_JPG), work / "kitten.jpg")
    if block.commands[0].startswith("mmsctl archive inspect"):
        assert run_here("archive", "create", "./squeezenet_v1.1", "--model-name", "squeezenet", cwd=work).returncode == 0
    return work


OFFLINE = [b for b in blocks() if b.run_by == f"{HERE}::test_the_examples_that_need_no_server_run"]


@pytest.mark.parametrize("block", OFFLINE, ids=lambda b: b.where)
def test_the_examples_that_need_no_server_run(block: Block, tmp_path: Path, mirror: str) -> None:
    """Each mmsctl line of the block in order, as the shell would split it, in this process."""
    home = tmp_path / "home"
    (home / "ts").mkdir(parents=True)
    (home / "ts" / "key_file.json").write_text('{"inference": "i", "management": "m"}')
    work = _folder(tmp_path, block)
    env = {"MMSCTL_ZOO_URL": mirror, "MMSCTL_OFFLINE": "0", "HOME": str(home), "AWS_EC2_METADATA_DISABLED": "true"}
    for command in block.commands:
        line = without_comment(command)
        if line in NOT_HERE:
            continue
        assert line.startswith("mmsctl ") and not set("|<>;&$") & set(line), f"{block.where}: {line}: not runnable"
        words = [str(home / w[2:]) if w.startswith("~/") else w for w in shlex.split(line)]  # `~` as the shell does
        done = run_here(*words[1:], env=env, cwd=work)
        assert done.returncode == 0, f"{block.where}: {line}\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr


def test_the_lines_not_run_here_are_still_on_their_pages() -> None:
    lines = {without_comment(c) for b in OFFLINE for c in b.commands}
    assert set(NOT_HERE) <= lines, sorted(set(NOT_HERE) - lines)
    assert OFFLINE, "no block names the offline runner"
