"""A start never waits for the kernel measurement: MXNet's default first, the measured set from the next worker on."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Optional

import httpx
import pytest

from tests.engine.helpers import build_tiny_checkpoint, handler_archive
from tests.engine.test_kernels import ENV_ECHO
from tests.support.mmsctl_server import running_mmsctl_server
from tests.support.waiting import wait_until

LINE = "tiny: measuring MKL-DNN vs MXNet kernels in the background; workers started from now on use the faster"


def _worker_pids(management_url: str) -> list[int]:
    body = httpx.get(f"{management_url}/models/tiny", timeout=10).json()
    body = body[0] if isinstance(body, list) else body
    return sorted(int(w["pid"]) for w in body["workers"] if w.get("pid"))


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def _choices(cache: Path) -> Optional[dict]:
    try:
        return json.loads((cache / "kernels" / "choices.json").read_text())
    except (OSError, ValueError):
        return None


def test_an_empty_cache_serves_at_once_and_a_later_worker_gets_the_measured_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "tiny"
    root.mkdir()
    build_tiny_checkpoint(root)
    handler_archive(root, {"env_echo.py": ENV_ECHO}, handler="env_echo:handle", model_name="tiny")
    cache = tmp_path / "cache"
    monkeypatch.setenv("MMSCTL_CACHE_DIR", str(cache))
    monkeypatch.setenv("MMSCTL_MKLDNN", "auto")
    monkeypatch.delenv("MXNET_MKLDNN_ENABLED", raising=False)
    # Hold the measurement's lock: the server must be READY and answer while it cannot have measured.
    (cache / "kernels").mkdir(parents=True)
    lock = open(cache / "kernels" / "choices.lock", "a")
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        with running_mmsctl_server(tmp_path / "srv", models={"tiny": str(root)}) as srv:
            answer = httpx.post(f"{srv.inference_url}/predictions/tiny", content=b"x", timeout=60)
            assert answer.status_code == 200, answer.text
            assert answer.json()["MXNET_MKLDNN_ENABLED"] is None  # MXNet's default: nothing was chosen
            assert _choices(cache) is None
            wait_until(lambda: LINE in srv.log_text(), timeout=30, what="the background measurement line")
            state = json.loads((srv.instance_dir / "state.json").read_text())
            assert state["notes"] == [LINE]  # what `serve start` prints under its summary
            (first,) = _worker_pids(srv.management_url)
            assert "MXNET_MKLDNN_ENABLED" not in _environ(first)

            fcntl.flock(lock, fcntl.LOCK_UN)
            wait_until(lambda: _choices(cache), timeout=120, what="the measured choice in the cache")
            (entry,) = _choices(cache).values()
            wait_until(lambda: "model tiny measured:" in srv.log_text(), timeout=30, what="the measured line")
            expected = "1" if entry["mkldnn"] else "0"
            if not entry["mkldnn"]:  # the running worker has MXNet's default (on): it is replaced
                wait_until(lambda: len(pids := _worker_pids(srv.management_url)) == 1 and pids != [first],
                           timeout=120, what="the worker replaced")
                (replaced,) = _worker_pids(srv.management_url)
                assert _environ(replaced)["MXNET_MKLDNN_ENABLED"] == expected
            before = set(_worker_pids(srv.management_url))
            resp = httpx.put(f"{srv.management_url}/models/tiny", params={"min_worker": "2", "synchronous": "true"},
                             timeout=120)
            assert resp.status_code == 200, resp.text
            (second,) = set(_worker_pids(srv.management_url)) - before
            assert _environ(second)["MXNET_MKLDNN_ENABLED"] == expected
            state = json.loads((srv.instance_dir / "state.json").read_text())
            assert state["served"] == {}  # a folder, not an archive: nothing for predict's warm path
            assert srv.log_text().count(LINE) == 1  # measured once, not again for the new worker
    finally:
        lock.close()
    assert os.path.exists(cache / "kernels" / "choices.json")
