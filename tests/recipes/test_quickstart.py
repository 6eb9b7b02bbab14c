"""recipes/quickstart.sh end to end: serve, curl, list, scale, describe, stop on free ports."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.recipes.conftest import RECIPES, RecipeRun
from tests.support.archives import squeezenet_mar
from tests.support.mmsctl_server import make_noop_archive

SCRIPT = RECIPES / "quickstart.sh"


def _first_json(text: str) -> object:
    start = min(i for i in (text.find("["), text.find("{")) if i >= 0)
    value, _ = json.JSONDecoder().raw_decode(text[start:])
    return value


def _port_closed(url: str) -> bool:
    host, port = url.rsplit("/", 1)[-1].split(":")
    with socket.socket() as sock:
        sock.settimeout(2)
        return sock.connect_ex((host, int(port))) != 0


def _no_running_server(recipe: RecipeRun) -> None:
    status = recipe.mmsctl("serve", "status", "-o", "json")
    assert status.returncode == 0, status.stderr
    rows = json.loads(status.stdout)
    assert [r for r in rows if r["status"] not in ("stopped", "failed", "dead")] == []
    assert _port_closed(recipe.inference_url)


@pytest.mark.slow
def test_quickstart_serves_squeezenet_from_the_zoo(
    recipe: RecipeRun, squeezenet_dir: Path, kitten_jpg: Path
) -> None:
    # An offline zoo mirror holding the real squeezenet: the name `squeezenet` resolves offline.
    mirror = recipe.cwd / "mirror"
    squeezenet_mar(recipe.mmsctl, squeezenet_dir, mirror)

    result = recipe.run(SCRIPT, "squeezenet", str(kitten_jpg), MMSCTL_ZOO_URL=str(mirror))

    assert result.returncode == 0, result.stderr
    top = _first_json(result.stdout)
    assert isinstance(top, list) and top[0]["class"] == "n02124075 Egyptian cat"
    assert "squeezenet scaled to 2 workers (2 ready)" in result.stdout
    assert "2 ready / 2" in result.stdout  # describe after the scale
    assert "server quickstart stopped" in result.stderr
    _no_running_server(recipe)


def test_quickstart_stops_the_server_when_a_step_fails(recipe: RecipeRun, tmp_path: Path) -> None:
    model = make_noop_archive(tmp_path / "noop")
    body = recipe.cwd / "hello.txt"
    body.write_text("hello recipe")

    result = recipe.run(
        SCRIPT, str(model), str(body), WORKERS="many"
    )  # `mmsctl scale` refuses "many"

    assert result.returncode != 0
    assert "hello recipe" in result.stdout  # the curl step ran against the echo model
    assert "server quickstart stopped" in result.stderr
    assert "Traceback" not in result.stderr
    _no_running_server(recipe)


def test_quickstart_refuses_a_missing_image_before_starting(recipe: RecipeRun) -> None:
    result = recipe.run(SCRIPT, "squeezenet", "no-such-kitten.jpg")

    assert result.returncode == 2
    assert "image not found: no-such-kitten.jpg" in result.stderr
    assert "serve start" not in result.stderr
