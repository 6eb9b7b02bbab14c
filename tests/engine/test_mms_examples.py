"""MMS's own example handlers (tests/fixtures/mms_examples, unmodified) serve the kitten in mmsctl."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from mmsctl.engine.service import load_service
from tests.engine.helpers import FolderArchive, body_item, link_checkpoint, write_manifest

EXAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "mms_examples"


def _example_archive(root: Path, squeezenet_dir: Path) -> FolderArchive:
    shutil.copytree(EXAMPLES, root, ignore=shutil.ignore_patterns("README.md", "__pycache__"))
    link_checkpoint(squeezenet_dir, root)
    # MXNetModelService finds the checkpoint by the manifest's modelName
    write_manifest(root, model_name="squeezenet_v1.1", handler="mxnet_vision_service:handle")
    return FolderArchive(root, "squeezenet", "mxnet_vision_service:handle")


def test_mms_example_vision_service_runs_unmodified(
    tmp_path: Path, squeezenet_dir: Path, kitten_jpg: Path
) -> None:
    example = load_service(_example_archive(tmp_path / "example", squeezenet_dir))
    builtin = load_service(FolderArchive(squeezenet_dir, "squeezenet"))
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
