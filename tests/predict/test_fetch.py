"""URL inputs (``mmsctl predict URL``, the Lambda handler's ``?url=``) against a real HTTP server on loopback:
every way a server can misbehave is bounded."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Iterator

import pytest

from mmsctl.errors import DownloadError
from mmsctl.predict import expand_inputs
from mmsctl.predict.fetch import FetchError, fetch_url
from tests.support.imageserver import serving_images


@pytest.fixture
def base(tmp_path: Path, kitten_jpg: Path) -> Iterator[str]:
    shutil.copy(kitten_jpg, tmp_path / "kitten.jpg")
    with serving_images(tmp_path) as url:
        yield url


def _status(url: str, **kw: float) -> tuple[int, str]:
    with pytest.raises(FetchError) as info:
        fetch_url(url, max_bytes=int(kw.get("max_bytes", 1024 * 1024)), timeout=kw.get("timeout", 5.0))
    return info.value.status, info.value.type


def test_fetches_an_image_and_follows_a_few_redirects(base: str, kitten_jpg: Path) -> None:
    data = kitten_jpg.read_bytes()
    assert fetch_url(f"{base}/img/kitten.jpg", max_bytes=len(data), timeout=5) == data
    assert fetch_url(f"{base}/redirect/2", max_bytes=len(data), timeout=5) == data
    assert _status(f"{base}/redirect/5") == (502, "BadGatewayException")


def test_size_ceiling_announced_or_streamed(base: str, kitten_jpg: Path) -> None:
    assert _status(f"{base}/img/kitten.jpg", max_bytes=kitten_jpg.stat().st_size - 1) == (413, "PayloadTooLargeException")
    assert _status(f"{base}/big") == (413, "PayloadTooLargeException")
    assert _status(f"{base}/endless", max_bytes=200_000) == (413, "PayloadTooLargeException")


def test_a_slow_server_meets_the_deadline(base: str) -> None:
    assert _status(f"{base}/drip", timeout=0.5) == (504, "GatewayTimeoutException")


def test_errors_and_bad_urls(base: str) -> None:
    assert _status(f"{base}/img/nothing.jpg") == (502, "BadGatewayException")
    for bad in ("file:///etc/passwd", "ftp://127.0.0.1/x", "http://", "kitten.jpg", "http://x/" + "a" * 3000):
        assert _status(bad) == (400, "BadRequestException"), bad
    closed = base.rsplit(":", 1)[0] + ":1"
    assert _status(f"{closed}/x.jpg")[0] == 502


def test_predict_reads_url_inputs_through_the_same_bounded_fetch(base: str, kitten_jpg: Path) -> None:
    [good, looping] = expand_inputs([f"{base}/redirect/2", f"{base}/redirect/5"])
    assert good.read() == kitten_jpg.read_bytes()
    with pytest.raises(FetchError) as info:  # an unbounded client would follow all five
        looping.read()
    assert isinstance(info.value, DownloadError) and info.value.status == 502  # predict's exit code and message

