"""recipes/lambda-s3-pipeline/run.sh against moto: deploy, one image through the pipeline, destroy.

moto cannot fire the S3 trigger or run the image, so the test plays Lambda's part: when the
script's upload appears in the input bucket, it runs the real handler on it with
`mmsctl lambda run-local NAME --s3-put …` (the deployed function's environment, moto's S3).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import boto3
import pytest

from tests.support.moto import Moto
from tests.cloud.lambda_support import pushed_image
from tests.recipes.conftest import RECIPES, RecipeRun
from tests.lambda_.conftest import squeezenet_archive  # noqa: F401 - the fixture
from tests.support.waiting import wait_until

SCRIPT = RECIPES / "lambda-s3-pipeline" / "run.sh"
NAME = "mmsctl-pipeline"


@pytest.mark.slow
def test_an_image_goes_through_the_pipeline_and_everything_is_destroyed(
    moto: Moto, recipe: RecipeRun, squeezenet_archive: Path, kitten_jpg: Path  # noqa: F811
) -> None:
    recipe.env.update({k: v for k, v in moto.env().items() if k.startswith("AWS_")})
    pushed_image(NAME)  # PUSH=0: what `lambda build --push` would have left in ECR
    env = dict(recipe.env, INPUT_BUCKET="photos-in", OUTPUT_BUCKET="photos-out", PUSH="0", WAIT="120")
    script = subprocess.Popen(["bash", str(SCRIPT), str(squeezenet_archive), str(kitten_jpg)], cwd=recipe.cwd,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    s3 = boto3.client("s3")

    def uploaded() -> str | None:
        try:
            found = s3.list_objects_v2(Bucket="photos-in", Prefix="incoming/").get("Contents", [])
        except s3.exceptions.NoSuchBucket:
            return None
        return str(found[0]["Key"]) if found else None

    def exited() -> str | None:
        if script.poll() is None:
            return None
        return f"the script exited {script.returncode}:\n{script.stderr.read()}"  # type: ignore[union-attr]

    try:
        try:
            key = wait_until(uploaded, timeout=120, what="the script's upload in s3://photos-in/incoming/",
                             interval=0.3, alive=exited)
        except TimeoutError as exc:
            script.kill()
            raise AssertionError(f"{exc}\n{script.communicate(timeout=30)[1]}") from None
        trigger = recipe.mmsctl("lambda", "run-local", NAME, "--s3-put", f"s3://photos-in/{key}", timeout=180)
        assert trigger.returncode == 0, trigger.stderr
        out, err = script.communicate(timeout=180)
    finally:
        if script.poll() is None:
            script.kill()
    assert script.returncode == 0, err
    result = json.loads(out)
    assert result["status"] == 200 and result["result"][0]["class"] == "n02124075 Egyptian cat"
    assert result["output"] == f"s3://photos-out/predictions/{key.removeprefix('incoming/')}.json"
    assert "rate(5 minutes)" in err  # the describe step
    assert "==> mmsctl lambda destroy mmsctl-pipeline" in err
    assert boto3.client("lambda").list_functions()["Functions"] == []
    assert s3.list_buckets()["Buckets"] == []  # the buckets deploy created went with it


def test_a_missing_image_is_refused_before_anything_is_deployed(recipe: RecipeRun) -> None:
    result = recipe.run(SCRIPT, "squeezenet", "no-such-kitten.jpg", INPUT_BUCKET="in-b", OUTPUT_BUCKET="out-b")
    assert result.returncode == 2
    assert result.stderr.strip() == "error: image not found: no-such-kitten.jpg"


@pytest.mark.parametrize("missing", ["INPUT_BUCKET", "OUTPUT_BUCKET"])
def test_the_buckets_are_required(recipe: RecipeRun, missing: str, kitten_jpg: Path) -> None:
    env = {"INPUT_BUCKET": "in-b", "OUTPUT_BUCKET": "out-b"}
    del env[missing]
    recipe.env.pop(missing, None)
    result = recipe.run(SCRIPT, "squeezenet", str(kitten_jpg), **env)
    assert result.returncode != 0 and f"set {missing}" in result.stderr
