"""recipes/custom-handler: the script end to end on mmsctl; the same archive in real MMS 1.1.11."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.recipes.conftest import RECIPES, RecipeRun, mmsctl_command
from tests.support.fixtures_mms import mms_server  # noqa: F401  (fixture)
from tests.support.mms import MmsInstance, predict, register_model, unregister_model, wait_for_prediction

FOLDER = RECIPES / "custom-handler"


def _json_values(text: str) -> list[object]:
    """Every top-level JSON value printed on stdout, in order (other lines are skipped)."""
    decoder, values, i = json.JSONDecoder(), [], 0
    while i < len(text):
        if text[i] in "[{":
            try:
                value, i = decoder.raw_decode(text, i)
                values.append(value)
                continue
            except ValueError:
                pass
        i += 1
    return values

def _create_adder(export: Path) -> list[str]:
    """The recipe's `mmsctl archive create` arguments for the adder, written to *export*."""
    return ["archive", "create", str(FOLDER / "sum_service"), "--model-name", "adder",
            "--handler", "handler:handle", "--extra-files", str(FOLDER / "settings.json"),
            "--export-path", str(export)]



def test_custom_handler_recipe_archives_predicts_and_serves(
    recipe: RecipeRun, tmp_path: Path
) -> None:
    export = tmp_path / "export"
    result = recipe.run(FOLDER / "run.sh", EXPORT_DIR=str(export))

    assert result.returncode == 0, result.stderr
    assert (export / "adder.mar").is_file()
    sums = [v for v in _json_values(result.stdout) if isinstance(v, dict) and "sum" in v]
    # local predict on numbers.json and on stdin; then curl -d JSON and curl -T numbers.json
    assert sums == [
        {"sum": 6.5, "count": 3},
        {"sum": 42, "count": 3},
        {"sum": 6, "count": 3},
        {"sum": 6.5, "count": 3},
    ]
    assert "HTTP/1.1 400" in result.stdout
    assert "content-type: application/json" in result.stdout.lower()
    assert "not a number: 'one'" in result.stdout
    assert "server custom-handler stopped" in result.stderr


def test_settings_json_is_read_at_load_time(recipe: RecipeRun, tmp_path: Path) -> None:
    """--extra-files settings.json reaches the handler: its round_digits=4 rounds the sum."""
    numbers = tmp_path / "thirds.json"
    numbers.write_text(json.dumps([1 / 3, 1 / 3]))
    made = recipe.mmsctl(*_create_adder(tmp_path))
    assert made.returncode == 0, made.stderr
    out = recipe.mmsctl("predict", str(tmp_path / "adder.mar"), str(numbers), "-o", "json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"sum": 0.6667, "count": 2}


@pytest.mark.interop
@pytest.mark.xdist_group("mms")
def test_the_recipe_archive_serves_in_real_mms(mms_server: MmsInstance) -> None:  # noqa: F811
    """The recipe's archive, made into this test process's one MMS's store, registered there and asked."""
    subprocess.run(
        [*mmsctl_command().split(), *_create_adder(mms_server.model_store), "--force"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    register_model(mms_server, "adder.mar", "adder")
    try:
        first = wait_for_prediction(mms_server, "adder", b"1 2 3")
        assert first.json() == {"sum": 6.0, "count": 3}
        reply = predict(
            mms_server, "adder", b'{"numbers": [0.33333, 0.33333]}', content_type="application/json"
        )
        assert reply.status == 200
        assert reply.headers.get("content-type") == "application/json"
        assert reply.json() == {"sum": 0.6667, "count": 2}
        bad = predict(mms_server, "adder", b"one two", content_type="text/plain")
        assert bad.status == 400
        assert bad.json()["message"] == "not a number: 'one'"
    finally:
        unregister_model(mms_server, "adder")
