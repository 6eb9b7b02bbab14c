"""The network memory bound: the byte estimate, the refusal at load and in the kernel measurement, the setting,
and the process limit a worker runs under (an allocation past it fails the load or the batch, not the worker)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mmsctl.config import MAX_MODEL_MEMORY_CAP, default_max_model_memory, max_model_memory
from mmsctl.engine import kernels
from mmsctl.engine.kernels import choose_kernels
from mmsctl.engine.memory import check_network, network_bytes, process_limit
from mmsctl.engine.protocol import RequestItem
from mmsctl.engine.spec import ServiceSpec
from mmsctl.engine.worker.frames import LOAD_FAILED, READY, RESULT, BatchResult
from mmsctl.engine.worker.parent import WorkerProcess
from mmsctl.errors import ConfigError, EngineError
from tests.engine.helpers import build_tiny_checkpoint, handler_archive, load

# Allocates (and touches) N MiB: at load when the module is imported with ALLOC_AT_LOAD, else per batch.
GREEDY = '''
import os

def _take(mib):
    block = bytearray(mib * 1024 * 1024)
    block[::4096] = b"x" * len(block[::4096])
    return len(block)

if os.path.exists(os.path.join(os.path.dirname(__file__), "ALLOC_AT_LOAD")):
    _take(int(open(os.path.join(os.path.dirname(__file__), "ALLOC_AT_LOAD")).read()))

def handle(data, context):
    if data is None:
        return None
    return [str(_take(int(bytes(row.get("body")).decode()))) for row in data]
'''


def _mx() -> Any:
    from mmsctl.engine.mxnet_compat import import_mxnet

    return import_mxnet()


def test_the_estimate_counts_every_output_argument_and_state_once() -> None:
    mx = _mx()
    data = mx.sym.var("data")
    fc = mx.sym.FullyConnected(data, num_hidden=5, name="fc")
    net = mx.sym.SoftmaxOutput(fc, name="sm")
    # input 2x3, weight 5x3, bias 5, label 2 (inferred), fc output 2x5, softmax output 2x5: 48 float32
    assert network_bytes(net, "data", (2, 3)) == (6 + 15 + 5 + 2 + 10 + 10) * 4
    conv = mx.sym.Convolution(data, num_filter=2, kernel=(3, 3), name="c")
    bn = mx.sym.BatchNorm(conv, name="bn")
    # input 1x1x5x5, weight 2x1x3x3, bias 2, gamma/beta 2+2, moving mean/var 2+2 (aux), conv and bn outputs 1x2x3x3
    assert network_bytes(bn, "data", (1, 1, 5, 5)) == (25 + 18 + 2 + 4 + 4 + 18 + 18) * 4
    # twice the batch: the input and every output double, the weights do not
    assert network_bytes(bn, "data", (2, 1, 5, 5)) == (50 + 18 + 2 + 4 + 4 + 36 + 36) * 4


def test_a_network_over_the_limit_is_refused_with_the_figure_and_the_setting(tmp_path: Path) -> None:
    root = build_tiny_checkpoint(tmp_path / "tiny")
    symbol = str(root / "tiny-symbol.json")
    needed = check_network(symbol, "data", (4, 3, 16, 16), 2**30)
    with pytest.raises(EngineError) as caught:
        check_network(symbol, "data", (4, 3, 16, 16), needed - 1)
    message = caught.value.message
    assert f"needs {needed} bytes" in message and f"limit of {needed - 1} bytes" in message
    assert "max_model_memory" in message and "MMSCTL_MAX_MODEL_MEMORY" in message
    with pytest.raises(EngineError, match="does not take input"):
        check_network(symbol, "data", (1, 3, 2, 2), 2**30)  # smaller than the 3x3 kernel


def test_the_built_in_handler_refuses_to_bind_past_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = build_tiny_checkpoint(tmp_path / "tiny")
    spec = ServiceSpec(root, "tiny")
    symbol = str(root / "tiny-symbol.json")
    at_8 = check_network(symbol, "data", (8, 3, 16, 16), 2**30)
    monkeypatch.setenv("MMSCTL_MAX_MODEL_MEMORY", str(at_8 - 1))
    with pytest.raises(EngineError, match=f"needs {at_8} bytes"):
        load(spec, batch_size=8)
    assert load(spec, batch_size=1).handle([]) == []  # a smaller batch fits
    # a handler of the user's own binds what it likes: not checked (the process limit bounds it)
    handler_archive(root, {"h.py": "def handle(d, c):\n    return d\n"}, handler="h:handle", model_name="tiny")
    load(ServiceSpec(root, "tiny", "h:handle"), batch_size=8).close()


def test_the_setting_and_its_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert max_model_memory() == default_max_model_memory() <= MAX_MODEL_MEMORY_CAP
    monkeypatch.setenv("MMSCTL_MAX_MODEL_MEMORY", "1_000_000")
    assert max_model_memory() == 1_000_000
    for bad in ("2G", "0", "-5"):
        monkeypatch.setenv("MMSCTL_MAX_MODEL_MEMORY", bad)
        with pytest.raises(ConfigError, match="max_model_memory"):
            max_model_memory()


def test_the_kernel_measurement_does_not_run_a_network_over_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The measuring child checks first: nothing is timed or remembered, and this process does not ask again."""
    monkeypatch.setenv("MMSCTL_MKLDNN", "auto")
    monkeypatch.delenv("MXNET_MKLDNN_ENABLED", raising=False)
    root = build_tiny_checkpoint(tmp_path / "tiny")
    needed = check_network(str(root / "tiny-symbol.json"), "data", (1, 3, 16, 16), 2**30)
    choice = choose_kernels(root, max_memory=needed - 1)
    assert choice.mkldnn is None and choice.reason.startswith("not measured: ")
    assert f"needs {needed} bytes" in choice.reason
    assert not (Path(kernels._cache_file())).exists()
    monkeypatch.setattr(kernels, "_trials", lambda *a: pytest.fail("refused once: not asked again"))
    assert choose_kernels(root, max_memory=needed - 1) == choice


def _greedy(tmp_path: Path, at_load_mib: int = 0) -> ServiceSpec:
    spec = handler_archive(tmp_path / "greedy", {"greedy.py": GREEDY}, handler="greedy:handle", model_name="greedy")
    if at_load_mib:
        (Path(spec.root) / "ALLOC_AT_LOAD").write_text(str(at_load_mib))
    return spec


def _item(mib: int) -> list[RequestItem]:
    return [RequestItem.from_body("r", str(mib).encode())]


def test_a_worker_that_allocates_past_its_limit_fails_the_batch_and_lives_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit = 64 * 1024**2  # the worker's data limit is then 2 x 64 MiB + 1 GiB
    over = process_limit(limit) // 1024**2 + 256
    monkeypatch.setenv("MMSCTL_MAX_MODEL_MEMORY", str(limit))
    worker = WorkerProcess(_greedy(tmp_path))
    try:
        assert worker.receive() == (READY, None)
        worker.send_batch(_item(over))
        kind, result = worker.receive()
        assert kind == RESULT and isinstance(result, BatchResult)
        assert result.responses[0].status == 507 and "MemoryError" in str(result.failure)
        worker.send_batch(_item(16))  # the same worker answers the next batch
        kind, result = worker.receive()
        assert kind == RESULT and result.responses[0].status == 200 and result.responses[0].body == str(16 * 2**20).encode()
    finally:
        worker.stop()


def test_a_worker_that_allocates_past_its_limit_while_loading_reports_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit = 64 * 1024**2
    monkeypatch.setenv("MMSCTL_MAX_MODEL_MEMORY", str(limit))
    worker = WorkerProcess(_greedy(tmp_path, at_load_mib=process_limit(limit) // 1024**2 + 256))
    try:
        kind, failure = worker.receive()
        assert kind == LOAD_FAILED and "MemoryError" in failure.message
    finally:
        worker.stop()
    assert worker.process.returncode == 1  # a clean exit after saying why, not a crash


def test_a_network_that_fits_only_at_batch_1_is_timed_at_batch_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MMSCTL_MKLDNN", "auto")
    monkeypatch.delenv("MXNET_MKLDNN_ENABLED", raising=False)
    root = build_tiny_checkpoint(tmp_path / "tiny")
    symbol = str(root / "tiny-symbol.json")
    at_1 = check_network(symbol, "data", (1, 3, 16, 16), 2**30)
    assert check_network(symbol, "data", (kernels.BATCHED, 3, 16, 16), 2**30) > at_1
    choice = choose_kernels(root, max_memory=at_1)
    assert choice.mkldnn is not None and choice.on_ms is not None and choice.batch == 1
