"""recipes/mms-config/config.properties: valid Java Properties; mmsctl and real MMS accept it."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from mmsctl.server.config import parse_properties
from tests.recipes.conftest import RECIPES, RecipeRun
from tests.support._proc import http_request
from tests.support.archives import squeezenet_mar
from tests.support.mms import describe, mms_skip_reason, running_mms, wait_for_prediction
from tests.support.refserver import java as find_java

CONFIG = RECIPES / "mms-config" / "config.properties"

# Prints every property java.util.Properties reads from args[0], as key NUL value NUL.
_JAVA_DUMP = """
import java.io.FileReader;
import java.util.Properties;

public class PropsDump {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (FileReader in = new FileReader(args[0])) { props.load(in); }
        for (String key : props.stringPropertyNames()) {
            System.out.print(key + "\\u0000" + props.getProperty(key) + "\\u0000");
        }
    }
}
"""


def _java_properties(path: Path, tmp_path: Path) -> dict[str, str]:
    java = find_java()
    if java is None:
        pytest.skip(
            "no `java` on PATH and no JAVA_HOME: cannot check the file with java.util.Properties"
        )
    source = tmp_path / "PropsDump.java"
    source.write_text(_JAVA_DUMP)
    out = subprocess.run(
        [java, str(source), str(path)], capture_output=True, timeout=120, check=True
    ).stdout
    fields = out.decode("utf-8").split("\0")[:-1]
    return dict(zip(fields[::2], fields[1::2]))


def _with_ports(text: str, recipe: RecipeRun) -> str:
    for key, port in (
        ("inference_address", recipe.port),
        ("management_address", recipe.management_port),
        ("metrics_address", recipe.metrics_port),
    ):
        text = re.sub(
            rf"^{key}=http://127\.0\.0\.1:\d+$",
            f"{key}=http://127.0.0.1:{port}",
            text,
            flags=re.M,
        )
    return text


def test_java_reads_the_same_properties_as_mmsctl(tmp_path: Path) -> None:
    ours = parse_properties(CONFIG.read_text())
    assert _java_properties(CONFIG, tmp_path) == ours
    assert ours["load_models"] == "squeezenet=squeezenet_v1.1.mar"
    assert ours["inference_address"] == "http://127.0.0.1:8080"
    assert all(
        not v.rstrip().endswith(("#", "!")) and "#" not in v for v in ours.values()
    )  # no inline comments


def test_mmsctl_serves_with_the_config(
    recipe: RecipeRun, squeezenet_dir: Path, kitten_jpg: Path
) -> None:
    # A copy beside its own model-store/ (relative, as in the recipe); only the ports change.
    folder = recipe.cwd / "site"
    folder.mkdir()
    config = folder / "config.properties"
    config.write_text(_with_ports(CONFIG.read_text(), recipe))
    squeezenet_mar(recipe.mmsctl, squeezenet_dir, folder / "model-store")

    started = recipe.mmsctl("serve", "start", "--config", str(config), timeout=180)
    assert started.returncode == 0, started.stderr
    try:
        reply = http_request(
            "POST",
            f"{recipe.inference_url}/predictions/squeezenet",
            body=kitten_jpg.read_bytes(),
            headers={"Content-Type": "image/jpeg"},
        )
        assert reply.status == 200, reply
        assert reply.json()[0]["class"] == "n02124075 Egyptian cat"
        model = http_request("GET", f"{recipe.management_url}/models/squeezenet").json()
        model = model[0] if isinstance(model, list) else model
        assert model["minWorkers"] == 2  # default_workers_per_model
        assert [w["status"] for w in model["workers"]] == ["READY", "READY"]
        assert model["queueStatus"]["capacity"] == 500  # job_queue_size
        metrics = http_request("GET", f"http://127.0.0.1:{recipe.metrics_port}/metrics")
        assert metrics.status == 200 and b"mmsctl_requests_total" in metrics.body
    finally:
        stopped = recipe.mmsctl("serve", "stop", "--name", str(recipe.port))
    assert stopped.returncode == 0, stopped.stderr


@pytest.mark.interop
@pytest.mark.xdist_group("mms")
@pytest.mark.slow
def test_real_mms_loads_the_config(
    recipe: RecipeRun, squeezenet_dir: Path, kitten_jpg: Path, tmp_path: Path
) -> None:
    reason = mms_skip_reason()
    if reason:
        pytest.skip(reason)
    store = tmp_path / "model-store"
    squeezenet_mar(recipe.mmsctl, squeezenet_dir, store)
    props = parse_properties(CONFIG.read_text())
    # running_mms picks free ports and passes --model-store; every other key is the recipe's.
    extra = {k: v for k, v in props.items() if not k.endswith("_address") and k != "model_store"}
    with running_mms(tmp_path / "mms", model_store=store, extra_config=extra, workers=1) as mms:
        first = wait_for_prediction(mms, "squeezenet", kitten_jpg.read_bytes(), timeout=120)
        assert json.loads(first.body)[0]["class"] == "n02124075 Egyptian cat"
        assert describe(mms, "squeezenet")["minWorkers"] == 2
