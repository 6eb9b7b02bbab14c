"""The kernel set (MKL-DNN on or off) is measured once per model, remembered, and honoured by workers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmsctl.engine import kernels
from mmsctl.engine.kernels import KernelChoice, choose_kernels, find_checkpoint
from mmsctl.engine.spec import ServiceSpec
from mmsctl.engine.worker import READY, RESULT, WorkerProcess, worker_env
from mmsctl.engine.protocol import RequestItem
from tests.engine.helpers import build_tiny_checkpoint, handler_archive

ENV_ECHO = '''
import json, os

def handle(data, context):
    if data is None:
        return None
    return [json.dumps({k: os.environ.get(k) for k in ("MXNET_MKLDNN_ENABLED",
                                                      "MXNET_STORAGE_FALLBACK_LOG_VERBOSE")})
            for _ in data]
'''


@pytest.fixture(scope="module")
def tiny_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny MXNet checkpoint with a custom (non-vision) handler that reports its environment."""
    root = tmp_path_factory.mktemp("tiny")
    build_tiny_checkpoint(root)
    handler_archive(root, {"env_echo.py": ENV_ECHO}, handler="env_echo:handle", model_name="tiny")
    return root


def _spec(root: Path) -> ServiceSpec:
    return ServiceSpec(root, "tiny", "env_echo:handle")


def _worker_reports(spec: ServiceSpec) -> dict[str, str]:
    worker = WorkerProcess(spec)
    try:
        assert worker.receive() == (READY, None)
        worker.send_batch([RequestItem.from_body("r", b"x")])
        kind, result = worker.receive()
        assert kind == RESULT
        return json.loads(result.responses[0].body)
    finally:
        worker.stop()


def _cache_file() -> Path:
    return kernels._cache_file()


def test_auto_measures_a_model_once_and_its_workers_run_with_the_faster_set(
    tiny_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MMSCTL_MKLDNN", "auto")
    monkeypatch.delenv("MXNET_MKLDNN_ENABLED", raising=False)
    reported = _worker_reports(_spec(tiny_root))
    entries = json.loads(_cache_file().read_text())
    assert len(entries) == 1
    (entry,) = entries.values()
    assert entry["on_ms"] > 0 and entry["off_ms"] > 0
    assert entry["mkldnn"] == (entry["on_ms"] <= kernels._MARGIN * entry["off_ms"])  # default unless clearly slower
    assert reported["MXNET_MKLDNN_ENABLED"] == ("1" if entry["mkldnn"] else "0")
    assert reported["MXNET_STORAGE_FALLBACK_LOG_VERBOSE"] == (None if entry["mkldnn"] else "0")

    # Remembered: no second measurement, for the next worker or anyone else on this machine.
    def no_measuring(*args: object) -> None:
        raise AssertionError("measured twice")

    monkeypatch.setattr(kernels, "_time_one", no_measuring)
    assert _worker_reports(_spec(tiny_root)) == reported
    again = choose_kernels(tiny_root)
    assert again.mkldnn is entry["mkldnn"] and again.reason.startswith("measured on ")


def test_the_setting_overrides_the_measurement(tiny_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MXNET_MKLDNN_ENABLED", raising=False)
    monkeypatch.setattr(kernels, "_time_one", lambda *a: pytest.fail("an override must not measure"))
    monkeypatch.setenv("MMSCTL_MKLDNN", "0")
    assert _worker_reports(_spec(tiny_root)) == {"MXNET_MKLDNN_ENABLED": "0", "MXNET_STORAGE_FALLBACK_LOG_VERBOSE": "0"}
    monkeypatch.setenv("MMSCTL_MKLDNN", "on")
    assert worker_env(1, spec=_spec(tiny_root))["MXNET_MKLDNN_ENABLED"] == "1"
    # config.toml's mkldnn setting, where the environment says nothing
    monkeypatch.delenv("MMSCTL_MKLDNN")
    config = Path(kernels.os.environ["MMSCTL_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text('mkldnn = "off"\n')
    assert worker_env(1, spec=_spec(tiny_root))["MXNET_MKLDNN_ENABLED"] == "0"
    # the user's own MXNET_MKLDNN_ENABLED wins over everything
    monkeypatch.setenv("MXNET_MKLDNN_ENABLED", "1")
    assert worker_env(1, spec=_spec(tiny_root))["MXNET_MKLDNN_ENABLED"] == "1"


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"KEY": {"mkldnn": "yes", "on_ms": "fast"}}'])
def test_a_broken_cache_file_is_ignored_and_rewritten(
    tiny_root: Path, monkeypatch: pytest.MonkeyPatch, content: str
) -> None:
    monkeypatch.setenv("MMSCTL_MKLDNN", "auto")
    monkeypatch.delenv("MXNET_MKLDNN_ENABLED", raising=False)
    key = kernels.cache_key(find_checkpoint(tiny_root), 1)
    path = _cache_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content.replace("KEY", key))
    calls: list[bool] = []

    def timed(ckpt: object, threads: int, mkldnn: bool, max_memory: int, *_: object) -> tuple[float, float]:
        calls.append(mkldnn)
        return (5.0, 5.0) if mkldnn else (3.0, 2.0)  # per image at batch 1 and at batch 4

    monkeypatch.setattr(kernels, "_time_one", timed)
    choice = choose_kernels(tiny_root)
    assert choice == KernelChoice(False, choice.reason, 5.0, 3.0, batch=4) and sorted(calls) == [False, True]
    assert json.loads(path.read_text())[key]["mkldnn"] is False
    assert choose_kernels(tiny_root) == KernelChoice(False, choose_kernels(tiny_root).reason, 5.0, 3.0, batch=4)
    assert len(calls) == 2


def test_a_failed_measurement_keeps_the_default_and_is_not_remembered(
    tiny_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MMSCTL_MKLDNN", "auto")
    monkeypatch.delenv("MXNET_MKLDNN_ENABLED", raising=False)
    monkeypatch.setattr(kernels, "_time_one", lambda *a: None)
    choice = choose_kernels(tiny_root)
    assert choice.mkldnn is None and choice.env() == {}
    assert not _cache_file().exists()


def test_a_model_that_is_not_a_checkpoint_keeps_mxnets_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MMSCTL_MKLDNN", "auto")
    monkeypatch.delenv("MXNET_MKLDNN_ENABLED", raising=False)
    spec = handler_archive(tmp_path / "noop", {"h.py": "def handle(d, c):\n    return d\n"}, handler="h:handle")
    env = worker_env(1, spec=spec)
    assert "MXNET_MKLDNN_ENABLED" not in env
    assert not _cache_file().exists()


def test_an_input_shape_past_the_ceiling_is_not_measured(tiny_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A signature.json is the archive's: a huge input shape must not make the measuring children
    allocate it (MXNet's default stays, nothing is remembered)."""
    monkeypatch.setenv("MMSCTL_MKLDNN", "auto")
    monkeypatch.delenv("MXNET_MKLDNN_ENABLED", raising=False)
    monkeypatch.setattr(kernels, "_time_one", lambda *a: pytest.fail("a huge input must not be measured"))
    signature = json.loads((tiny_root / "signature.json").read_text())
    signature["inputs"][0]["data_shape"] = [1, 3, 100_000, 100_000]
    (tiny_root / "signature.json").write_text(json.dumps(signature))
    choice = choose_kernels(tiny_root)
    assert choice.mkldnn is None and not _cache_file().exists()
