"""Photos as people send them, through the server, `predict` and the Lambda handler.

Every corpus item (tests/support/photos.py: 12 MP baseline/progressive JPEGs, EXIF orientations
3/6/8, greyscale, CMYK, HEIC, 16-bit and RGBA PNGs, a 1-pixel strip) must get the same top-1 as
its full-size, full-quality decode, with the top 5 probabilities within 0.02; a truncated JPEG
gets a 400 MMS body, a HEIC without pillow-heif a 415 naming the package.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from mmsctl.engine import imaging
from mmsctl.engine.service import ModelService
from mmsctl.lambda_.runtime import Runtime
from mmsctl.lambda_.served_model import ServedModel, load_model
from mmsctl.lambda_.settings import HandlerSettings
from mmsctl.cloud.lambda_.events import function_url_event
from tests.photos.conftest import Answer, answer, assert_matches
from tests.support.cli import run_here
from tests.support.mmsctl_server import ServerInfo, running_mmsctl_server
from tests.support.paths import REPO, SQUEEZENET_DIR, require_shared
from tests.support.photos import Photo

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from mmsctl.archive import create_archive

    store = tmp_path_factory.mktemp("store")
    create_archive(require_shared(SQUEEZENET_DIR), model_name="squeezenet", export_path=store)
    return store / "squeezenet.mar"


def _check(name: str, status: int, got: Any, corpus: list[Photo], references: dict[str, Answer]) -> None:
    photo = next(p for p in corpus if p.name == name)
    if photo.reference is None:
        assert status == photo.status == 400, got
        assert got["type"] == "BadRequestException" and got["message"].startswith("Corrupted image input: "), got
        return
    assert status == 200, (name, got)
    assert_matches(got, references[name], name)


def test_the_corpus_has_every_kind(corpus: list[Photo], corpus_dir: Path) -> None:
    names = {p.name for p in corpus}
    assert {"baseline", "progressive", "exif3", "exif6", "exif8", "greyscale", "cmyk", "heic", "png_rgba",
            "png_16bit", "strip_1px", "truncated"} <= names
    assert 3_000_000 < (corpus_dir / "baseline.jpg").stat().st_size < 5_000_000  # what a 12 MP phone JPEG weighs


def test_big_jpegs_are_decoded_scaled_and_upright(corpus_dir: Path) -> None:
    for name, orientation in (("baseline.jpg", 1), ("progressive.jpg", 1), ("exif6.jpg", 6), ("exif8.jpg", 8)):
        got = imaging.decode((corpus_dir / name).read_bytes(), 224, 224, max_pixels=10**8)
        assert (got.stored, got.scale, got.orientation) == ((4032, 3024) if orientation == 1 else (3024, 4032),
                                                            4, orientation)
        assert got.pixels.shape == (224, 224, 3)
    strip = imaging.decode((corpus_dir / "strip.jpg").read_bytes(), 224, 224, max_pixels=10**8)
    assert (strip.scale, strip.pixels.shape) == (1, (224, 1, 3))  # no DCT scaling; shrunk only where it is long


def test_the_pixel_cap_is_on_the_decoded_size(corpus_dir: Path) -> None:
    """12 MP is refused at a 1 MP cap by a full decode (a PNG) but read at 1/4 scale (756 x 1008) as a JPEG."""
    data = (corpus_dir / "baseline.jpg").read_bytes()
    assert imaging.decode(data, 224, 224, max_pixels=1008 * 756).scale == 4
    with pytest.raises(imaging.ImageError, match="1008x756 = 762048 pixels is over the limit of 762047"):
        imaging.decode(data, 224, 224, max_pixels=1008 * 756 - 1)


def test_engine_answers_like_a_full_decode(corpus: list[Photo], corpus_dir: Path, references: dict[str, Answer],
                                           squeezenet_service: ModelService) -> None:
    for photo in corpus:
        status, got = answer(squeezenet_service, (corpus_dir / photo.file).read_bytes())
        _check(photo.name, status, got, corpus, references)


@pytest.fixture(scope="module")
def server(archive: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    with running_mmsctl_server(tmp_path_factory.mktemp("srv"), models={"squeezenet": str(archive)}) as srv:
        yield srv


def test_server_answers_like_a_full_decode(server: ServerInfo, corpus: list[Photo], corpus_dir: Path,
                                           references: dict[str, Answer]) -> None:
    url = f"{server.inference_url}/predictions/squeezenet"
    for photo in corpus:
        resp = httpx.post(url, content=(corpus_dir / photo.file).read_bytes(), timeout=60)
        _check(photo.name, resp.status_code, resp.json(), corpus, references)


def test_predict_answers_like_a_full_decode(archive: Path, corpus: list[Photo], corpus_dir: Path,
                                            references: dict[str, Answer]) -> None:
    files = [str(corpus_dir / p.file) for p in corpus]
    done = run_here("predict", str(archive), *files, "-o", "json", cwd=REPO)
    assert done.returncode != 0 and "error: 1 of" in done.stderr  # the truncated one, as one line
    rows = {row["input"]: row for row in json.loads(done.stdout)}
    for photo in corpus:
        row = rows[str(corpus_dir / photo.file)]
        _check(photo.name, row["status"], row.get("result", row.get("error")), corpus, references)


@pytest.fixture(scope="module")
def served(archive: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedModel]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MMSCTL_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        model = load_model(HandlerSettings(model=str(archive)))
    yield model
    model.close()


def test_lambda_handler_answers_like_a_full_decode(served: ServedModel, corpus: list[Photo], corpus_dir: Path,
                                                   references: dict[str, Answer]) -> None:
    runtime = Runtime(HandlerSettings(model="(loaded)"), served, lambda: None)
    for photo in corpus:
        event = function_url_event("POST", body=(corpus_dir / photo.file).read_bytes(), content_type="image/jpeg")
        out = runtime.handle(event)
        _check(photo.name, out["statusCode"], json.loads(out["body"]), corpus, references)


_NO_HEIF = "import sys; sys.modules['pillow_heif'] = None  # as if pillow-heif were not installed\n"


def _without_pillow_heif(tmp_path: Path) -> dict[str, str]:
    """An environment whose Python (and its worker processes) cannot import pillow_heif."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_NO_HEIF)
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), str(REPO), env.get("PYTHONPATH", "")]))
    return env


def test_heic_without_the_plugin_is_a_415_naming_the_package(tmp_path: Path, corpus_dir: Path, archive: Path) -> None:
    heic = corpus_dir / "photo.heic"
    if not heic.is_file():
        pytest.skip("pillow-heif is not installed here: no HEIC in the corpus")
    env = _without_pillow_heif(tmp_path)
    probe = ("from mmsctl.engine.spec import ServiceSpec\nfrom mmsctl.engine.service import load_service\n"
             "from tests.engine.helpers import body_item\nimport sys, json\n"
             f"svc = load_service(ServiceSpec({str(require_shared(SQUEEZENET_DIR))!r}, 'squeezenet'))\n"
             f"out = svc.handle([body_item('1', open({str(heic)!r}, 'rb').read())])[0]\n"
             "print(out.status, out.body.decode())\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120, cwd=REPO)
    status, body = done.stdout.strip().split(" ", 1)
    assert status == "415", done.stderr
    assert json.loads(body) == {"code": 415, "type": "UnsupportedMediaTypeException",
                                "message": "HEIC/HEIF images need the pillow-heif package (pip install pillow-heif)"}
    cli = subprocess.run([sys.executable, "-m", "mmsctl", "predict", str(archive), str(heic)],
                         capture_output=True, text=True, env=env, timeout=120, cwd=REPO)
    assert cli.returncode != 0
    assert "need the pillow-heif package" in cli.stderr and len(cli.stderr.strip().splitlines()) <= 2, cli.stderr
