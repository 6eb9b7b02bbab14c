"""A register ``url`` is read once into what is then opened: the allow-list cannot be walked around.

The tricks of issue 9 (``%20http://``, ``%09http://``, ``x=http://``) against a real server with an
empty ``allowed_urls`` and a real HTTP server holding the archive: nothing is downloaded.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from mmsctl.server.config import ServerConfig
from mmsctl.server.errors import ApiException
from mmsctl.server.store import normalise_location
from tests.support.http_mirror import Mirror, serving_folder
from tests.support.error_bodies import error_text, is_error_body
from tests.support.mmsctl_server import ServerInfo, make_noop_archive, running_mmsctl_server


def _mar(folder: Path, out: Path) -> Path:
    with zipfile.ZipFile(out, "w") as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(folder).as_posix())
    return out


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mirror]:
    root = tmp_path_factory.mktemp("web")
    (root / "ok").mkdir()
    (root / "evil").mkdir()
    noop = make_noop_archive(tmp_path_factory.mktemp("src") / "noop")
    for where in ("ok/noop.mar", "evil/noop.mar", "ok/other.mar"):
        _mar(noop, root / where)
    with serving_folder(root) as served:
        yield served


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("store")
    make_noop_archive(store / "noop")
    return store


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory, mirror: Mirror, store: Path) -> Iterator[ServerInfo]:
    port = mirror.url.rsplit(":", 1)[1].strip("/")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("MMSCTL_OFFLINE", raising=False)  # downloads are what this module is about
        with running_mmsctl_server(tmp_path_factory.mktemp("srv"), model_store=store,
                                   extra_config={"allowed_urls": [rf"http://127\.0\.0\.1:{port}/ok/.*"]}) as info:
            yield info


def _register(srv: ServerInfo, url: str, **params: str) -> httpx.Response:
    return httpx.post(f"{srv.management_url}/models", params={"url": url, "initial_workers": "0", **params},
                      timeout=30)


def _refused(resp: httpx.Response, status: int, fragment: str) -> None:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert is_error_body(body) and fragment in error_text(body), body


@pytest.mark.parametrize("prefix", [" ", "\t", "\n", "x=", "noop=", " x="])
def test_whitespace_and_name_prefixes_never_reach_the_network(srv: ServerInfo, mirror: Mirror, prefix: str) -> None:
    before = list(mirror.requests)
    resp = _register(srv, prefix + mirror.url_for("evil/noop.mar"))
    assert resp.status_code in (400, 404), resp.text
    assert mirror.requests == before  # nothing was downloaded
    assert httpx.get(f"{srv.management_url}/models", timeout=10).json()["models"] == []


def test_an_allowed_url_registers_and_a_redirect_out_of_the_list_is_refused(srv: ServerInfo, mirror: Mirror) -> None:
    resp = _register(srv, mirror.url_for("ok/noop.mar"), model_name="fetched", initial_workers="1")
    assert resp.status_code == 200, resp.text
    assert httpx.post(f"{srv.inference_url}/predictions/fetched", content=b"hi", timeout=30).text == "hi"
    assert httpx.delete(f"{srv.management_url}/models/fetched", timeout=30).status_code == 200
    # matched as a whole, ignoring case (as TorchServe's allowed_urls)
    upper = mirror.url_for("ok/other.mar").replace("http://", "HTTP://")
    assert _register(srv, upper, model_name="upper").status_code == 200
    assert httpx.delete(f"{srv.management_url}/models/upper", timeout=30).status_code == 200
    _refused(_register(srv, mirror.url_for("evil/noop.mar")), 400, "URL not allowed")
    mirror.redirect["ok/jump.mar"] = mirror.url_for("evil/noop.mar")
    _refused(_register(srv, mirror.url_for("ok/jump.mar")), 400, "redirected to " + mirror.url_for("evil/noop.mar"))
    assert "evil/noop.mar" not in mirror.requests


def test_paths_outside_the_model_store_do_not_register(srv: ServerInfo, store: Path) -> None:
    _refused(_register(srv, "/etc"), 404, "a path outside the model store")
    _refused(_register(srv, "file:///etc"), 404, "a path outside the model store")
    _refused(_register(srv, f"{store}/../etc"), 404, "Relative path is not allowed")
    _refused(_register(srv, "ftp://127.0.0.1/noop.mar"), 400, "Unsupported URL scheme ftp://")
    _refused(_register(srv, "s3://bucket/noop.mar"), 400, "Unsupported URL scheme s3://")
    inside = _register(srv, f" {store / 'noop'} ", model_name="inside")
    assert inside.status_code == 200, inside.text
    assert httpx.get(f"{srv.management_url}/models/inside", timeout=10).json()["modelUrl"] == str(store / "noop")
    assert httpx.delete(f"{srv.management_url}/models/inside", timeout=30).status_code == 200


@pytest.mark.parametrize("params, fragment", [
    ({"model_name": "a/b"}, "Invalid model name 'a/b'"),
    ({"model_name": "evil\nINFO forged log line"}, "Invalid model name"),
    ({"model_name": "x" * 256}, "1 to 255 characters"),
    ({"handler": "os:system"}, "no module os.py in the archive"),
    ({"handler": "../../x:handle"}, "Invalid handler"),
])
def test_register_names_and_handlers_are_checked(srv: ServerInfo, params: dict[str, str], fragment: str) -> None:
    _refused(_register(srv, "noop", **params), 400, fragment)
    assert httpx.get(f"{srv.management_url}/models", timeout=10).json()["models"] == []


# -- the one normalisation, without a server ------------------------------------------------------------
def test_normalise_location(tmp_path: Path) -> None:
    store = tmp_path / "store"
    make_noop_archive(store / "noop")
    config = ServerConfig(model_store=str(store), allowed_urls=[r"https://models\.example\.com/.*"])
    n = normalise_location
    assert n("  noop\t", config).value == str(store / "noop")
    assert (n("squeezenet", config).kind, n("squeezenet", config).value) == ("zoo", "squeezenet")
    assert n(" https://MODELS.example.com/a.mar ", config).value == "https://MODELS.example.com/a.mar"
    assert n(f"file://{store}/noop", config).value == str(store / "noop")
    for bad in ("https://models.example.com.evil.org/a.mar", "x=https://models.example.com/a.mar", "",
                "noop\x00", "/etc/passwd", "../noop", "http:/models.example.com/a.mar", "file://host/etc"):
        with pytest.raises(ApiException):
            n(bad, config)
    # the operator's own start-up models may live anywhere
    outside = make_noop_archive(tmp_path / "elsewhere")
    assert n(str(outside), config, trusted=True).value == str(outside)
    assert n(str(outside), ServerConfig()).value == str(outside)  # no store: absolute paths are the way
