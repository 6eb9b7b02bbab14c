"""The fast paths of `predict`: compiled-operator cache, worker pool, padded batches, quick exit.

Each must give exactly the answers of the plain path; these tests compare the two.
"""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
import zlib
from dataclasses import replace
from pathlib import Path

import pytest

from mmsctl.engine import _opcache
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


# -- compiled-operator cache -------------------------------------------------------------------

_SOURCE = '''def ones(shape=None, out=None, name=None, **kwargs):
    """Docs with a number 1234567890 in them."""
    return _imperative_invoke({handle}, (), [], [], out, False, False)
'''


@pytest.mark.parametrize("other", [93957862416480, 7, 2**31 + 1, 2**62 + 20_190_702],
                         ids=["address", "small", "past-32-bits", "next-to-placeholder"])
def test_opcache_puts_each_runs_handle_back(tmp_path: Path, other: int) -> None:
    """The handle is spliced into the cached bytes whatever its size (marshal writes small and large
    integers differently)."""
    cache = _opcache._Cache(tmp_path / "ops.v2.marshal")
    first = cache.code_for(_SOURCE.format(handle=94004670439520))
    cache.save()
    again = _opcache._Cache(tmp_path / "ops.v2.marshal")
    second = again.code_for(_SOURCE.format(handle=other))
    assert again.added == 0, "same operator, other address: must be a cache hit"

    def handle_of(code: object) -> int:
        calls: list[int] = []
        scope = {"_imperative_invoke": lambda h, *a: calls.append(h)}
        exec(code, scope)  # noqa: S102 - the code under test
        scope["ones"]()
        return calls[0]

    assert handle_of(first) == 94004670439520
    assert handle_of(second) == other
    scope: dict = {}
    exec(second, scope)  # noqa: S102 - the code under test
    assert scope["ones"].__doc__ is None  # mxnet sets each wrapper's __doc__ itself: no copy in the code
    assert cache.code_for("x = 1") == "x = 1"  # anything else is left to the real exec


@pytest.mark.parametrize("damage", ["flipped-bytes", "truncated", "not-marshal", "index-out-of-range"])
def test_a_damaged_opcache_file_costs_only_the_compile(tmp_path: Path, damage: str) -> None:
    """Bytecode is never loaded from a file that is not exactly what was written (it could crash
    the interpreter): every wrapper is compiled afresh and works."""
    path = tmp_path / "ops.v2.marshal"
    cache = _opcache._Cache(path)
    cache.code_for(_SOURCE.format(handle=94004670439520))
    cache.save()
    data = path.read_bytes()
    index_at = {key: (offset, size, at - size) for key, (offset, size, at) in cache.index.items()} \
        if (cache := _opcache._Cache(path)).index else {}
    blob = cache.blob
    damaged = {"flipped-bytes": data[:-40] + b"\xff" * 20 + data[-20:], "truncated": data[:-10],
               "not-marshal": b"not marshal at all",
               "index-out-of-range": marshal.dumps((zlib.crc32(blob), index_at)) + blob}[damage]
    path.write_bytes(damaged)
    again = _opcache._Cache(path)
    code = again.code_for(_SOURCE.format(handle=93957862416480))
    assert again.added == 1  # not served from the damaged file: compiled afresh
    calls: list[int] = []
    scope = {"_imperative_invoke": lambda h, *a: calls.append(h)}
    exec(code, scope)  # noqa: S102 - the code under test
    scope["ones"]()
    assert calls == [93957862416480]


@pytest.mark.parametrize("docs", [True, False], ids=["docs", "short-docs"])
def test_mxnet_imported_through_the_cache_works(tmp_path: Path, docs: bool) -> None:
    """Twice (the second run from the cache): operators work, and carry mxnet's documentation
    unless the process asked to leave it out (worker processes), which has a cache file of its own."""
    probe = (
        "from mmsctl.engine import mxnet_compat\n"
        + ("" if docs else "mxnet_compat.leave_out_operator_docs()\n")
        + "mx = mxnet_compat.import_mxnet()\n"
        "x = mx.nd.ones((2, 3)) * 2\n"
        "y = mx.sym.FullyConnected(mx.sym.var('d'), num_hidden=2, no_bias=True)\n"
        "ex = y.bind(mx.cpu(), {'d': x, 'fullyconnected0_weight': mx.nd.ones((2, 3))})\n"
        "print(float(x.sum().asscalar()), ex.forward()[0].asnumpy().tolist())\n"
        "print(mx.nd.Convolution.__doc__.split(chr(10))[0])\n"
        "print(mx.sym.relu.__doc__.split(chr(10))[0])\n"
    )
    env = dict(os.environ, MMSCTL_CACHE_DIR=str(tmp_path))
    env.pop("MMSCTL_NO_OPCACHE", None)
    runs = [subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
            for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[-1].stderr[-2000:]
    assert runs[0].stdout == runs[1].stdout
    result, conv, relu = runs[0].stdout.splitlines()
    assert result == "12.0 [[6.0, 6.0], [6.0, 6.0]]"
    if docs:
        assert (conv, relu) == ("Compute *N*-D convolution on *(N+2)*-D input.", "Computes rectified linear activation.")
    else:
        assert conv.startswith("MXNet operator Convolution (") and relu.startswith("MXNet operator relu (")
    written = [p.name for p in (tmp_path / "mxnet-opcode").glob("*.marshal")]
    assert written == [f"{sys.implementation.cache_tag}.v2{'' if docs else '-short-docs'}.marshal"]


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
