"""Issue 22 against a real ``mmsctl serve``: a lying archive header, numbers out of range, and register
``url`` values that name the model store itself or lead out of it through a symlink."""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from tests.archive.hostile import GIB, gnu_header, hostile_tgz
from tests.support.error_bodies import error_text, is_error_body
from tests.support.mmsctl_server import ServerInfo, make_noop_archive, running_mmsctl_server

#: The server's peak RSS after the register (about 50 MB here; issue 22 saw 3.25 GB).
PEAK_MIB = 300


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder beside the model store: a model, an archive of it, and a secret file."""
    root = tmp_path_factory.mktemp("outside").resolve()
    noop = make_noop_archive(root / "noop")
    with zipfile.ZipFile(root / "noop.mar", "w") as zf:
        for path in sorted(noop.rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(noop).as_posix())
    (root / "secret.py").write_text("def handle(data, context):\n    return ['secret']\n")
    return root


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, outside: Path) -> Path:
    store = tmp_path_factory.mktemp("store").resolve()
    make_noop_archive(store / "noop")
    (store / "escape").symlink_to(outside / "noop")           # a folder model outside
    (store / "escape.mar").symlink_to(outside / "noop.mar")   # an archive outside
    (store / "alias").symlink_to(store / "noop")              # inside: fine
    linked = make_noop_archive(store / "linked")              # a model whose handler is a link out
    (linked / "noop_service.py").unlink()
    (linked / "noop_service.py").symlink_to(outside / "secret.py")
    return store


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory, store: Path) -> Iterator[ServerInfo]:
    with running_mmsctl_server(tmp_path_factory.mktemp("srv"), model_store=store, models={"noop": "noop"}) as info:
        yield info


def _register(srv: ServerInfo, url: str, **params: str) -> httpx.Response:
    return httpx.post(f"{srv.management_url}/models", params={"url": url, "initial_workers": "0", **params},
                      timeout=60)


def _refused(resp: httpx.Response, fragment: str, type_: str = "BadRequestException") -> str:
    assert resp.status_code == 400, resp.text
    body = resp.json()
    assert is_error_body(body) and (body["code"], body["type"]) == (400, type_), body
    assert fragment in error_text(body), body
    return error_text(body)


def _models(srv: ServerInfo) -> list[str]:
    return [m["modelName"] for m in httpx.get(f"{srv.management_url}/models", timeout=10).json()["models"]]


def _peak_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024


def test_a_gnu_long_name_claiming_1_gib_is_a_400_and_memory_stays_flat(srv: ServerInfo, store: Path) -> None:
    archive = hostile_tgz(store / "longname.tar.gz", gnu_header("././@LongLink", tarfile.GNUTYPE_LONGNAME, GIB), GIB)
    assert archive.stat().st_size < 2 * 1024 * 1024
    message = _refused(_register(srv, "longname.tar.gz", initial_workers="1"), "", "InvalidModelException")
    assert message == (f"{archive}: a GNU long-name header of 1073741824 bytes: over the 4 KiB cap on archive "
                       "headers (archive bomb?)")
    peak = _peak_rss_mib(srv.pid)
    assert peak < PEAK_MIB, f"server peak RSS {peak:.0f} MiB"
    assert _models(srv) == ["noop"]
    assert httpx.get(f"{srv.inference_url}/ping", timeout=10).status_code == 200


@pytest.mark.parametrize("params, fragment", [
    ({"response_timeout": "-5"}, "Parameter response_timeout must be positive and at most 86400 seconds, got '-5'"),
    ({"response_timeout": "0"}, "Parameter response_timeout must be positive"),
    ({"response_timeout": "-5s"}, "Parameter response_timeout must be positive"),
    ({"response_timeout": "86401s"}, "Parameter response_timeout must be positive and at most 86400 seconds"),
    ({"response_timeout": "s"}, "Parameter response_timeout must be an integer"),
    ({"batch_size": "0"}, "Parameter batch_size must be >= 1"),
    ({"max_batch_delay": "-1"}, "Parameter max_batch_delay must be >= 0"),
    ({"initial_workers": "-1"}, "Parameter initial_workers must be >= 0"),
])
def test_register_numbers_out_of_range_are_400s(srv: ServerInfo, params: dict[str, str], fragment: str) -> None:
    _refused(_register(srv, "noop", model_name="numbers", **params), fragment)
    assert _models(srv) == ["noop"]


@pytest.mark.parametrize("params, fragment", [
    ({"timeout": "-5", "synchronous": "true"}, "Parameter timeout must be >= 0, got -5."),
    ({"timeout": "3601", "synchronous": "true"}, "Parameter timeout must be <= 3600"),
    ({"min_worker": "-1"}, "Parameter min_worker must be >= 0"),
    ({"max_worker": "-1"}, "Parameter max_worker must be >= 0"),
])
def test_scale_numbers_out_of_range_are_400s(srv: ServerInfo, params: dict[str, str], fragment: str) -> None:
    before = httpx.get(f"{srv.management_url}/models/noop", timeout=10).json()
    _refused(httpx.put(f"{srv.management_url}/models/noop", params=params, timeout=30), fragment)
    after = httpx.get(f"{srv.management_url}/models/noop", timeout=10).json()
    assert (after["minWorkers"], after["maxWorkers"]) == (before["minWorkers"], before["maxWorkers"])


def test_the_model_store_itself_is_not_a_model(srv: ServerInfo, store: Path) -> None:
    for url in (".", "./", " . ", str(store), f"{store}/", f"file://{store}", "noop/.."):
        resp = _register(srv, url)
        if url == "noop/..":  # '..' is refused before anything is resolved (404, as MMS)
            assert resp.status_code == 404, resp.text
            continue
        _refused(resp, "it names the model store itself, not a model in it.")
    assert _models(srv) == ["noop"]


@pytest.mark.parametrize("url, fragment", [
    ("escape", "it leads outside the model store (a symlink)."),
    ("escape.mar", "it leads outside the model store (a symlink)."),
    ("escape/MAR-INF/../", "Relative path is not allowed"),
    ("linked", "noop_service.py in it is a symlink that leads outside the model store."),
])
def test_a_symlink_out_of_the_model_store_is_refused(srv: ServerInfo, store: Path, url: str, fragment: str) -> None:
    for form in (url, str(store / url)):
        resp = _register(srv, form, model_name="escaped", initial_workers="1")
        if fragment.startswith("Relative"):
            assert resp.status_code == 404 and fragment in resp.json()["message"], resp.text
        else:
            _refused(resp, fragment)
    assert _models(srv) == ["noop"]


def test_a_symlink_inside_the_model_store_registers(srv: ServerInfo, store: Path) -> None:
    resp = _register(srv, "alias", model_name="alias", initial_workers="1")
    assert resp.status_code == 200, resp.text
    try:
        assert httpx.post(f"{srv.inference_url}/predictions/alias", content=b"hi", timeout=30).text == "hi"
    finally:
        assert httpx.delete(f"{srv.management_url}/models/alias", timeout=30).status_code == 200
