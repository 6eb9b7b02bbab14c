"""Archives both ways between mmsctl and real MMS 1.1.11.

* a ``.mar`` made by ``mmsctl archive create`` (checkpoint folder or ONNX import)
  registers in real MMS and classifies the kitten;
* archives made by MMS's ``model-archiver`` (all three formats) open in mmsctl
  with the right manifest, and predict through mmsctl's engine.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from mmsctl.archive import create_archive, open_archive
from tests.support.fixtures_mms import mms_server  # noqa: F401  (fixture)
from tests.support.mms import (
    ARCHIVER_BIN,
    NOOP_HANDLER_SOURCE,
    MmsInstance,
    predict,
    register_model,
    unregister_model,
    wait_for_prediction,
)
from tests.support.paths import MMS_VENV, ONNX_SQUEEZENET, require_shared

pytestmark = [pytest.mark.interop, pytest.mark.xdist_group("mms")]

CATS = ("tabby", "tiger cat")


def _top1(body: bytes) -> str:
    answer = json.loads(body)
    return str(answer[0]["class"])


def _model_archiver(*args: str) -> None:
    if not ARCHIVER_BIN.exists():
        pytest.skip(f"MMS's model-archiver not found in {MMS_VENV} (run `make reference-servers`)")
    proc = subprocess.run([str(ARCHIVER_BIN), *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def _serve_and_classify(mms: MmsInstance, mar: Path, name: str, images: list[Path]) -> list[str]:
    """Register *mar* in real MMS and return the top-1 label for each image."""
    register_model(mms, mar.name, initial_workers=1)
    try:
        labels = [_top1(wait_for_prediction(mms, name, images[0].read_bytes(), timeout=120).body)]
        for image in images[1:]:
            reply = predict(mms, name, image.read_bytes(), timeout=60)
            assert reply.status == 200, reply
            labels.append(_top1(reply.body))
        return labels
    finally:
        unregister_model(mms, name)


def _assert_kittens(labels: list[str]) -> None:
    # kitten_224.png is a tabby for SqueezeNet; the small JPEG's top-1 is another cat (Egyptian cat)
    png, jpg = labels
    assert any(cat in png for cat in CATS), labels
    assert "cat" in jpg, labels


def test_mmsctl_archive_serves_in_real_mms(
    mms_server: MmsInstance, squeezenet_dir: Path, kitten_png: Path, kitten_jpg: Path  # noqa: F811
) -> None:
    created = create_archive(squeezenet_dir, model_name="squeezenet", export_path=mms_server.model_store)
    _assert_kittens(_serve_and_classify(mms_server, created.path, "squeezenet", [kitten_png, kitten_jpg]))


def test_mmsctl_onnx_archive_serves_in_real_mms(
    mms_server: MmsInstance, squeezenet_dir: Path, kitten_png: Path, kitten_jpg: Path, tmp_path: Path  # noqa: F811
) -> None:
    from mmsctl.archive.onnx_import import import_onnx

    onnx_file = require_shared(ONNX_SQUEEZENET)
    imported = import_onnx(onnx_file, tmp_path / "sq_onnx", prefix="sq_onnx", synset=squeezenet_dir / "synset.txt")
    created = create_archive(imported.folder, model_name="sq_onnx", export_path=mms_server.model_store)
    _assert_kittens(_serve_and_classify(mms_server, created.path, "sq_onnx", [kitten_png, kitten_jpg]))


@pytest.mark.parametrize("fmt, made", [("default", "noop.mar"), ("tgz", "noop.tar.gz"), ("no-archive", "noop")])
def test_model_archiver_archives_open_and_predict_in_mmsctl(tmp_path: Path, fmt: str, made: str) -> None:
    from mmsctl.engine.protocol import RequestItem
    from mmsctl.engine.service import load_service

    src = tmp_path / "src"
    src.mkdir()
    (src / "noop_service.py").write_text(NOOP_HANDLER_SOURCE)
    out = tmp_path / "out"
    out.mkdir()
    _model_archiver(
        "--model-name", "noop", "--model-path", str(src), "--handler", "noop_service:handle",
        "--export-path", str(out), "--archive-format", fmt,
    )
    archive = open_archive(out / made)
    assert archive.model_name == "noop"
    assert archive.handler == "noop_service:handle"
    assert archive.manifest.runtime == "python"
    assert archive.manifest.specification_version == "1.0"
    assert archive.manifest.legacy is False
    assert (archive.root / "noop_service.py").is_file()
    service = load_service(archive.service_spec())
    try:
        [reply] = service.handle([RequestItem.from_body("1", b"hello", "application/octet-stream")])
    finally:
        service.close()
    assert reply.ok, reply
    assert reply.body == b"hello"


def test_model_archiver_checkpoint_predicts_in_mmsctl(tmp_path: Path, squeezenet_dir: Path, kitten_png: Path) -> None:
    """model-archiver packs a checkpoint with mmsctl's handler file; mmsctl's engine classifies with it."""
    from mmsctl.engine.builtin import VISION_HANDLER, VISION_HANDLER_FILE, VISION_HANDLER_MODULE
    from mmsctl.engine.protocol import RequestItem
    from mmsctl.engine.service import load_service

    src = tmp_path / "squeezenet_v1.1"
    src.mkdir()
    for item in squeezenet_dir.iterdir():
        (src / item.name).symlink_to(item)
    shutil.copyfile(VISION_HANDLER_FILE, src / f"{VISION_HANDLER_MODULE}.py")
    _model_archiver(
        "--model-name", "squeezenet_v1.1", "--model-path", str(src), "--handler", VISION_HANDLER,
        "--export-path", str(tmp_path),
    )
    archive = open_archive(tmp_path / "squeezenet_v1.1.mar")
    assert archive.handler == VISION_HANDLER
    assert archive.signature == json.loads((squeezenet_dir / "signature.json").read_text())
    service = load_service(archive.service_spec())
    try:
        [reply] = service.handle([RequestItem.from_body("1", kitten_png.read_bytes(), "image/png")])
    finally:
        service.close()
    assert reply.ok, reply
    assert any(cat in _top1(reply.body) for cat in CATS), reply.body
