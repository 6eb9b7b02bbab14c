"""ONNX import: fp16 -> fp32, the opset-7 Softmax fix, and the same answers as the MXNet checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmsctl.archive import create_archive, open_archive
from mmsctl.archive.onnx_import import import_onnx
from mmsctl.errors import ArchiveError, InputNotFoundError
from tests.support.paths import ONNX_SQUEEZENET, require_shared

onnx = pytest.importorskip("onnx", reason="the onnx package is not installed (pip install 'mmsctl[onnx]')")


def _mx():  # type: ignore[no-untyped-def]
    from mmsctl.engine.mxnet_compat import import_mxnet

    return import_mxnet()


def _forward(prefix: Path, data_name: str, batch):  # type: ignore[no-untyped-def]
    """Run a checkpoint with a plain mxnet Module (no handler involved)."""
    mx = _mx()
    sym, args, aux = mx.model.load_checkpoint(str(prefix), 0)
    mod = mx.mod.Module(sym, data_names=[data_name], label_names=None)
    mod.bind(data_shapes=[(data_name, batch.shape)], for_training=False)
    mod.set_params(args, aux)
    mod.forward(mx.io.DataBatch([mx.nd.array(batch)]), is_train=False)
    return mod.get_outputs()[0].asnumpy()


def _image(path: Path):  # type: ignore[no-untyped-def]
    """RGB, 224x224, CHW float 0..255, no normalisation (the MMS vision service's preprocessing)."""
    import numpy as np
    from PIL import Image

    img = Image.open(path).convert("RGB").resize((224, 224))
    return np.asarray(img, dtype="float32").transpose(2, 0, 1)


def _tiny_onnx(path: Path, *, opset: int = 7, axis: int | None = None) -> Path:
    """A random fp16 conv net ending in an opset-7 Softmax over [N, 5, 1, 1], like SqueezeNet's."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array((0.1 * rng.normal(size=(5, 3, 3, 3))).astype("float16"), "w")
    bias = numpy_helper.from_array(rng.normal(size=(5,)).astype("float16"), "b")
    attrs = {} if axis is None else {"axis": axis}
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3]),
        helper.make_node("GlobalAveragePool", ["c"], ["p"]),
        helper.make_node("Softmax", ["p"], ["prob"], **attrs),
    ]
    graph = helper.make_graph(
        nodes, "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 3, 8, 8]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT16, [5, 3, 3, 3]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT16, [5])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT16, [1, 5, 1, 1])],
        initializer=[weight, bias],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 3
    onnx.save(model, str(path))
    return path


def test_tiny_fp16_model_gives_real_probabilities(tmp_path: Path) -> None:
    import numpy as np

    src = _tiny_onnx(tmp_path / "tiny.onnx")
    result = import_onnx(src, tmp_path / "ckpt", prefix="tiny")
    assert (result.converted_fp16, result.fixed_softmax, result.opset) == (True, 1, 7)
    assert json.loads((tmp_path / "ckpt" / "signature.json").read_text()) == {
        "inputs": [{"data_name": "x", "data_shape": [0, 3, 8, 8]}]
    }
    batch = np.random.default_rng(1).uniform(0, 1, size=(2, 3, 8, 8)).astype("float32")
    out = _forward(tmp_path / "ckpt" / "tiny", "x", batch)
    assert out.shape == (2, 5)
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-5)
    assert 0.0 < out.min() and out.max() < 0.9  # the importer's own Softmax gives 1.0 everywhere


def test_softmax_over_an_unsupported_axis_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ArchiveError, match="Softmax over axis 2"):
        import_onnx(_tiny_onnx(tmp_path / "t.onnx", axis=2), tmp_path / "out")


def test_not_an_onnx_file(tmp_path: Path) -> None:
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00garbage\xff" * 10)
    with pytest.raises(ArchiveError, match="not an ONNX model"):
        import_onnx(junk, tmp_path / "out")
    with pytest.raises(InputNotFoundError):
        import_onnx(tmp_path / "missing.onnx", tmp_path / "out")


def test_shared_squeezenet_onnx_matches_the_mxnet_checkpoint(
    tmp_path: Path, squeezenet_dir: Path, kitten_jpg: Path, kitten_png: Path
) -> None:
    import numpy as np

    src = require_shared(ONNX_SQUEEZENET)
    result = import_onnx(src, tmp_path / "sq", prefix="sq", synset=squeezenet_dir / "synset.txt")
    assert result.input_name == "data_0" and result.input_shape == [0, 3, 224, 224]
    batch = np.stack([_image(kitten_jpg), _image(kitten_png)])
    ours = _forward(tmp_path / "sq" / "sq", "data_0", batch)
    reference = _forward(squeezenet_dir / "squeezenet_v1.1", "data_0", batch)
    assert ours.shape == reference.shape == (2, 1000)
    assert list(ours.argmax(axis=1)) == list(reference.argmax(axis=1))
    np.testing.assert_allclose(ours, reference, atol=1e-4)
    labels = (squeezenet_dir / "synset.txt").read_text().splitlines()
    assert "tabby" in labels[int(ours[1].argmax())]

    # and the archive made from it classifies the same through mmsctl's engine
    from mmsctl.engine.protocol import RequestItem
    from mmsctl.engine.service import load_service

    created = create_archive(result.folder, model_name="sq", export_path=tmp_path)
    service = load_service(open_archive(created.path).service_spec())
    try:
        [reply] = service.handle([RequestItem.from_body("1", kitten_png.read_bytes(), "image/png")])
    finally:
        service.close()
    assert reply.ok, reply
    assert json.loads(reply.body)[0]["class"] == labels[int(reference[1].argmax())]
