"""Registering archives: bombs are a clear 400 at register, and the extraction cache is keyed by content."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from tests.support.bombs import zip_bomb
from tests.support.mmsctl_server import NOOP_HANDLER, ServerInfo, running_mmsctl_server

MANIFEST = ('{"specificationVersion": "1.0", "runtime": "python", '
            '"model": {"modelName": "versioned", "modelVersion": "1.0", "handler": "service:handle"}}')
HANDLER = 'def handle(data, context):\n    return None if data is None else ["{answer}"] * len(data)\n'


def _mar(path: Path, answer: str, extra_members: int = 0) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("MAR-INF/MANIFEST.json", MANIFEST)
        zf.writestr("service.py", HANDLER.format(answer=answer))
        for i in range(extra_members):
            zf.writestr(f"data/{i}.txt", NOOP_HANDLER)
    return path


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("store")


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory, store: Path) -> Iterator[ServerInfo]:
    with running_mmsctl_server(tmp_path_factory.mktemp("srv"), model_store=store,
                               extra_config={"max_archive_members": 250}) as info:
        yield info


def _register(srv: ServerInfo, url: str, workers: str = "1") -> httpx.Response:
    return httpx.post(f"{srv.management_url}/models", params={"url": url, "initial_workers": workers}, timeout=60)


def test_a_zip_bomb_is_a_400_at_register(srv: ServerInfo, store: Path) -> None:
    zip_bomb(store / "bomb.mar")
    resp = _register(srv, "bomb.mar")
    assert resp.status_code == 400, resp.text
    assert resp.json() == {"code": 400, "type": "InvalidModelException",
                           "message": f"{store / 'bomb.mar'}: compression ratio over 200:1 (archive bomb?)"}
    _mar(store / "many.mar", "many", extra_members=300)
    resp = _register(srv, "many.mar")
    assert resp.status_code == 400, resp.text
    assert "more than 250 members (max_archive_members" in resp.json()["message"]
    assert httpx.get(f"{srv.inference_url}/ping", timeout=10).status_code == 200
    assert httpx.get(f"{srv.management_url}/models", timeout=10).json()["models"] == []


def test_a_replaced_archive_with_the_same_size_and_mtime_serves_its_new_code(srv: ServerInfo, store: Path) -> None:
    archive = _mar(store / "versioned.mar", "v1")
    stamp = archive.stat()
    assert _register(srv, "versioned.mar").status_code == 200
    assert httpx.post(f"{srv.inference_url}/predictions/versioned", content=b"x", timeout=30).text == "v1"
    assert httpx.delete(f"{srv.management_url}/models/versioned", timeout=30).status_code == 200

    _mar(archive, "v2")  # same length, other code
    os.utime(archive, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert (archive.stat().st_size, archive.stat().st_mtime_ns) == (stamp.st_size, stamp.st_mtime_ns)
    assert _register(srv, "versioned.mar").status_code == 200
    assert httpx.post(f"{srv.inference_url}/predictions/versioned", content=b"x", timeout=30).text == "v2"
    assert httpx.delete(f"{srv.management_url}/models/versioned", timeout=30).status_code == 200


def test_json_nested_too_deep_is_a_400_not_a_crash(srv: ServerInfo, store: Path) -> None:
    """``[[[[...`` makes Python's JSON parser raise RecursionError: in a manifest, a register body, a prediction."""
    from tests.support.mmsctl_server import make_noop_archive

    deep = "[" * 100_000
    with zipfile.ZipFile(store / "deep.mar", "w") as zf:
        zf.writestr("MAR-INF/MANIFEST.json", deep)
        zf.writestr("service.py", HANDLER.format(answer="never"))
    resp = _register(srv, "deep.mar")
    assert resp.status_code == 400 and resp.json()["type"] == "InvalidModelException", resp.text
    assert "not valid JSON" in resp.json()["message"]
    resp = httpx.post(f"{srv.management_url}/models", content=deep, headers={"Content-Type": "application/json"},
                      timeout=30)
    assert resp.status_code == 400 and resp.json()["message"] == "Invalid JSON body."
    make_noop_archive(store / "echo", name="echo")
    assert _register(srv, "echo").status_code == 200
    try:
        resp = httpx.post(f"{srv.inference_url}/predictions/echo", content=deep,
                          headers={"Content-Type": "application/json"}, timeout=30)
        assert resp.status_code == 200 and resp.text == deep  # not JSON the handler can have: the raw body
    finally:
        httpx.delete(f"{srv.management_url}/models/echo", timeout=30)
