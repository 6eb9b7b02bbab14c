"""recipes/air-gapped-mirror.sh: build a mirror from a loopback "zoo", then use it offline."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.recipes.conftest import RECIPES, RecipeRun
from tests.support.archives import squeezenet_mar
from tests.support.http_mirror import serving_folder

SCRIPT = RECIPES / "air-gapped-mirror.sh"


def test_mirror_is_built_checked_and_works_offline(
    recipe: RecipeRun, tmp_path: Path, squeezenet_dir: Path, kitten_jpg: Path
) -> None:
    upstream = tmp_path / "upstream"  # stands in for the MMS zoo on the connected side
    squeezenet_mar(recipe.mmsctl, squeezenet_dir, upstream)
    dest = tmp_path / "mirror"

    with serving_folder(upstream) as zoo:
        result = recipe.run(
            SCRIPT,
            str(dest),
            "squeezenet",
            f"sitemodel={squeezenet_dir}",
            MMSCTL_OFFLINE="0",
            MMSCTL_ZOO_URL=zoo.url,
        )
        assert result.returncode == 0, result.stderr
        assert zoo.requests == ["squeezenet_v1.1.mar"]

    assert sorted(p.name for p in dest.iterdir()) == [
        "SHA256SUMS",
        "sitemodel.mar",
        "squeezenet_v1.1.mar",
    ]
    assert (dest / "squeezenet_v1.1.mar").read_bytes() == (
        upstream / "squeezenet_v1.1.mar"
    ).read_bytes()
    subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=dest, check=True, capture_output=True)
    assert f"export MMSCTL_ZOO_URL={dest} MMSCTL_OFFLINE=1" in result.stderr

    # The offline side: an empty cache, no network, only the mirror folder.
    offline = dict(
        MMSCTL_OFFLINE="1",
        MMSCTL_ZOO_URL=str(dest),
        MMSCTL_CACHE_DIR=str(tmp_path / "offline-cache"),
    )
    recipe.env.update(offline)
    answer = recipe.mmsctl("predict", "sitemodel", str(kitten_jpg), "-o", "json")
    assert answer.returncode == 0, answer.stderr
    assert json.loads(answer.stdout)[0]["class"] == "n02124075 Egyptian cat"
    missing = recipe.mmsctl("zoo", "path", "resnet-18")
    assert missing.returncode == 3
    assert f"not in the mirror folder {dest}" in missing.stderr


def test_a_failed_pull_fails_the_script(recipe: RecipeRun, tmp_path: Path) -> None:
    with serving_folder(tmp_path / "empty-zoo") as zoo:
        result = recipe.run(
            SCRIPT,
            str(tmp_path / "mirror"),
            "resnet-18",
            MMSCTL_OFFLINE="0",
            MMSCTL_ZOO_URL=zoo.url,
        )
    assert result.returncode != 0
    assert "resnet-18.mar" in result.stderr and "404" in result.stderr
    assert "Mirror ready" not in result.stderr
