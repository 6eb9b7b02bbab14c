"""Start a real mmsctl model server process for a test, on free loopback ports.

    with running_mmsctl_server(tmp_path, models={"noop": str(noop_dir)}) as srv:
        httpx.post(f"{srv.inference_url}/predictions/noop", content=b"hi")

The server runs as ``python -m mmsctl.server`` with its state folder under
*tmp_dir* and is stopped (SIGTERM, then SIGKILL) on exit. Also here: a tiny
no-op handler archive for tests that need a model but not mxnet.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional

# Below the kernel's ephemeral range (32768+): a port taken from it can be handed to another test's outgoing
# connection between the pick and the server's bind ("address already in use", seen under the full suite).
from tests.support._proc import free_port, free_ports
from tests.support.signals import popen
from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from mmsctl.server.config import ServerConfig

__all__ = ["ServerInfo", "ServerStartError", "echo_and_squeezenet_server", "free_port", "make_handler_archive",
           "make_noop_archive", "running_mmsctl_server"]

REPO = Path(__file__).resolve().parents[2]


class ServerStartError(RuntimeError):
    """The server did not become ready; the message carries its reason and log tail."""


@dataclass
class ServerInfo:
    inference_url: str
    management_url: str
    metrics_url: str
    pid: int
    state_dir: Path
    instance_dir: Path
    log_file: Path
    process: "subprocess.Popen[bytes]"

    def log_text(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")
        except OSError:
            return ""


NOOP_HANDLER = '''
import json, os, time

def handle(data, context):
    """Echo each request's body; "sleep:N" sleeps N seconds, "crash" kills the worker, "pid" answers the pid,
    "spam:N" prints N lines of 100 characters to stdout."""
    if data is None:
        return None
    out = []
    for row in data:
        body = row.get("body") or row.get("data") or b""
        if isinstance(body, (bytes, bytearray)):
            body = bytes(body).decode("utf-8", "replace")
        if isinstance(body, str) and body.startswith("sleep:"):
            time.sleep(float(body[6:]))
        if body == "crash":
            os._exit(3)
        if body == "pid":
            body = str(os.getpid())
        if isinstance(body, str) and body.startswith("spam:"):
            for i in range(int(body[5:])):
                print(f"{i:08d} " + "x" * 91, flush=False)
        out.append(body)
    return out
'''

FAILING_HANDLER = '''
raise RuntimeError("this handler cannot load: missing weights")

def handle(data, context):
    return data
'''


def make_noop_archive(folder: Path, name: str = "noop", *, failing: bool = False) -> Path:
    """An extracted (no-archive) model folder with MAR-INF/MANIFEST.json and a tiny handler."""
    return make_handler_archive(folder, FAILING_HANDLER if failing else NOOP_HANDLER, name)


def make_handler_archive(folder: Path, source: str, name: str = "noop") -> Path:
    """An extracted (no-archive) model folder whose handler module (``noop_service:handle``) is *source*."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "MAR-INF").mkdir(exist_ok=True)
    module = "noop_service"
    (folder / f"{module}.py").write_text(source)
    manifest = {
        "specificationVersion": "1.0",
        "implementationVersion": "1.0",
        "description": "no-op model for tests",
        "modelServerVersion": "1.0",
        "runtime": "python",
        "model": {"modelName": name, "description": "echo", "modelVersion": "1.0",
                  "handler": f"{module}:handle"},
    }
    (folder / "MAR-INF" / "MANIFEST.json").write_text(json.dumps(manifest, indent=2))
    return folder


def _stop(proc: "subprocess.Popen[bytes]", timeout: float) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)


@contextmanager
def running_mmsctl_server(
    tmp_dir: Path,
    *,
    model_store: Optional[Path] = None,
    models: Optional[dict[str, str]] = None,
    workers: int = 1,
    token: Optional[str] = None,
    extra_config: Optional[dict] = None,
    properties: Optional[dict[str, str]] = None,
    environ: Optional[dict[str, Optional[str]]] = None,
    start_timeout: float = 120.0,
    stop_timeout: float = 30.0,
) -> Iterator[ServerInfo]:
    """Run ``python -m mmsctl.server`` until the block ends; yield where it listens.

    Args:
        tmp_dir: a private folder (state, log and config go under it).
        model_store: the server's model store.
        models: start-up models, name -> location (a folder, .mar, zoo name or a file in the store).
        workers: workers per start-up model (``default_workers_per_model``).
        token: if set, both APIs require ``Authorization: Bearer <token>``.
        extra_config: more ServerConfig fields (e.g. ``{"job_queue_size": 5}``).
        properties: an MMS ``config.properties`` instead (its keys; the addresses are added): the server is
            configured from that file as ``serve start --config FILE --model-store STORE`` does, and *models*,
            *workers* and *extra_config* are not used.
        environ: the server's environment, changed: a value is set, None removes the variable.
    """
    for attempt in range(_START_ATTEMPTS):
        try:
            proc, info = _start(Path(tmp_dir), model_store, models, workers, token, extra_config, start_timeout,
                                properties, environ)
        except _PortTaken:
            if attempt == _START_ATTEMPTS - 1:
                raise
            continue
        break
    try:
        yield info
    finally:
        _stop(proc, stop_timeout)


def _from_properties(path: Path, ports: list[int], properties: dict[str, str], model_store: Optional[Path],
                     name: str) -> "ServerConfig":
    """The settings ``serve start --config PATH --model-store STORE --name NAME`` makes of *properties*."""
    from mmsctl.server.control import build_config

    addresses = {f"{api}_address": f"http://127.0.0.1:{port}"
                 for api, port in zip(("inference", "management", "metrics"), ports)}
    path.write_text("".join(f"{key}={value}\n" for key, value in {**addresses, **properties}.items()))
    return build_config(models=[], model_store=model_store, config_file=path, inference_address=None,
                        management_address=None, metrics_address=None, workers=None, token_file=None, name=name)


@contextmanager
def echo_and_squeezenet_server(tmp_path_factory: Any) -> Iterator[ServerInfo]:
    """A server with the no-op ``echo`` model and the real SqueezeNet of ../shared as ``squeezenet`` (the v2
    clients' and the docs' examples)."""
    from mmsctl.archive import create_archive
    from tests.support.paths import SQUEEZENET_DIR, require_shared

    store = tmp_path_factory.mktemp("store")
    make_noop_archive(store / "echo", name="echo")
    create_archive(require_shared(SQUEEZENET_DIR), model_name="squeezenet", export_path=store)
    with running_mmsctl_server(tmp_path_factory.mktemp("srv"), model_store=store,
                               models={"echo": "echo", "squeezenet": "squeezenet.mar"}) as info:
        yield info


#: Starts tried when a port picked turns out taken by the time the server binds it.
_START_ATTEMPTS = 3


class _PortTaken(ServerStartError):
    """A port picked for the server was taken before it could listen on it: worth another pick."""


def _start(tmp_dir: Path, model_store: Optional[Path], models: Optional[dict[str, str]], workers: int,
           token: Optional[str], extra_config: Optional[dict], start_timeout: float,
           properties: Optional[dict[str, str]] = None, environ: Optional[dict[str, Optional[str]]] = None,
           ) -> "tuple[subprocess.Popen[bytes], ServerInfo]":
    """Start the server on freshly picked ports and wait until it is ready."""
    from mmsctl.server.config import ServerConfig

    tmp_dir = Path(tmp_dir)
    state_dir = tmp_dir / "mmsctl-state"
    ports = free_ports(3, pick=free_port)
    name = f"test-{ports[0]}"
    settings = dict(extra_config or {})
    token_file = None
    tmp_dir.mkdir(parents=True, exist_ok=True)
    if token:
        token_file = tmp_dir / f"token-{ports[0]}"
        token_file.write_text(token)
    if properties is not None:
        config = _from_properties(tmp_dir / f"config-{ports[0]}.properties", ports, properties, model_store, name)
    else:
        config = ServerConfig(
            inference_address=f"http://127.0.0.1:{ports[0]}",
            management_address=f"http://127.0.0.1:{ports[1]}",
            metrics_address=f"http://127.0.0.1:{ports[2]}",
            model_store=str(model_store) if model_store else None,
            load_models=[f"{k}={v}" for k, v in (models or {}).items()],
            default_workers_per_model=workers,
            token_file=str(token_file) if token_file else None,
            name=name,
            **settings,
        )
    instance_dir = state_dir / "instances" / name
    instance_dir.mkdir(parents=True, exist_ok=True)
    config_file = instance_dir / "config.json"
    config_file.write_text(config.to_json())
    log_file = instance_dir / "server.log"
    env = dict(os.environ)
    env["MMSCTL_STATE_DIR"] = str(state_dir)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    for key, value in (environ or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    with open(log_file, "ab") as log:
        proc = popen(
            [sys.executable, "-m", "mmsctl.server", str(config_file)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env, cwd=str(tmp_dir), start_new_session=True,
        )
    info = ServerInfo(
        inference_url=f"http://127.0.0.1:{ports[0]}",
        management_url=f"http://127.0.0.1:{ports[1]}",
        metrics_url=f"http://127.0.0.1:{ports[2]}",
        pid=proc.pid, state_dir=state_dir, instance_dir=instance_dir, log_file=log_file, process=proc,
    )
    state: dict[str, object] = {}

    def ready() -> bool:
        nonlocal state
        try:
            state = json.loads((instance_dir / "state.json").read_text())
        except (OSError, ValueError):
            state = {}
        return state.get("status") == "ready" and state.get("pid") == proc.pid

    def failed() -> Optional[str]:
        return "failed" if state.get("status") == "failed" or proc.poll() is not None else None

    try:
        wait_until(ready, timeout=start_timeout, what="mmsctl server ready", interval=0.05, alive=failed)
    except TimeoutError:
        _stop(proc, 5)
        raise ServerStartError(
            f"mmsctl server not ready after {start_timeout} s\n{info.log_text()[-3000:]}") from None
    except RuntimeError:  # failed(): the server said so, or exited
        _stop(proc, 5)
        error = str(state.get("error"))
        kind = _PortTaken if "address already in use" in error else ServerStartError
        raise kind(f"mmsctl server failed to start: {error}\n{info.log_text()[-3000:]}") from None
    return proc, info
