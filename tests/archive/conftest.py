"""Fixtures for the archive tests: a tiny real MXNet checkpoint built at test time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

#: Four classes, so predictions are easy to check.
TINY_LABELS = ["n0 alpha", "n1 beta", "n2 gamma", "n3 delta"]


def build_tiny_checkpoint(folder: Path, prefix: str = "tiny", *, epochs: tuple[int, ...] = (0,)) -> Path:
    """A random-weight conv net (3x16x16 -> 4 classes, softmax output) as an MXNet checkpoint."""
    from mmsctl.engine.mxnet_compat import import_mxnet

    mx = import_mxnet()
    folder.mkdir(parents=True, exist_ok=True)
    data = mx.sym.Variable("data")
    net = mx.sym.Convolution(data, kernel=(3, 3), num_filter=4, name="conv")
    net = mx.sym.Pooling(net, global_pool=True, pool_type="avg", kernel=(1, 1), name="pool")
    net = mx.sym.SoftmaxActivation(mx.sym.flatten(net), name="prob")
    mod = mx.mod.Module(net, data_names=["data"], label_names=None)
    mod.bind(data_shapes=[("data", (1, 3, 16, 16))], for_training=False)
    mx.random.seed(0)
    mod.init_params(mx.init.Xavier())
    for epoch in epochs:
        mod.save_checkpoint(str(folder / prefix), epoch)
    (folder / "signature.json").write_text(
        json.dumps({"inputs": [{"data_name": "data", "data_shape": [0, 3, 16, 16]}]})
    )
    (folder / "synset.txt").write_text("\n".join(TINY_LABELS) + "\n")
    return folder


@pytest.fixture(scope="session")
def tiny_checkpoint_src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "tiny_net")


@pytest.fixture
def tiny_checkpoint(tiny_checkpoint_src: Path, tmp_path: Path) -> Path:
    """A private copy, so a test may add or remove files."""
    import shutil

    dest = tmp_path / "tiny_net"
    shutil.copytree(tiny_checkpoint_src, dest)
    return dest
