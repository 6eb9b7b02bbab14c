"""`scripts/demo.py` end to end, offline: from nothing to a prediction."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO, SHARED, SQUEEZENET_DIR, require_shared

DEMO = REPO / "scripts" / "demo.py"

pytestmark = pytest.mark.slow


def _need_commands() -> None:
    for module in ("mmsctl.cli.predict", "mmsctl.engine.service", "mmsctl.archive"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not in this checkout yet: the demo ends with `mmsctl predict`")


def _run_demo(env_extra: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="200", **env_extra)
    cwd.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, str(DEMO)], capture_output=True, text=True, timeout=120, env=env, cwd=cwd
    )


def _no_repo_litter(before: set[Path]) -> None:
    after = {p for p in REPO.glob("*.mar")}
    assert after == before, "the demo must not write archives into the repo"


def test_demo_offline_with_the_pretrained_checkpoint_predicts_a_cat(tmp_path: Path) -> None:
    _need_commands()
    require_shared(SQUEEZENET_DIR)
    from mmsctl.zoo import cache

    before = set(REPO.glob("*.mar"))
    proc = _run_demo({"MMSCTL_SHARED_DIR": str(SHARED)}, tmp_path / "work")  # MMSCTL_OFFLINE=1 from conftest
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no internet" in proc.stdout and "pretrained checkpoint" in proc.stdout
    assert "untrained" not in proc.stdout
    assert "cat" in proc.stdout.lower()  # tabby / tiger cat / Egyptian cat
    _no_repo_litter(before)
    # what the README's tour needs next: squeezenet by name from the cache, the kitten here
    cached = cache.zoo_path("squeezenet_v1.1.mar")
    assert cached.is_file() and cache.read_meta(cached)["url"] == SQUEEZENET_DIR.resolve().as_uri()
    assert (tmp_path / "work" / "kitten.jpg").read_bytes() == (SHARED / "images" / "kitten_small.jpg").read_bytes()
    assert sorted(p.name for p in (tmp_path / "work" / "photos").iterdir()) == ["kitten_224.png", "kitten_small.jpg"]


def test_demo_without_shared_builds_untrained_weights_and_says_so(tmp_path: Path) -> None:
    _need_commands()
    empty = tmp_path / "shared"
    empty.mkdir()
    proc = _run_demo({"MMSCTL_SHARED_DIR": str(empty)}, tmp_path / "work")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "untrained weights" in proc.stdout and "meaningless" in proc.stdout
    assert "generated" in proc.stdout  # no kitten either
    assert "untrained class" in proc.stdout  # the placeholder labels came through predict
    from mmsctl.zoo import cache

    assert not cache.zoo_path("squeezenet_v1.1.mar").exists()  # never passes for the real model
    assert "MMSCTL_ZOO_URL=" in proc.stdout and (tmp_path / "work" / "kitten.jpg").is_file()


def test_demo_uses_the_cache_when_the_model_is_there(tmp_path: Path) -> None:
    """With squeezenet already cached, the demo needs neither network nor ../shared."""
    _need_commands()
    require_shared(SQUEEZENET_DIR)
    from mmsctl.archive import create_archive
    from mmsctl.zoo import cache

    store = tmp_path / "store"
    create_archive(SQUEEZENET_DIR, model_name="squeezenet_v1.1", export_path=store)
    target = cache.zoo_path("squeezenet_v1.1.mar")
    target.parent.mkdir(parents=True)
    (store / "squeezenet_v1.1.mar").replace(target)
    proc = _run_demo({"MMSCTL_SHARED_DIR": str(tmp_path / "nothing")}, tmp_path / "work")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "from the cache" in proc.stdout and "no internet" not in proc.stdout
