"""The network memory bound on a real server: a SqueezeNet repacked to take 3000x3000 inputs is refused at
register with the figure and the setting, its workers never grow; a handler that allocates past its worker's
limit fails its load or its batch, and the server serves on."""

from __future__ import annotations

import json
import re
import threading
import zipfile
from pathlib import Path
from typing import Iterator

import httpx
import psutil
import pytest

from mmsctl.engine.memory import process_limit
from tests.support.error_bodies import error_text, is_error_body
from tests.support.mmsctl_server import ServerInfo, make_handler_archive, running_mmsctl_server
from tests.support.paths import SQUEEZENET_DIR

LIMIT = 1024**3  # max_model_memory of the server below: the worker's data limit is 3 GiB

GREEDY = '''
import os

def _take(mib):
    block = bytearray(mib * 1024 * 1024)
    block[::4096] = b"x" * len(block[::4096])
    return len(block)

if os.path.exists(os.path.join(os.path.dirname(__file__), "AT_LOAD")):
    _take(int(open(os.path.join(os.path.dirname(__file__), "AT_LOAD")).read()))

def handle(data, context):
    if data is None:
        return None
    return [str(_take(int(bytes(row.get("body")).decode()))) for row in data]
'''


def _huge_squeezenet(store: Path) -> Path:
    """The real SqueezeNet with ``data_shape`` [0, 3, 3000, 3000]: 27 M input elements, 6 GiB of network."""
    if not SQUEEZENET_DIR.is_dir():
        pytest.skip(f"needs the shared SqueezeNet checkpoint at {SQUEEZENET_DIR}")
    path = store / "huge.mar"
    signature = {"inputs": [{"data_name": "data_0", "data_shape": [0, 3, 3000, 3000]}]}
    manifest = {"specificationVersion": "1.0", "runtime": "python",
                "model": {"modelName": "huge", "modelVersion": "1.0", "handler": "mmsctl_vision_service:handle"}}
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("MAR-INF/MANIFEST.json", json.dumps(manifest))
        zf.writestr("signature.json", json.dumps(signature))
        for name in ("squeezenet_v1.1-symbol.json", "squeezenet_v1.1-0000.params", "synset.txt"):
            zf.write(SQUEEZENET_DIR / name, name)
    return path


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("store")


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory, store: Path) -> Iterator[ServerInfo]:
    make_handler_archive(store / "greedy", GREEDY, name="greedy")
    make_handler_archive(store / "greedy_load", GREEDY, name="greedy_load")
    (store / "greedy_load" / "AT_LOAD").write_text(str(process_limit(LIMIT) // 1024**2 + 256))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MMSCTL_MKLDNN", "auto")  # a kernel measurement would start once a worker is READY
        with running_mmsctl_server(tmp_path_factory.mktemp("srv"), model_store=store,
                                   extra_config={"max_model_memory": LIMIT}) as info:
            yield info


class _PeakMemory:
    """The highest resident-memory mark (``VmHWM``) of any process under the server, sampled while alive."""

    def __init__(self, pid: int) -> None:
        self.server = psutil.Process(pid)
        self.peak = 0
        self.seen: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():  # bounded: __exit__ sets _stop when the with-block ends; a daemon thread
            try:
                children = self.server.children(recursive=True)
            except psutil.Error:  # one went away while listed
                children = []
            for child in children:
                try:
                    with open(f"/proc/{child.pid}/status", encoding="ascii") as fh:
                        hwm = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmHWM:"))
                except (OSError, StopIteration, ValueError):
                    continue
                self.seen.add(child.pid)
                self.peak = max(self.peak, hwm)
            self._stop.wait(0.02)

    def __enter__(self) -> "_PeakMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def test_a_network_over_the_limit_is_refused_at_register(srv: ServerInfo, store: Path) -> None:
    huge = _huge_squeezenet(store)
    with _PeakMemory(srv.pid) as memory:
        resp = httpx.post(f"{srv.management_url}/models", params={"url": huge.name, "initial_workers": "1"},
                          timeout=300)
    assert 400 <= resp.status_code < 600, resp.text
    body = resp.json()
    assert is_error_body(body) and body["code"] == resp.status_code
    needed = re.search(r"needs (\d+) bytes", error_text(body))
    assert needed and int(needed.group(1)) > LIMIT, body
    assert f"limit of {LIMIT} bytes" in error_text(body) and "max_model_memory" in error_text(body)
    assert memory.seen and memory.peak < LIMIT, (memory.peak, memory.seen)  # the children ran, none grew
    assert "in the background" not in srv.log_text()  # no worker was READY: its kernels are never measured
    assert httpx.get(f"{srv.management_url}/models/huge", timeout=10).status_code == 404
    assert httpx.get(f"{srv.inference_url}/ping", timeout=10).status_code == 200


def test_a_batch_that_allocates_past_the_worker_limit_fails_alone(srv: ServerInfo) -> None:
    m, inf = srv.management_url, srv.inference_url
    assert httpx.post(f"{m}/models", params={"url": "greedy", "initial_workers": "1"}, timeout=60).status_code == 200
    try:
        pid = httpx.get(f"{m}/models/greedy", timeout=10).json()["workers"][0]["pid"]
        over = process_limit(LIMIT) // 1024**2 + 256
        resp = httpx.post(f"{inf}/predictions/greedy", content=str(over).encode(), timeout=60)
        assert resp.status_code == 507, resp.text
        assert resp.json()["type"] == "InternalServerException"
        resp = httpx.post(f"{inf}/predictions/greedy", content=b"16", timeout=60)
        assert resp.status_code == 200 and resp.text == str(16 * 2**20)
        assert httpx.get(f"{m}/models/greedy", timeout=10).json()["workers"][0]["pid"] == pid  # the same worker
    finally:
        httpx.delete(f"{m}/models/greedy", timeout=30)


def test_a_load_that_allocates_past_the_worker_limit_fails_the_register(srv: ServerInfo) -> None:
    resp = httpx.post(f"{srv.management_url}/models", params={"url": "greedy_load", "initial_workers": "1"},
                      timeout=60)
    assert resp.status_code == 507, resp.text  # out of memory while loading: MMS's status
    assert resp.json()["type"] == "InternalServerException" and "MemoryError" in error_text(resp.json())
    assert httpx.get(f"{srv.inference_url}/ping", timeout=10).status_code == 200
