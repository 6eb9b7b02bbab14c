"""Run a real MMS 1.1.11 (from ``.venv-mms``) on loopback for interop tests.

Usage::

    from tests.support.mms import mms_skip_reason, running_mms, build_noop_mar

    @pytest.mark.interop
    @pytest.mark.xdist_group("mms")
    def test_something(tmp_path):
        if mms_skip_reason():
            pytest.skip(mms_skip_reason())
        store = tmp_path / "store"
        build_noop_mar(store, "noop")
        with running_mms(tmp_path / "mms", model_store=store, models={"noop": "noop.mar"}) as mms:
            wait_for_prediction(mms, "noop")
            ...

One MMS per test module is the efficient pattern: see ``tests/support/fixtures_mms.py``
(``mms_server`` fixture) and register models through the management API with
:func:`register_model`.

The REST helpers (``register_model``, ``predict``, ``wait_for_workers`` …) work
for TorchServe too; they live in ``tests.support.refserver`` and are re-exported here.

Every wait is bounded, the server is always stopped (``--stop`` with the same
``TMPDIR``, then the whole process group is killed), and each run gets a short
private ``TEMP`` so the workers' Unix sockets never clash with another run.
"""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterator, Optional

from tests.support._proc import http_request
from tests.support.paths import MMS_VENV
from tests.support.refserver import (
    ECHO_HANDLER_SOURCE,
    Launcher,
    RefServerInstance,
    archive_handler,
    describe,
    java,
    predict,
    register_model,
    scale_model,
    serving,
    unregister_model,
    wait_for_prediction,
    wait_for_workers,
)

__all__ = [
    "MmsInstance",
    "NOOP_HANDLER_SOURCE",
    "build_noop_mar",
    "describe",
    "mms_skip_reason",
    "predict",
    "register_model",
    "running_mms",
    "scale_model",
    "unregister_model",
    "wait_for_prediction",
    "wait_for_workers",
]

MMS_BIN = MMS_VENV / "bin" / "multi-model-server"
ARCHIVER_BIN = MMS_VENV / "bin" / "model-archiver"
MMS = Launcher("MMS", MMS_BIN, "mms")

NOOP_HANDLER_SOURCE = ECHO_HANDLER_SOURCE


def mms_skip_reason() -> Optional[str]:
    """Why real MMS cannot run here (None when it can)."""
    if not MMS_BIN.exists():
        return f"MMS 1.1.11 not installed: {MMS_BIN} is missing (run `make reference-servers`)"
    if java() is None:
        return "MMS needs Java: no `java` on PATH and no JAVA_HOME"
    return None


@dataclass
class MmsInstance(RefServerInstance):
    """A running MMS: where to reach it and where its files are."""

    LOG_NAMES: ClassVar[tuple[str, ...]] = ("mms_log.log", "model_log.log")


def build_noop_mar(export_dir: Path, name: str = "noop", *, handler_source: str = NOOP_HANDLER_SOURCE) -> Path:
    """Archive the echo handler with MMS's own ``model-archiver``; returns the ``.mar`` path."""
    return archive_handler(
        export_dir, name, handler_source, "noop_service.py",
        lambda handler: [
            str(ARCHIVER_BIN),
            "--model-name", name,
            "--model-path", str(handler.parent),
            "--handler", "noop_service:handle",
            "--runtime", "python",
            "--export-path", str(export_dir),
            "--force",
        ],
        timeout=60,
    )


def _write_config(path: Path, inference_port: int, management_port: int, workers: Optional[int],
                  extra: dict[str, Any]) -> None:
    props = {
        "inference_address": f"http://127.0.0.1:{inference_port}",
        "management_address": f"http://127.0.0.1:{management_port}",
        "default_response_timeout": "120",
        "unregister_model_timeout": "60",
        "async_logging": "true",
    }
    if workers is not None:
        props["default_workers_per_model"] = str(workers)
    props.update({k: str(v) for k, v in extra.items()})
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))


@contextmanager
def running_mms(
    tmp_dir: Path,
    *,
    model_store: Path,
    models: Optional[dict[str, str]] = None,
    workers: Optional[int] = 1,
    extra_config: Optional[dict[str, Any]] = None,
    start_timeout: float = 120.0,
) -> Iterator[MmsInstance]:
    """Start real MMS on free loopback ports and stop it afterwards, whatever happens.

    Args:
        tmp_dir: folder for config, logs and launcher output (created).
        model_store: the ``--model-store`` folder.
        models: ``{name: file-or-url}`` for ``--models``. Waiting for their workers or a first
            prediction is the caller's job (:func:`wait_for_prediction`).
        workers: ``default_workers_per_model`` (None: not set, as in MMS's own test config).
        extra_config: more ``config.properties`` keys.
        start_timeout: seconds to wait for ``/ping``.
    """
    reason = mms_skip_reason()
    if reason:
        raise RuntimeError(reason)
    tmp_dir.mkdir(parents=True, exist_ok=True)
    model_store.mkdir(parents=True, exist_ok=True)
    log_dir = tmp_dir / "logs"
    log_dir.mkdir(exist_ok=True)

    def prepare(ports: list[int]) -> tuple[list[str], MmsInstance]:
        inference_port, management_port = ports
        config = tmp_dir / "config.properties"
        _write_config(config, inference_port, management_port, workers, dict(extra_config or {}))
        cmd = [
            str(MMS_BIN), "--start", "--foreground",
            "--mms-config", str(config),
            "--model-store", str(model_store),
        ]
        if models:
            cmd += ["--models", *(f"{name}={where}" for name, where in models.items())]
        instance = MmsInstance(
            inference_url=f"http://127.0.0.1:{inference_port}",
            management_url=f"http://127.0.0.1:{management_port}",
            model_store=model_store,
            tmp_dir=tmp_dir,
            pid=0,
            log_dir=log_dir,
        )
        return cmd, instance

    with serving(MMS, port_count=2, prepare=prepare, ready=_pings, start_timeout=start_timeout) as instance:
        yield instance


def _pings(instance: MmsInstance) -> bool:
    reply = http_request("GET", instance.inference_url + "/ping", timeout=2)
    return reply.status == 200


if __name__ == "__main__":  # a manual smoke run: python -m tests.support.mms
    import tempfile

    work = Path(tempfile.mkdtemp(prefix="mms-smoke-"))
    mar = build_noop_mar(work / "store")
    with running_mms(work / "run", model_store=work / "store", models={"noop": mar.name}) as mms:
        print(json.dumps(wait_for_prediction(mms, "noop", b"hello").body.decode()), file=sys.stderr)
