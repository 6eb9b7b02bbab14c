"""Run a real TorchServe 0.12 (from ``.venv-ts``) on loopback for interop tests.

Usage::

    from tests.support.torchserve import build_noop_ts_mar, running_torchserve, ts_skip_reason

    store = tmp_path / "store"
    build_noop_ts_mar(store, "noop")
    with running_torchserve(tmp_path / "ts", model_store=store, models={"noop": "noop.mar"}) as ts:
        wait_for_prediction(ts, "noop", headers=ts.inference_headers())

Token authorisation is on by default, as in TorchServe itself: the keys are read
from ``key_file.json`` in the run folder (``ts.keys``, ``ts.key_file``);
``disable_token_authorization=True``, ``enable_model_api=True`` and
``metrics_mode="prometheus"`` change the config. Mark tests
``@pytest.mark.interop`` and ``@pytest.mark.xdist_group("mms")``; the generic
helpers in ``tests.support.refserver`` (also importable from ``tests.support.mms``:
``predict``, ``describe``, ``wait_for_workers``, ``register_model`` …) take
``headers=`` for the bearer token.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Iterator, Optional

from tests.support._proc import http_request
from tests.support.paths import TS_VENV
from tests.support.refserver import ECHO_HANDLER_SOURCE, Launcher, RefServerInstance, archive_handler, java, serving

__all__ = [
    "TorchServeInstance",
    "TS_NOOP_HANDLER_SOURCE",
    "build_noop_ts_mar",
    "running_torchserve",
    "ts_skip_reason",
]

TS_BIN = TS_VENV / "bin" / "torchserve"
TS_ARCHIVER_BIN = TS_VENV / "bin" / "torch-model-archiver"
TORCHSERVE = Launcher("TorchServe", TS_BIN, "ts")

# Module-level ``handle`` (TorchServe's function entry point); echoes each body back.
TS_NOOP_HANDLER_SOURCE = ECHO_HANDLER_SOURCE


def ts_skip_reason() -> Optional[str]:
    """Why real TorchServe cannot run here (None when it can)."""
    if not TS_BIN.exists():
        return f"TorchServe 0.12 not installed: {TS_BIN} is missing (run `make reference-servers`)"
    if not TS_ARCHIVER_BIN.exists():
        return f"torch-model-archiver not installed: {TS_ARCHIVER_BIN} is missing"
    if java() is None:
        return "TorchServe needs Java: no `java` on PATH and no JAVA_HOME"
    return None


@dataclass
class TorchServeInstance(RefServerInstance):
    """A running TorchServe: addresses, files, and its API keys (empty when auth is off)."""

    LOG_NAMES: ClassVar[tuple[str, ...]] = ("ts_log.log", "model_log.log")

    metrics_url: str = ""
    key_file: Optional[Path] = None
    keys: dict[str, str] = field(default_factory=dict)

    def inference_headers(self) -> dict[str, str]:
        key = self.keys.get("inference")
        return {"Authorization": f"Bearer {key}"} if key else {}

    def management_headers(self) -> dict[str, str]:
        key = self.keys.get("management")
        return {"Authorization": f"Bearer {key}"} if key else {}


def build_noop_ts_mar(
    export_dir: Path, name: str = "noop", *, version: str = "1.0", handler_source: str = TS_NOOP_HANDLER_SOURCE
) -> Path:
    """Archive the echo handler with ``torch-model-archiver``; returns the ``.mar`` path."""
    return archive_handler(
        export_dir, name, handler_source, "noop_handler.py",
        lambda handler: [
            str(TS_ARCHIVER_BIN),
            "--model-name", name,
            "--version", version,
            "--handler", str(handler),
            "--export-path", str(export_dir),
            "--force",
        ],
        timeout=120,
    )


def read_keys(key_file: Path) -> dict[str, str]:
    """``{"management": …, "inference": …, "API": …}`` from TorchServe's key_file.json."""
    data = json.loads(key_file.read_text())
    return {kind: str(entry.get("key")) for kind, entry in data.items() if isinstance(entry, dict) and entry.get("key")}


@contextmanager
def running_torchserve(
    tmp_dir: Path,
    *,
    model_store: Path,
    models: Optional[dict[str, str]] = None,
    workers: int = 1,
    disable_token_authorization: bool = False,
    enable_model_api: bool = False,
    metrics_mode: Optional[str] = None,
    extra_config: Optional[dict[str, Any]] = None,
    start_timeout: float = 120.0,
) -> Iterator[TorchServeInstance]:
    """Start real TorchServe on free loopback ports and stop it afterwards, whatever happens.

    ``--start`` exits 0 even when a port is taken, so readiness is a real poll of
    ``/ping`` (with the inference key when auth is on).
    """
    reason = ts_skip_reason()
    if reason:
        raise RuntimeError(reason)
    tmp_dir.mkdir(parents=True, exist_ok=True)
    model_store.mkdir(parents=True, exist_ok=True)
    log_dir = tmp_dir / "logs"
    log_dir.mkdir(exist_ok=True)
    key_file = tmp_dir / "key_file.json"

    def prepare(ports: list[int]) -> tuple[list[str], TorchServeInstance]:
        # gRPC too: its default 7070/7071 clash between runs
        inference_port, management_port, metrics_port, grpc_inference, grpc_management = ports
        props: dict[str, Any] = {
            "inference_address": f"http://127.0.0.1:{inference_port}",
            "management_address": f"http://127.0.0.1:{management_port}",
            "metrics_address": f"http://127.0.0.1:{metrics_port}",
            "grpc_inference_address": "127.0.0.1",
            "grpc_management_address": "127.0.0.1",
            "grpc_inference_port": grpc_inference,
            "grpc_management_port": grpc_management,
            "model_store": str(model_store),
            "default_workers_per_model": workers,
            "default_response_timeout": 120,
            "disable_token_authorization": str(disable_token_authorization).lower(),
            "enable_model_api": str(enable_model_api).lower(),
            "install_py_dep_per_model": "false",
        }
        if metrics_mode:
            props["metrics_mode"] = metrics_mode
        props.update(extra_config or {})
        config = tmp_dir / "config.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        key_file.unlink(missing_ok=True)
        cmd = [str(TS_BIN), "--start", "--foreground", "--ncs", "--ts-config", str(config)]
        if models:
            cmd += ["--models", *(f"{name}={where}" for name, where in models.items())]
        instance = TorchServeInstance(
            inference_url=f"http://127.0.0.1:{inference_port}",
            management_url=f"http://127.0.0.1:{management_port}",
            metrics_url=f"http://127.0.0.1:{metrics_port}",
            model_store=model_store,
            tmp_dir=tmp_dir,
            pid=0,
            log_dir=log_dir,
        )
        return cmd, instance

    def ready(instance: TorchServeInstance) -> bool:
        if not disable_token_authorization:
            if not key_file.exists():
                return False
            instance.key_file = key_file
            instance.keys = read_keys(key_file)
        reply = http_request("GET", instance.inference_url + "/ping", headers=instance.inference_headers(), timeout=2)
        return reply.status == 200

    with serving(TORCHSERVE, port_count=5, prepare=prepare, ready=ready, start_timeout=start_timeout) as instance:
        yield instance


if __name__ == "__main__":  # a manual smoke run: python -m tests.support.torchserve
    import sys
    import tempfile

    from tests.support.refserver import wait_for_prediction

    work = Path(tempfile.mkdtemp(prefix="ts-smoke-"))
    build_noop_ts_mar(work / "store")
    with running_torchserve(work / "run", model_store=work / "store", models={"noop": "noop.mar"}) as ts:
        print(ts.keys, file=sys.stderr)
        print(wait_for_prediction(ts, "noop", b"hello", headers=ts.inference_headers()), file=sys.stderr)
