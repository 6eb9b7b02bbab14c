"""The inference-only graph rewrites (mmsctl/engine/graph.py) on the real SqueezeNet and on made-up symbols."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from mmsctl.engine import graph, kernels
from mmsctl.engine.builtin import VISION_HANDLER
from mmsctl.engine.mxnet_compat import import_mxnet
from mmsctl.engine.spec import ServiceSpec
from tests.engine.helpers import load

REPO = Path(__file__).resolve().parents[2]

#: Runs in a child (MXNET_MKLDNN_ENABLED is read when the library loads): the kitten through the
#: checkpoint as imported and as rewritten; prints the outputs' names, max abs difference and argmax.
_CHILD = """
import json, sys
import numpy as np
from mmsctl.engine.mxnet_compat import import_mxnet
from mmsctl.engine.graph import normalise
mx = import_mxnet()
prefix, image, data_name = sys.argv[1:4]
sym, args, aux = mx.model.load_checkpoint(prefix, 0)
new = mx.sym.load_json(normalise(sym.tojson())[0])
img = mx.image.imread(image, to_rgb=True).asnumpy().transpose(2, 0, 1)[None].astype("float32")
outs = []
for s in (sym, new):
    bound = dict(args, **{data_name: mx.nd.array(img)})
    outs.append(s.bind(mx.cpu(), bound, grad_req="null", aux_states=aux).forward(is_train=False)[0].asnumpy())
print(json.dumps({"names": [sym.list_outputs(), new.list_outputs()], "ops": sorted({n["op"] for n in
      json.loads(new.tojson())["nodes"]}), "diff": float(np.abs(outs[0] - outs[1]).max()),
      "argmax": [int(o.argmax()) for o in outs]}))
"""


@pytest.fixture
def rewrite_on(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(graph.SETTING_VAR, raising=False)
    graph.enabled.cache_clear()
    yield
    graph.enabled.cache_clear()


def _ops(text: str) -> Counter[str]:
    return Counter(n["op"] for n in json.loads(text)["nodes"])


def test_squeezenet_rewritten_same_answer_both_kernel_sets(squeezenet_dir: Path, kitten_png: Path,
                                                          rewrite_on: None) -> None:
    text = (squeezenet_dir / "squeezenet_v1.1-symbol.json").read_text()
    new, changes = graph.normalise(text)
    before, after = _ops(text), _ops(new)
    assert changes == ["relu -> Activation(relu) x26", "zero Pad removed x3"]
    assert before["relu"] == 26 and before["Pad"] == 3 and after["relu"] == after["Pad"] == 0
    assert after["Activation"] == before["Activation"] + 26 and after["Dropout"] == before["Dropout"] == 1
    names = lambda t: [n["name"] for n in json.loads(t)["nodes"] if n["op"] != "Pad"]  # noqa: E731
    assert names(new) == names(text)  # the relus keep their names
    assert graph.normalise(new) == (new, [])  # nothing left to do
    env = {k: v for k, v in os.environ.items() if k != kernels.MXNET_VAR}
    for mkldnn in ("1", "0"):
        done = subprocess.run([sys.executable, "-c", _CHILD, str(squeezenet_dir / "squeezenet_v1.1"),
                               str(kitten_png), "data_0"], env={**env, kernels.MXNET_VAR: mkldnn,
                              "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)},
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        got = json.loads(done.stdout.strip().splitlines()[-1])
        assert got["names"] == [["prob_output"], ["prob_output"]], mkldnn
        assert "relu" not in got["ops"] and "Pad" not in got["ops"]
        assert got["diff"] <= 1e-5, (mkldnn, got)
        assert got["argmax"][0] == got["argmax"][1] == 281, (mkldnn, got)  # n02123045 tabby


def test_only_identities_go(rewrite_on: None) -> None:
    """A real pad, an always-on dropout and an output stay; chained zero pads go, their consumer rewired."""
    mx = import_mxnet()
    data = mx.sym.var("data")
    plain = mx.sym.Pooling(mx.sym.Activation(data, act_type="relu", name="act"), kernel=(2, 2), pool_type="max")
    assert graph.normalise(plain.tojson()) == (plain.tojson(), [])
    real = mx.sym.Pad(data, mode="constant", pad_width=(0, 0, 0, 0, 1, 1, 1, 1), name="real")
    zero = mx.sym.Pad(mx.sym.Pad(real, mode="edge", pad_width=(0,) * 8, name="z1"), mode="edge",
                      pad_width=(0,) * 8, name="z2")
    conv = mx.sym.Convolution(zero, num_filter=2, kernel=(3, 3), name="conv")
    drop = mx.sym.Dropout(mx.sym.relu(conv, name="r"), p=0.5, mode="always", name="drop")
    head = mx.sym.Pad(drop, mode="edge", pad_width=(0,) * 8, name="last")
    net = mx.sym.Group([head, mx.sym.relu(conv, name="r2")])
    text, changes = graph.normalise(net.tojson())
    assert changes == ["zero Pad removed x2", "relu -> Activation(relu) x2"]
    new = mx.sym.load_json(text)
    assert new.list_outputs() == net.list_outputs() == ["last_output", "r2_output"]
    assert new.list_arguments() == net.list_arguments()
    nodes = {n["name"]: n for n in json.loads(text)["nodes"]}
    assert {"real", "drop", "last"} <= set(nodes) and not {"z1", "z2"} & set(nodes)
    assert nodes["conv"]["inputs"][0][0] == list(nodes).index("real")
    assert nodes["drop"]["attrs"]["mode"] == "always" and nodes["r"]["op"] == "Activation"
    rng = np.random.RandomState(0)
    shapes = dict(zip(net.list_arguments(), net.infer_shape(data=(1, 1, 6, 6))[0]))
    args = {k: mx.nd.array(rng.rand(*s)) for k, s in shapes.items()}
    mx.random.seed(1)
    a = [o.asnumpy() for o in net.bind(mx.cpu(), args, grad_req="null").forward(is_train=False)]
    mx.random.seed(1)
    b = [o.asnumpy() for o in new.bind(mx.cpu(), args, grad_req="null").forward(is_train=False)]
    assert all(np.array_equal(x, y) for x, y in zip(a, b))


def test_switch_handler_and_cache_key(squeezenet_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                      rewrite_on: None) -> None:
    """The built-in handler runs the rewritten graph and its kernel choice has its own key; others, or the
    switch off, run and key it as imported."""
    ckpt = kernels.find_checkpoint(squeezenet_dir)
    assert ckpt is not None
    assert kernels.rewrites_graph(ckpt) and kernels.rewrites_graph(ckpt, VISION_HANDLER)
    assert not kernels.rewrites_graph(ckpt, "mxnet_vision_service:handle")
    assert kernels.cache_key(ckpt, 1, True) != kernels.cache_key(ckpt, 1, False)
    svc = load(ServiceSpec(squeezenet_dir, "squeezenet"), batch_size=1)
    ops = {n["op"] for n in json.loads(svc._handler.module._service._sym.tojson())["nodes"]}
    assert "relu" not in ops and "Pad" not in ops
    svc.close()
    monkeypatch.setenv(graph.SETTING_VAR, "0")
    graph.enabled.cache_clear()
    text = ckpt.symbol.read_text()
    assert graph.normalise(text) == (text, [])
    assert not kernels.rewrites_graph(ckpt)


def test_an_archives_own_copy_of_the_handler_from_before_the_rewrites_keys_the_graph_as_saved(
        squeezenet_dir: Path, tmp_path: Path, rewrite_on: None) -> None:
    """`archive create` copies the built-in handler into the archive, and a worker runs that copy: one packed
    before the rewrites runs the network as saved, so its kernel choice is measured and keyed that way."""
    import shutil

    from mmsctl.engine.builtin import VISION_HANDLER_FILE, VISION_HANDLER_MODULE

    model = tmp_path / "model"
    shutil.copytree(squeezenet_dir, model)
    ckpt = kernels.find_checkpoint(model)
    assert ckpt is not None
    copy = model / f"{VISION_HANDLER_MODULE}.py"
    copy.write_bytes(VISION_HANDLER_FILE.read_bytes())  # packed today
    assert kernels.rewrites_graph(ckpt, VISION_HANDLER)
    copy.write_bytes(VISION_HANDLER_FILE.read_bytes().replace(b"_graph.normalise(", b"_graph.other("))  # before
    assert not kernels.rewrites_graph(ckpt, VISION_HANDLER) and not kernels.rewrites_graph(ckpt)
