"""The fast paths of `predict`: operator wrappers compiled on first call, worker pool, padded batches, quick exit.

Each must give exactly the answers of the plain path; these tests compare the two.
"""

from __future__ import annotations

import builtins
import gc
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from mmsctl.engine import _lazy_ops
from mmsctl.engine.spec import ServiceSpec
from mmsctl.errors import HandlerError, MmsError
from mmsctl.predict import Prediction, predict_local
from mmsctl.predict.inputs import expand_inputs
from mmsctl.predict.pool import ServicePool, choose_workers
from tests.engine.helpers import body_item, build_tiny_checkpoint, handler_archive, load, png_bytes
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_checkpoint(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def image_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("imgs")
    for i in range(37):
        (folder / f"img{i:02d}.png").write_bytes(png_bytes(i))
    (folder / "img17.png").write_bytes(b"not a png")  # fails alone, as in-process
    return folder


# -- operator wrappers compiled on first call ------------------------------------------------------

_SOURCE = '''
def ones(shape=None, out=None, name=None, **kwargs):
    """Docs."""
    return _imperative_invoke({handle}, (shape,), [], [], out, False, False)
'''


def test_a_wrapper_is_compiled_on_its_first_call_in_mxnets_namespace() -> None:
    """Inside the context an operator wrapper's exec defines a stand-in that compiles the same source in
    the caller's namespace on its first call, once; any other exec runs at once, as the builtin would."""
    calls: list[tuple] = []
    compiled: list[str] = []
    namespace = {"_imperative_invoke": lambda *a: calls.append(a) or len(calls)}
    real = builtins.exec

    def counting_exec(source, globals=None, locals=None, /, **kwargs):  # noqa: A002 - exec's own names
        compiled.append(source if isinstance(source, str) else "?")
        return real(source, globals, locals, **kwargs)

    builtins.exec = counting_exec  # what the context sees as "the real exec"
    try:
        with _lazy_ops.lazy_operator_wrappers():
            local: dict = {}
            exec(_SOURCE.format(handle=7), namespace, local)  # noqa: S102 - as mxnet's register.py does
            exec("other = 41 + 1", namespace, local)  # noqa: S102 - not a wrapper: run at once
    finally:
        builtins.exec = real
    assert local["other"] == 42 and compiled == ["other = 41 + 1"]  # the wrapper is not compiled yet
    ones = local["ones"]
    assert ones.__name__ == "wrapper"  # the stand-in (mxnet renames it to the operator's name)
    assert ones((2, 3)) == 1 and ones(shape=(4,), name="n") == 2
    assert calls == [(7, ((2, 3),), [], [], None, False, False), (7, ((4,),), [], [], None, False, False)]
    assert len(compiled) == 2  # compiled on the first call only


@pytest.mark.parametrize("docs", [True, False], ids=["docs", "short-docs"])
def test_mxnet_with_wrappers_compiled_on_first_call_works_as_with_all_compiled(docs: bool) -> None:
    """The same results and documentation with the wrappers compiled on first call and all at import
    (MMSCTL_LAZY_OPS=0), unless the process asked to leave the documentation out (worker processes). Either
    way the import runs with the garbage collector paused, and leaves it on."""
    probe = (
        "import gc, inspect\n"
        "import mmsctl.errors, mmsctl.engine._lazy_ops\n"
        "from mmsctl.engine import mxnet_compat\n"
        + ("" if docs else "mxnet_compat.leave_out_operator_docs()\n")
        + "runs = []\n"
        "gc.callbacks.append(lambda phase, info: runs.append(phase) if phase == 'stop' else None)\n"
        "mx = mxnet_compat.import_mxnet()\n"
        "collections = len(runs)\n"
        "x = mx.nd.ones((2, 3)) * 2\n"
        "y = mx.sym.FullyConnected(mx.sym.var('d'), num_hidden=2, no_bias=True)\n"
        "ex = y.bind(mx.cpu(), {'d': x, 'fullyconnected0_weight': mx.nd.ones((2, 3))})\n"
        "print(float(x.sum().asscalar()), ex.forward()[0].asnumpy().tolist(), mx.nd.Convolution.__name__)\n"
        "print(mx.nd.Convolution.__doc__.split(chr(10))[0])\n"
        "print(mx.sym.relu.__doc__.split(chr(10))[0])\n"
        "print(list(inspect.signature(mx.nd.Convolution).parameters) == ['args', 'kwargs'])\n"
        "print(collections, gc.isenabled())\n"
    )
    runs = {lazy: subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                                 env=dict(os.environ, MMSCTL_LAZY_OPS=lazy))
            for lazy in ("1", "0")}
    assert [r.returncode for r in runs.values()] == [0, 0], runs["1"].stderr[-2000:] + runs["0"].stderr[-2000:]
    (result, conv, relu, lazy_sig, lazy_gc), eager = runs["1"].stdout.splitlines(), runs["0"].stdout.splitlines()
    assert [result, conv, relu] == eager[:3] and (lazy_sig, eager[3]) == ("True", "False")
    # ~120 collections when unpaused; at most the one that the paused allocations start on the way out
    for collections, enabled in (lazy_gc.split(), eager[4].split()):
        assert int(collections) <= 1 and enabled == "True", (lazy_gc, eager[4])
    assert result == "12.0 [[6.0, 6.0], [6.0, 6.0]] Convolution"
    if docs:
        assert (conv, relu) == ("Compute *N*-D convolution on *(N+2)*-D input.", "Computes rectified linear activation.")
    else:
        assert conv.startswith("MXNet operator Convolution (") and relu.startswith("MXNet operator relu (")


def test_the_collector_pause_gives_back_the_callers_setting_even_on_an_error() -> None:
    from mmsctl.engine.mxnet_compat import _collector_paused

    assert gc.isenabled()
    try:
        gc.disable()  # a caller that manages the collector itself (a worker after fork, a benchmark)
        with _collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
    with pytest.raises(ImportError), _collector_paused():
        assert not gc.isenabled()
        raise ImportError("libmxnet.so: cannot open shared object file")
    assert gc.isenabled()


# -- worker pool ---------------------------------------------------------------------------------


def _bodies(predictions: list[Prediction]) -> list[tuple[str, int, object]]:
    return [(p.input, p.status, json.loads(p.body) if p.body else p.error) for p in predictions]


def test_pool_answers_like_one_process_in_input_order(tiny_dir: Path, image_dir: Path) -> None:
    sources = expand_inputs([str(image_dir), str(image_dir / "missing.png")])
    spec = ServiceSpec(tiny_dir, "tiny", batch_size=4)
    alone = list(predict_local(load(spec), sources, batch_size=4, top_k=3))
    with ServicePool(spec, workers=2) as pool:
        pooled = list(predict_local(pool, sources, batch_size=4, top_k=3))
    assert [p.input for p in pooled] == [s.name for s in sources]
    assert [p.status for p in pooled].count(400) == 1 and not pooled[-1].ok
    got, want = _bodies(pooled), _bodies(alone)
    for (name, status, body), (name2, status2, body2) in zip(got, want):
        assert (name, status) == (name2, status2)
        if isinstance(body, list):
            assert [e["class"] for e in body] == [e["class"] for e in body2]  # type: ignore[union-attr]
            assert all(abs(a["probability"] - b["probability"]) < 1e-5 for a, b in zip(body, body2))  # type: ignore
        else:
            assert body == body2


def test_pool_reports_a_handler_that_cannot_load(tmp_path: Path, image_dir: Path) -> None:
    bad = handler_archive(tmp_path / "bad", {"h.py": "def handle(d, c):\n    raise RuntimeError('no GPU here')\n"},
                          handler="h:handle")
    with ServicePool(replace(bad, model_name="bad"), workers=2) as pool, pytest.raises(HandlerError, match="no GPU here"):
        list(predict_local(pool, expand_inputs([str(image_dir)]), batch_size=1))


def test_closing_a_pool_with_batches_in_flight_ends_those_workers(tmp_path: Path) -> None:
    """An interrupted run (Ctrl+C, an error) must not wait for answers nobody will read."""
    import threading

    slow = handler_archive(tmp_path / "slow", {"h.py": "import time\n\ndef handle(d, c):\n"
                                               "    if d is not None:\n        time.sleep(120)\n    return d\n"},
                           handler="h:handle")
    pool = ServicePool(slow, workers=2)
    answers = pool.map([[body_item("a", b"a")], [body_item("b", b"b")]])

    def read() -> None:
        try:
            next(answers, None)
        except (MmsError, OSError, ValueError):  # the pool was closed under it, as an interrupt does
            pass

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    wait_until(lambda: all(w.outstanding for w in pool._workers), timeout=30,
               what="a batch in flight in every worker", interval=0.01)
    processes = [w.process.process for w in pool._workers]
    pool.close()
    assert [p.returncode for p in processes] == [-9, -9]  # killed, not waited for
    reader.join(30)
    assert not reader.is_alive()


def test_worker_count_defaults() -> None:
    assert choose_workers(None, 10, 16, gpu=None) == 1  # few inputs: in this process
    assert choose_workers(None, 500, 16, gpu=0) == 1  # GPU: one process
    assert choose_workers(4, 20, 16, gpu=None) == 2  # never more workers than batches
    assert choose_workers(None, 500, 16, gpu=None) >= 1


# -- padded batches in the built-in handler ----------------------------------------------------


def test_partial_batches_are_padded_then_bound(tiny_dir: Path) -> None:
    svc = load(ServiceSpec(tiny_dir, "tiny"), batch_size=8)
    vision = svc._handler.module._service
    images = [png_bytes(i) for i in range(8)]
    singles = [json.loads(svc.handle([body_item("s", b)])[0].body) for b in images[:3]]
    assert 1 in vision._modules  # batch 1 is far below 8: bound on its own
    for _ in range(2):
        three = [json.loads(r.body) for r in svc.handle([body_item(str(i), b) for i, b in enumerate(images[:3])])]
        assert 3 not in vision._modules, "an occasional batch of 3 runs padded in the batch-8 shape"
        for got, want in zip(three, singles):
            assert [e["class"] for e in got] == [e["class"] for e in want]
            assert all(abs(a["probability"] - b["probability"]) < 1e-5 for a, b in zip(got, want))
    svc.handle([body_item(str(i), b) for i, b in enumerate(images[:3])])
    assert 3 in vision._modules, "a size that keeps coming back gets its own shape"
    assert set(vision._modules) == {1, 3, 8}


# -- the CLI process ---------------------------------------------------------------------------


def test_cli_process_with_workers_prints_everything_and_exits_0(tiny_dir: Path, image_dir: Path,
                                                                tmp_path: Path) -> None:
    env = dict(os.environ, MMSCTL_CACHE_DIR=str(tmp_path / "cache"), MMSCTL_CONFIG_DIR=str(tmp_path / "cfg"))
    cmd = [sys.executable, "-m", "mmsctl", "predict", str(tiny_dir), str(image_dir), "-o", "jsonl", "-b", "4"]
    runs = {w: subprocess.run(cmd + ["--workers", w], env=env, capture_output=True, text=True, timeout=180)
            for w in ("1", "2")}
    for w, proc in runs.items():
        assert proc.returncode == 4, (w, proc.stderr[-2000:])  # the one corrupt image: partial failure
        lines = [json.loads(line) for line in proc.stdout.splitlines()]
        assert [line["input"] for line in lines] == [str(p) for p in sorted(image_dir.glob("*.png"))]
    # one input, in-process, quick exit: the whole answer is on stdout and the exit code is 0
    single = subprocess.run(cmd[:5] + [str(image_dir / "img00.png"), "-o", "json"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert single.returncode == 0, single.stderr[-2000:]
    assert [e["class"] for e in json.loads(single.stdout)][:1] == [lines[0]["result"][0]["class"]]
