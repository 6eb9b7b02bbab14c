"""The photo corpus (made once per session) and what a full decode of each item answers."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from mmsctl.engine.service import ModelService
from mmsctl.engine.spec import ServiceSpec
from tests.engine.helpers import body_item, load
from tests.support.paths import SQUEEZENET_DIR, require_shared
from tests.support.photos import Photo, make_corpus

Answer = list[dict[str, Any]]


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("photos")
    make_corpus(folder)
    return folder


@pytest.fixture(scope="session")
def corpus(corpus_dir: Path) -> list[Photo]:
    return make_corpus(corpus_dir)


@pytest.fixture(scope="session")
def squeezenet_service() -> ModelService:
    return load(ServiceSpec(require_shared(SQUEEZENET_DIR), "squeezenet"))


def full_decode_png(path: Path, size: tuple[int, int] = (224, 224)) -> bytes:
    """The reference input: Pillow's full-size decode, EXIF applied, RGB, averaged (box) to *size*, as a PNG.

    Written apart from mmsctl's decoder (no draft, Pillow's own exif_transpose) so the two can disagree.
    """
    from PIL import Image, ImageOps

    if path.suffix == ".heic":
        import pillow_heif

        pillow_heif.register_heif_opener()
    with Image.open(path) as im:
        upright = ImageOps.exif_transpose(im).convert("RGB")
    buf = io.BytesIO()
    upright.resize(size, Image.Resampling.BOX).save(buf, "PNG")
    return buf.getvalue()


def answer(service: ModelService, data: bytes) -> tuple[int, Any]:
    out = service.handle([body_item("1", data)])[0]
    return out.status, json.loads(out.body)


@pytest.fixture(scope="session")
def references(corpus: list[Photo], corpus_dir: Path, squeezenet_service: ModelService) -> dict[str, Answer]:
    """Each answerable item's top 5 on its full decode."""
    refs = {}
    for photo in corpus:
        if photo.reference is not None:
            status, top = answer(squeezenet_service, full_decode_png(corpus_dir / photo.reference))
            assert status == 200, top
            refs[photo.name] = top
    return refs


def assert_matches(got: Answer, want: Answer, name: str) -> None:
    """Same top-1 as the full decode, and each of the top 5 classes' probability within 0.02 of its."""
    assert got[0]["class"] == want[0]["class"], (name, got, want)
    theirs = {e["class"]: e["probability"] for e in want}
    ours = {e["class"]: e["probability"] for e in got}
    for cls, p in theirs.items():
        assert abs(ours.get(cls, 0.0) - p) <= 0.02, (name, cls, ours.get(cls), p)
