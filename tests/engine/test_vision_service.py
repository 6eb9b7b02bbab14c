"""The built-in vision handler: real SqueezeNet answers, batching, per-item failures, top-k."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmsctl.engine.builtin import VISION_HANDLER, VISION_HANDLER_FILE
from mmsctl.engine.spec import ServiceSpec
from tests.engine.helpers import TINY_CLASSES, body_item, build_tiny_checkpoint, load, png_bytes

CATS = {"n02123045 tabby, tabby cat", "n02123159 tiger cat", "n02124075 Egyptian cat"}


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_checkpoint(tmp_path_factory.mktemp("tiny"))


def test_builtin_is_standalone() -> None:
    """It must load in real MMS too: nothing from mmsctl, only mxnet/numpy/stdlib."""
    source = VISION_HANDLER_FILE.read_text()
    assert "mmsctl" not in "\n".join(l for l in source.splitlines() if l.startswith(("import", "from")))
    assert VISION_HANDLER == "mmsctl_vision_service:handle"


def test_squeezenet_classifies_the_kitten(squeezenet_dir: Path, kitten_png: Path, kitten_jpg: Path) -> None:
    svc = load(ServiceSpec(squeezenet_dir, "squeezenet"), batch_size=2)
    png, jpg = svc.handle([body_item("1", kitten_png.read_bytes()), body_item("2", kitten_jpg.read_bytes())])
    assert png.status == jpg.status == 200
    top = json.loads(png.body)
    assert [set(e) for e in top] == [{"probability", "class"}] * 5
    assert top[0]["class"] in {"n02123045 tabby, tabby cat", "n02123159 tiger cat"}
    probs = [e["probability"] for e in top]
    assert probs == sorted(probs, reverse=True) and probs[0] > 0.5
    assert {e["class"] for e in json.loads(jpg.body)[:3]} <= CATS | {"n02127052 lynx, catamount"}
    assert json.loads(jpg.body)[0]["class"] in CATS


def test_corrupt_image_fails_only_its_item(tiny_dir: Path) -> None:
    svc = load(ServiceSpec(tiny_dir, "tiny"), batch_size=4)
    good = [png_bytes(1), png_bytes(2)]
    out = svc.handle([body_item("a", good[0]), body_item("b", b"not an image"), body_item("c", b""),
                      body_item("d", good[1])])
    assert [r.status for r in out] == [200, 400, 400, 200]
    assert json.loads(out[1].body) == {
        "code": 400,
        "type": "BadRequestException",
        "message": "Corrupted image input: Decoding failed. Invalid image file.",
    }
    assert json.loads(out[2].body)["message"] == "Empty image input"
    # the good ones are answered as if they had been alone
    alone = [svc.handle([body_item("x", g)])[0].body for g in good]
    for got, want in zip((out[0].body, out[3].body), alone):
        a, b = json.loads(got), json.loads(want)
        assert [e["class"] for e in a] == [e["class"] for e in b]
        assert all(abs(x["probability"] - y["probability"]) < 1e-5 for x, y in zip(a, b))


def test_top_k_parameter(tiny_dir: Path) -> None:
    svc = load(ServiceSpec(tiny_dir, "tiny"), batch_size=3)
    img = png_bytes(3)
    two, default, bad = svc.handle(
        [body_item("1", img, topk="2"), body_item("2", img), body_item("3", img, top_k="zero")]
    )
    assert len(json.loads(two.body)) == 2 and len(json.loads(default.body)) == 4  # 4 classes < 5
    assert json.loads(two.body) == json.loads(default.body)[:2]
    assert {e["class"] for e in json.loads(default.body)} == set(TINY_CLASSES)
    assert bad.status == 400 and "whole number" in json.loads(bad.body)["message"]


def test_batch_sizes_give_the_same_answers(tiny_dir: Path) -> None:
    svc = load(ServiceSpec(tiny_dir, "tiny"), batch_size=5)
    images = [png_bytes(i) for i in range(5)]
    together = [json.loads(r.body) for r in svc.handle([body_item(str(i), b) for i, b in enumerate(images)])]
    pairs = [json.loads(r.body) for r in svc.handle([body_item("p", b) for b in images[:2]])]
    assert pairs == together[:2] or all(
        abs(x["probability"] - y["probability"]) < 1e-5 for a, b in zip(pairs, together) for x, y in zip(a, b)
    )
    # different random images give different answers (the model is not constant)
    assert len({json.dumps(t) for t in together}) > 1


def test_a_signature_asking_for_a_huge_input_is_refused_at_load(tmp_path: Path) -> None:
    """signature.json comes with the archive: a model that would bind 100000x100000 images fails to
    load with the reason, instead of a worker allocating what it asks for."""
    from mmsctl.errors import MmsError

    root = build_tiny_checkpoint(tmp_path / "huge")
    signature = json.loads((root / "signature.json").read_text())
    signature["inputs"][0]["data_shape"] = [1, 3, 100_000, 100_000]
    (root / "signature.json").write_text(json.dumps(signature))
    with pytest.raises(MmsError, match="more than the 268435456 elements"):
        load(ServiceSpec(root, "huge"))
