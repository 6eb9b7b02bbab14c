"""What `serve` makes of SageMaker's environment and model folder, and run-local's refusals (in-process: the
running container is tests/sagemaker/test_contract.py's)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mmsctl.errors import ConfigError
from mmsctl.sagemaker.serve import main, model_location, server_config
from tests.support._proc import free_port
from tests.support.cli import run_mmsctl
from tests.support.mmsctl_server import make_noop_archive
from tests.support.paths import REPO


def test_the_model_folder_as_sagemaker_fills_it(tmp_path: Path) -> None:
    opt = tmp_path / "opt-ml-model"
    baked = tmp_path / "baked"
    with pytest.raises(ConfigError, match="no model in .* and none baked into the image"):
        model_location(opt, baked=baked)  # no ModelDataUrl, nothing baked
    make_noop_archive(baked / "noop")
    assert model_location(opt, baked=baked) == str(baked)  # --model-source image
    opt.mkdir()
    (opt / "squeezenet.mar").write_bytes(b"PK\x05\x06" + b"\x00" * 18)
    assert model_location(opt, baked=baked) == str(opt / "squeezenet.mar")  # a model.tar.gz holding one .mar
    make_noop_archive(opt / "noop")
    assert model_location(opt, baked=baked) == str(opt)  # extracted files (the manifest one level down)


def test_sagemakers_environment_as_the_servers_settings(tmp_path: Path) -> None:
    make_noop_archive(tmp_path / "model" / "noop")
    env = {"MMSCTL_SAGEMAKER_MODEL_DIR": str(tmp_path / "model"), "SAGEMAKER_BIND_TO_PORT": "9090",
           "SAGEMAKER_MODEL_SERVER_WORKERS": "3", "SAGEMAKER_MODEL_SERVER_TIMEOUT": "20"}
    config = server_config(env)
    assert config.inference_address == "http://0.0.0.0:9090"
    assert (config.management_address, config.metrics_address) == ("", "")  # nothing but inference is served
    assert (config.default_workers_per_model, config.default_response_timeout) == (3, 20)
    assert config.strict_ping and config.drain_timeout == 25.0
    assert server_config({"MMSCTL_SAGEMAKER_MODEL_DIR": str(tmp_path / "model")}).inference_address.endswith(":8080")
    shorter = server_config({**env, "MMSCTL_SAGEMAKER_DRAIN_TIMEOUT": "3"})
    assert shorter.drain_timeout == 3.0  # a shorter drain; never one past SageMaker's SIGKILL (the ceiling below)


@pytest.mark.parametrize("name, value", [("SAGEMAKER_BIND_TO_PORT", "70000"), ("SAGEMAKER_BIND_TO_PORT", "8080x"),
                                         ("SAGEMAKER_MODEL_SERVER_WORKERS", "65"),
                                         ("SAGEMAKER_MODEL_SERVER_WORKERS", "0"),
                                         ("SAGEMAKER_MODEL_SERVER_TIMEOUT", "99999999"),
                                         ("SAGEMAKER_MODEL_SERVER_WORKERS", "٣"),
                                         ("MMSCTL_SAGEMAKER_DRAIN_TIMEOUT", "26"),
                                         ("MMSCTL_SAGEMAKER_DRAIN_TIMEOUT", "0")])
def test_each_number_has_a_ceiling(tmp_path: Path, name: str, value: str) -> None:
    make_noop_archive(tmp_path / "model" / "noop")
    with pytest.raises(ConfigError, match=f"{name} must be a whole number from 1 to"):
        server_config({"MMSCTL_SAGEMAKER_MODEL_DIR": str(tmp_path / "model"), name: value})


def test_the_entry_takes_serve_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train"]) == 2
    assert "run it with `serve` as SageMaker does (got train)" in capsys.readouterr().err


def test_run_local_refuses_before_starting_anything(capsys: pytest.CaptureFixture[str]) -> None:
    """One line each, naming what to give: the core names the arguments, the CLI their flags."""
    nothing = run_mmsctl(capsys, "sagemaker", "run-local")
    assert nothing.code == 2
    assert nothing.stderr.splitlines() == ["error: name a model, or a build context whose image holds one "
                                           "(MODEL, --build)"]
    port = run_mmsctl(capsys, "sagemaker", "run-local", "squeezenet", "--port", "0")
    assert port.code == 2 and port.stderr.splitlines() == ["error: port 0 is not a TCP port (1-65535) (--port)"]


def test_run_local_names_a_container_that_dies_before_it_is_ready(tmp_path: Path) -> None:
    broken = make_noop_archive(tmp_path / "broken", "broken", failing=True)
    done = subprocess.run([sys.executable, "-m", "mmsctl", "sagemaker", "run-local", str(broken), "--port",
                           str(free_port())], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                               "MMSCTL_CONFIG_DIR": str(tmp_path / "config")})
    assert done.returncode == 1, done.stderr
    assert "error: serve exited with code 3 before /ping answered 200" in done.stderr
    assert "this handler cannot load" in done.stderr  # the container's own log, above the error
