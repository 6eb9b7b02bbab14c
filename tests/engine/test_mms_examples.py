"""MMS's own example handlers (tests/fixtures/mms_examples, unmodified) serve the kitten in mmsctl."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from mmsctl.engine.spec import ServiceSpec
from tests.engine.helpers import body_item, link_checkpoint, load, write_manifest

EXAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "mms_examples"


def _example_archive(root: Path, squeezenet_dir: Path) -> ServiceSpec:
    shutil.copytree(EXAMPLES, root, ignore=shutil.ignore_patterns("README.md", "__pycache__"))
    link_checkpoint(squeezenet_dir, root)
    # MXNetModelService finds the checkpoint by the manifest's modelName
    write_manifest(root, model_name="squeezenet_v1.1", handler="mxnet_vision_service:handle")
    return ServiceSpec(root, "squeezenet", "mxnet_vision_service:handle")


def test_mms_example_vision_service_runs_unmodified(
    tmp_path: Path, squeezenet_dir: Path, kitten_jpg: Path
) -> None:
    example = load(_example_archive(tmp_path / "example", squeezenet_dir))
    builtin = load(ServiceSpec(squeezenet_dir, "squeezenet"))
    body = kitten_jpg.read_bytes()
    got = example.handle([body_item("1", body, "image/jpeg")])[0]
    want = builtin.handle([body_item("1", body, "image/jpeg")])[0]
    assert got.status == 200, got.body
    assert got.content_type is None  # the example sets none, like in MMS
    a, b = json.loads(got.body), json.loads(want.body)
    assert [e["class"] for e in a] == [e["class"] for e in b]
    assert all(abs(x["probability"] - y["probability"]) < 1e-6 for x, y in zip(a, b))
    # its corrupt-image path (no per-item status in the example) still answers
    bad = example.handle([body_item("2", b"junk")])[0]
    assert bad.body == b"Corrupted image input"


def test_legacy_04_service_runs_where_mms_is_installed(
    tmp_path: Path, squeezenet_dir: Path, kitten_jpg: Path, monkeypatch, request
) -> None:
    """A legacy .model layout whose service subclasses MMS's own MXNetVisionService."""
    import sys

    import pytest

    from tests.support.paths import MMS_VENV

    found = sorted(MMS_VENV.glob("lib/python*/site-packages/mms"))
    if not found:
        pytest.skip(f"the real `mms` package is not installed in {MMS_VENV}")
    shim = tmp_path / "mms-only"
    shim.mkdir()
    (shim / "mms").symlink_to(found[0])  # only `mms` from that venv, not its older numpy
    monkeypatch.syspath_prepend(str(shim))
    def drop_mms() -> None:
        for name in [m for m in sys.modules if m == "mms" or m.startswith("mms.")]:
            del sys.modules[name]

    drop_mms()
    request.addfinalizer(drop_mms)  # later tests must not find this `mms`

    root = tmp_path / "legacy"
    link_checkpoint(squeezenet_dir, root)
    (root / "signature.json").unlink()  # 0.4 signatures also name the input and output types
    (root / "signature.json").write_text(json.dumps({
        "input_type": "image/jpeg",
        "inputs": [{"data_name": "data_0", "data_shape": [0, 3, 224, 224]}],
        "output_type": "application/json",
    }))
    (root / "MANIFEST.json").write_text(json.dumps({
        "Engine": {"MXNet": 1.9},
        "Model-Archive-Version": 0.2,
        "Model": {
            "Model-Name": "squeezenet_v1.1",
            "Service": "squeezenet_service.py",
            "Symbol": "squeezenet_v1.1-symbol.json",
            "Parameters": "squeezenet_v1.1-0000.params",
            "Signature": "signature.json",
        },
    }))
    (root / "squeezenet_service.py").write_text(
        "from mms.model_service.mxnet_vision_service import MXNetVisionService\n\n\n"
        "class SqueezenetService(MXNetVisionService):\n    pass\n"
    )
    legacy = load(ServiceSpec(root, "squeezenet_v1.1", "squeezenet_service.py"))
    builtin = load(ServiceSpec(squeezenet_dir, "squeezenet"))
    body = kitten_jpg.read_bytes()
    got = legacy.handle([body_item("1", body, "image/jpeg")])[0]
    want = builtin.handle([body_item("1", body, "image/jpeg")])[0]
    assert got.status == 200, got.body
    a, b = json.loads(got.body), json.loads(want.body)
    assert [e["class"] for e in a] == [e["class"] for e in b]
    assert all(abs(x["probability"] - y["probability"]) < 1e-6 for x, y in zip(a, b))
