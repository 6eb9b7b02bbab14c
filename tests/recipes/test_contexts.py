"""recipes/contexts.md for real: a server with a TorchServe key_file.json token as a context."""

from __future__ import annotations

import json
from pathlib import Path

from tests.recipes.conftest import RecipeRun
from tests.support.mmsctl_server import make_noop_archive


def _key_file(path: Path, inference: str, management: str) -> Path:
    """The shape TorchServe 0.12 writes beside itself."""
    entry = lambda key: {"key": key, "expiration time": "2099-01-01T00:00:00Z"}  # noqa: E731
    path.write_text(
        json.dumps(
            {"management": entry(management), "inference": entry(inference), "API": entry("api")}
        )
    )
    return path


def test_contexts_recipe_against_a_token_server(recipe: RecipeRun, tmp_path: Path) -> None:
    keys = _key_file(tmp_path / "key_file.json", "inf-key", "mgmt-key")
    started = recipe.mmsctl(
        "serve",
        "start",
        "--name",
        "ts-like",
        "--models",
        f"noop={make_noop_archive(tmp_path / 'noop')}",
        "--token-file",
        str(keys),
        "--inference-address",
        recipe.inference_url,
        "--management-address",
        recipe.management_url,
        "--metrics-address",
        f"http://127.0.0.1:{recipe.metrics_port}",
        timeout=120,
    )
    assert started.returncode == 0, started.stderr
    try:
        added = recipe.mmsctl(
            "context",
            "add",
            "ts-prod",
            "--inference",
            recipe.inference_url,
            "--management",
            recipe.management_url,
            "--token-file",
            str(keys),
        )
        assert added.returncode == 0, added.stderr
        wrong = _key_file(tmp_path / "stale.json", "old", "old")
        recipe.mmsctl(
            "context",
            "add",
            "stale",
            "--inference",
            recipe.inference_url,
            "--management",
            recipe.management_url,
            "--token-file",
            str(wrong),
        )
        assert recipe.mmsctl("context", "use", "ts-prod").returncode == 0

        listed = recipe.mmsctl("models", "list", "-o", "json")
        assert listed.returncode == 0, listed.stderr
        assert "noop" in listed.stdout
        current = json.loads(recipe.mmsctl("context", "current", "-o", "json").stdout)
        assert current["name"] == "ts-prod" and current["source"] == "file"
        assert "*" in next(
            ln for ln in recipe.mmsctl("context", "list").stdout.splitlines() if "ts-prod" in ln
        )

        other = recipe.mmsctl("--context", "stale", "models", "describe", "noop")
        assert other.returncode == 6, other.stderr  # authentication, as the recipe says
        remote = recipe.mmsctl("predict", "noop", str(keys), "--context", "ts-prod", "-o", "json")
        assert remote.returncode == 0, remote.stderr
        assert "inf-key" in remote.stdout  # the echo model sent our file back through the server
    finally:
        recipe.mmsctl("serve", "stop", "--name", "ts-like")
