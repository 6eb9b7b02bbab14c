"""``serve``: SageMaker's environment as the embedded server's settings, and the server, in this process.

What SageMaker gives the container (:mod:`mmsctl.cloud.sagemaker.contract`) becomes a :class:`ServerConfig`:

* the model: ``/opt/ml/model`` (``MMSCTL_SAGEMAKER_MODEL_DIR`` for a local run) as SageMaker extracted
  ``model.tar.gz`` into it: an archive's files (the manifest at the top, or under one folder, as
  ``archive create --archive-format tgz`` writes them), a checkpoint folder, or one ``.mar`` file. Served in
  place, never written to. Empty or missing: the model baked into the image (``lambda build``), if any;
* the inference API alone, on ``0.0.0.0`` at 8080 (``SAGEMAKER_BIND_TO_PORT``): ``/ping`` answers 503 until
  the model has a READY worker (SageMaker reads only the status code) and ``/invocations`` is answered on the
  lean path; no management or metrics API is bound, so nothing but inference is reachable;
* ``SAGEMAKER_MODEL_SERVER_WORKERS`` workers (one per CPU by default) and ``SAGEMAKER_MODEL_SERVER_TIMEOUT``
  seconds a batch (60, SageMaker's own invocation timeout), each with a ceiling;
* SIGTERM drains for 25 s at most (``MMSCTL_SAGEMAKER_DRAIN_TIMEOUT`` may shorten it), inside the 30 s SageMaker
  waits before SIGKILL: a request still running at the end is answered 503, its worker killed.

Logs go to stderr, which SageMaker sends to CloudWatch Logs (``/aws/sagemaker/Endpoints/NAME``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Mapping

from mmsctl.cloud.lambda_.env import IMAGE_MODEL_DIR
from mmsctl.cloud.sagemaker import contract
from mmsctl.errors import ConfigError, MmsError
from mmsctl.server.config import ServerConfig

__all__ = ["main", "model_location", "server_config"]

_ARCHIVES = (".mar", ".model", ".tar.gz", ".tgz")
#: SageMaker's own timeout of one invocation (seconds): the default time a batch may take.
_INVOCATION_TIMEOUT_S = 60


def _entries(folder: Path) -> list[Path]:
    try:
        return [e for e in folder.iterdir() if not e.name.startswith(".")]
    except OSError:  # missing, or not a folder
        return []


def model_location(folder: Path, *, baked: Path = Path(IMAGE_MODEL_DIR)) -> str:
    """What to serve from the model folder: the folder (an extracted archive or checkpoint), its one archive
    file, or the image's baked model when SageMaker gave none.

    Raises:
        ConfigError: no model anywhere.
    """
    entries = _entries(folder)
    if not entries:
        if _entries(baked):
            return str(baked)
        raise ConfigError(f"no model in {folder} (SageMaker extracts the model's ModelDataUrl there) and none "
                          f"baked into the image at {baked}")
    if len(entries) == 1 and entries[0].is_file() and entries[0].name.lower().endswith(_ARCHIVES):
        return str(entries[0])
    return str(folder)


def _number(environ: Mapping[str, str], name: str, default: int, ceiling: int) -> int:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 6 or not 1 <= int(raw) <= ceiling:
        raise ConfigError(f"{name} must be a whole number from 1 to {ceiling}, not {raw[:20]!r}")
    return int(raw)


def server_config(environ: Mapping[str, str]) -> ServerConfig:
    """The server SageMaker's environment asks for (checked: a bad value is a ConfigError naming it)."""
    port = _number(environ, contract.ENV_PORT, contract.PORT, 65535)
    host = environ.get(contract.ENV_HOST, "").strip() or "0.0.0.0"
    folder = Path(environ.get(contract.ENV_MODEL_DIR, "").strip() or contract.MODEL_DIR)
    workers = _number(environ, contract.ENV_WORKERS, min(os.cpu_count() or 1, contract.MAX_WORKERS),
                      contract.MAX_WORKERS)
    timeout = _number(environ, contract.ENV_TIMEOUT, _INVOCATION_TIMEOUT_S, contract.MAX_TIMEOUT_S)
    drain = _number(environ, contract.ENV_DRAIN, int(contract.DRAIN_S), int(contract.DRAIN_S))
    config = ServerConfig(
        inference_address=f"http://{host}:{port}", management_address="", metrics_address="",
        load_models=[model_location(folder)], default_workers_per_model=workers,
        default_response_timeout=timeout, strict_ping=True, drain_timeout=float(drain),
        name=f"sagemaker-{port}")
    if config.worker_limit is None and workers > config.workers_allowed:
        config.worker_limit = workers  # asked for explicitly: the memory-based default does not cap it
    return config.validate()


def main(argv: list[str]) -> int:
    """``python -m mmsctl.sagemaker serve``: run the server until SIGTERM; its exit code."""
    if argv != [contract.SERVE]:
        given = " ".join(argv) or "no argument"
        print(f"error: this image serves models: run it with `{contract.SERVE}` as SageMaker does (got {given})",
              file=sys.stderr)
        return 2
    try:
        config = server_config(os.environ)
    except MmsError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    from mmsctl.server.app import run_server

    return run_server(config)
