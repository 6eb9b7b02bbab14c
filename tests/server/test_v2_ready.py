"""``GET /v2/health/ready`` on real ``mmsctl serve`` processes, as a fleet's load balancer checks it: 503 until every
model the server starts with has a READY worker, then 200 whatever those models are (one check for a rollout's old
and new model sets), and a model registered later never makes a serving member unready (the balancer would have
the group replace it, by a member without that model)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator, Optional

import httpx
import pytest

from mmsctl.cloud.instance.server_image import READY_PATH
from tests.support.mmsctl_server import free_port, make_handler_archive, make_noop_archive, running_mmsctl_server
from tests.support._proc import stop_process_group
from tests.support.signals import popen
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
#: A model whose workers load only once the file named GATE exists (at most 60 s): a start-up model not ready yet.
GATED_HANDLER = '''
import os, time

def handle(data, context):
    if data is None:
        for _ in range(1200):
            if os.path.exists(GATE):
                break
            time.sleep(0.05)
        return None
    return [row.get("body") for row in data]
'''

#: A model whose workers never finish loading (in any test's time).
STUCK_HANDLER = '''
import time

def handle(data, context):
    if data is None:
        for _ in range(600):
            time.sleep(1)
    return data
'''


def _ready(url: str) -> Optional[httpx.Response]:
    try:
        return httpx.get(url + READY_PATH, timeout=5)  # no token: a load balancer has none
    except httpx.TransportError:
        return None  # not listening yet


@pytest.fixture
def gated_server(tmp_path: Path) -> Iterator[tuple[str, str, Path, "subprocess.Popen[bytes]"]]:
    """``python -m mmsctl.server`` with start-up models ``gated`` and ``noop``, not waited for: (inference URL,
    management URL, the gate file that lets ``gated`` load, the process)."""
    from mmsctl.server.config import ServerConfig

    gate = tmp_path / "gate"
    store = tmp_path / "store"
    make_handler_archive(store / "gated", GATED_HANDLER.replace("GATE", repr(str(gate))), name="gated")
    make_noop_archive(store / "noop")
    make_handler_archive(store / "stuck", STUCK_HANDLER, name="stuck")
    ports = [free_port() for _ in range(3)]
    config = ServerConfig(inference_address=f"http://127.0.0.1:{ports[0]}",
                          management_address=f"http://127.0.0.1:{ports[1]}",
                          metrics_address=f"http://127.0.0.1:{ports[2]}", model_store=str(store),
                          load_models=["gated=gated", "noop=noop"], default_workers_per_model=1,
                          name=f"gated-{ports[0]}")
    config_file = tmp_path / "config.json"
    config_file.write_text(config.to_json())
    env = {**os.environ, "MMSCTL_STATE_DIR": str(tmp_path / "state"),
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with open(tmp_path / "server.log", "ab") as log:
        proc = popen([sys.executable, "-m", "mmsctl.server", str(config_file)], stdout=log,
                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=str(tmp_path),
                     start_new_session=True)
    try:
        yield f"http://127.0.0.1:{ports[0]}", f"http://127.0.0.1:{ports[1]}", gate, proc
    finally:
        stop_process_group(proc)  # the server and its workers (one never finishes loading)


def test_ready_means_every_start_up_model_has_a_ready_worker(
        gated_server: tuple[str, str, Path, "subprocess.Popen[bytes]"], tmp_path: Path) -> None:
    inference, management, gate, proc = gated_server
    first = wait_until(lambda: _ready(inference), timeout=60, what="the server's inference API answering",
                       alive=lambda: None if proc.poll() is None else "the server exited")
    # The APIs listen while the start-up models load: the balancer sees 503 until `gated` has a READY worker.
    assert first.status_code == 503, first.text
    assert "gated" in first.json()["error"]
    gate.write_text("open")
    wait_until(lambda: (r := _ready(inference)) is not None and r.status_code == 200, timeout=60,
               what="/v2/health/ready answering 200 once gated's worker is READY")
    assert _ready(inference).json() == {"ready": True}  # type: ignore[union-attr]

    # A second server with another model set answers the same path the same way: one check for both groups.
    make_noop_archive(tmp_path / "other", name="other")
    with running_mmsctl_server(tmp_path / "srv", models={"other": str(tmp_path / "other")}) as other:
        answer = _ready(other.inference_url)
        assert answer is not None and answer.status_code == 200 and answer.json() == {"ready": True}

    # A model registered later counts for nothing: one whose worker never loads, one with no workers at all.
    assert httpx.post(f"{management}/models", params={"url": "stuck", "initial_workers": "0"},
                      timeout=30).status_code == 200
    assert httpx.put(f"{management}/models/stuck", params={"min_worker": "1"}, timeout=10).status_code == 202
    assert httpx.get(f"{inference}/v2/models/stuck/ready", timeout=5).status_code == 503  # it is not ready...
    ready = _ready(inference)
    assert ready is not None and ready.status_code == 200, ready.text  # ...and the member still serves
