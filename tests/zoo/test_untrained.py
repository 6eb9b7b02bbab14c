"""Random-weight checkpoints: loadable by plain mxnet, MMS-style signature and synset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmsctl.errors import UsageError
from mmsctl.zoo.untrained import build_checkpoint


def _forward(folder: Path, prefix: str):  # type: ignore[no-untyped-def]
    from mmsctl.engine.mxnet_compat import import_mxnet

    mx = import_mxnet()
    sym, args, aux = mx.model.load_checkpoint(str(folder / prefix), 0)
    mod = mx.mod.Module(sym, data_names=["data"], label_names=None, context=mx.cpu())
    mod.bind(data_shapes=[("data", (1, 3, 224, 224))], for_training=False)
    mod.set_params(args, aux)
    mod.forward(mx.io.DataBatch([mx.nd.zeros((1, 3, 224, 224))]), is_train=False)
    return mod.get_outputs()[0].asnumpy()


@pytest.mark.parametrize("arch", ["squeezenet_v1.1", "resnet-18"])
def test_checkpoint_loads_and_gives_1000_probabilities(tmp_path: Path, arch: str) -> None:
    out = build_checkpoint(arch, tmp_path / arch)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"{arch}-symbol.json", f"{arch}-0000.params", "signature.json", "synset.txt"]
    )
    probs = _forward(out, arch)
    assert probs.shape == (1, 1000)
    assert abs(float(probs.sum()) - 1.0) < 1e-3  # ends in a softmax, like MMS's zoo models
    signature = json.loads((out / "signature.json").read_text())
    assert signature["inputs"] == [{"data_name": "data", "data_shape": [0, 3, 224, 224]}]
    labels = (out / "synset.txt").read_text().splitlines()
    assert len(labels) == 1000 and labels[0].startswith("n00000000 ")


def test_same_seed_same_weights_other_seed_other_weights(tmp_path: Path) -> None:
    a = build_checkpoint("squeezenet", tmp_path / "a", seed=1)
    b = build_checkpoint("squeezenet", tmp_path / "b", seed=1)
    c = build_checkpoint("squeezenet", tmp_path / "c", seed=2)
    name = "squeezenet_v1.1-0000.params"
    assert (a / name).read_bytes() == (b / name).read_bytes()
    assert (a / name).read_bytes() != (c / name).read_bytes()


def test_unknown_architecture_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as info:
        build_checkpoint("resnet-19", tmp_path)
    assert "did you mean" in info.value.message and "resnet-18" in info.value.message
    assert not any(tmp_path.iterdir())
