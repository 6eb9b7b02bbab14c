"""Bodies people really send reach the model: the real SqueezeNet archive and the kitten, every way
curl, hey and HTTP clients send them, query parameters on every prediction route, and an image bomb
refused before it is decoded."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import httpx
import pytest

from tests.support.bombs import png_bomb
from tests.support.leaks import LEAK
from tests.support.mmsctl_server import ServerInfo, running_mmsctl_server
from tests.support.paths import KITTEN_JPG, KITTEN_PNG, SQUEEZENET_DIR, require_shared


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    from mmsctl.archive import create_archive

    store = tmp_path_factory.mktemp("store")
    create_archive(require_shared(SQUEEZENET_DIR), model_name="squeezenet", export_path=store)
    with running_mmsctl_server(tmp_path_factory.mktemp("srv"), model_store=store,
                               models={"squeezenet": "squeezenet.mar"}) as info:
        yield info


def _classes(resp: httpx.Response) -> list[str]:
    assert resp.status_code == 200, resp.text
    return [row["class"] for row in resp.json()]


def test_every_way_of_sending_the_kitten_gets_its_classes(srv: ServerInfo) -> None:
    kitten = require_shared(KITTEN_JPG).read_bytes()
    url = f"{srv.inference_url}/predictions/squeezenet"
    reference = _classes(httpx.post(url, content=kitten, headers={"Content-Type": "application/octet-stream"},
                                    timeout=60))
    assert len(reference) == 5 and "cat" in reference[0]
    for content_type in (
        "application/x-www-form-urlencoded",  # curl --data-binary @kitten.jpg
        "text/html",  # hey -D kitten.jpg
        "application/json",
        "text/plain; charset=utf-8",
        "image/jpeg",
        None,  # curl -T kitten.jpg
    ):
        headers = {"Content-Type": content_type} if content_type else {}
        got = _classes(httpx.post(url, content=kitten, headers=headers, timeout=60))
        assert got == reference, content_type
    assert _classes(httpx.post(url, files={"data": ("kitten.jpg", kitten, "image/jpeg")}, timeout=60)) == reference


@pytest.mark.parametrize("path", [
    "/predictions/squeezenet?topk=1", "/predictions/squeezenet/1.0?topk=1", "/invocations?model_name=squeezenet&topk=1",
    "/models/squeezenet/invoke?topk=1", "/squeezenet/predict?topk=1",
])
def test_query_parameters_reach_the_handler_on_every_prediction_route(srv: ServerInfo, path: str) -> None:
    png = require_shared(KITTEN_PNG).read_bytes()
    assert len(_classes(httpx.post(srv.inference_url + path, content=png, timeout=60))) == 1


def test_an_image_bomb_is_refused_before_it_is_decoded(srv: ServerInfo, tmp_path: Path) -> None:
    """A 48 KB PNG of 20000 x 20000 pixels: decoding it would take the worker 1.2 GB."""
    url = f"{srv.inference_url}/predictions/squeezenet"
    worker = httpx.get(f"{srv.management_url}/models/squeezenet", timeout=10).json()["workers"][0]["pid"]
    bomb = png_bomb(tmp_path / "bomb.png").read_bytes()
    assert len(bomb) < 100_000
    resp = httpx.post(url, content=bomb, timeout=60)
    assert resp.status_code == 400, resp.text
    assert resp.json() == {
        "code": 400, "type": "BadRequestException",
        "message": "Image of 20000x20000 = 400000000 pixels is over the limit of 89478485 pixels "
                   "(max_image_pixels / MMSCTL_MAX_IMAGE_PIXELS)",
    }
    # the same worker answers the next image
    assert _classes(httpx.post(url, content=require_shared(KITTEN_JPG).read_bytes(), timeout=60))
    assert httpx.get(f"{srv.management_url}/models/squeezenet", timeout=10).json()["workers"][0]["pid"] == worker


def test_an_image_pillow_cannot_decode_is_a_400_in_our_words(srv: ServerInfo) -> None:
    """Pillow's own messages (its internals, an object's address) never reach the client."""
    url = f"{srv.inference_url}/predictions/squeezenet"
    png, jpg = require_shared(KITTEN_PNG).read_bytes(), require_shared(KITTEN_JPG).read_bytes()
    for body in (png[:len(png) // 2], jpg[:300]):  # Pillow: "image file is truncated", "Truncated File Read"
        resp = httpx.post(url, content=body, timeout=60)
        assert resp.status_code == 400, resp.text
        message = resp.json()["message"]
        assert message.startswith("Corrupted image input: "), message
        assert not LEAK.search(message), message
        assert message != "Corrupted image input: Truncated File Read"
    truncated = httpx.post(url, content=png[:len(png) // 2], timeout=60).json()["message"]
    assert truncated == "Corrupted image input: the image data is truncated."
