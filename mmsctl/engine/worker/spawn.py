"""How a worker process is started: its command line, its environment, and a spawn Ctrl+C cannot interrupt.

Both parent faces (:mod:`mmsctl.engine.worker.parent`) start the child the same way.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

from mmsctl.engine.memory import MEMORY_VAR
from mmsctl.engine.spec import ServiceSpec

__all__ = ["READ_BUFFER", "STDOUT", "command", "sigint_blocked", "worker_env"]

#: How much of an answer the event loop buffers before it stops reading (big batches, few wake-ups).
READ_BUFFER = 2**26
#: A worker's stdout goes onto stderr (stdin is closed): a handler's prints never mix with
#: answers on the parent's stdout (``predict -o jsonl``), and land in the server's log.
STDOUT = 2


def worker_env(threads: int, extra: Optional[dict[str, str]] = None,
               spec: Optional[ServiceSpec] = None) -> dict[str, str]:
    """The worker's environment: ours, with *threads* OpenMP/MKL threads, unbuffered output, *extra*
    (the server's limits for handlers, such as ``MMSCTL_MAX_IMAGE_PIXELS`` and ``MMSCTL_MAX_MODEL_MEMORY``),
    the network memory limit (:mod:`mmsctl.engine.memory`; the ``max_model_memory`` setting where *extra*
    has none) and the kernel set chosen for *spec*'s model (``MXNET_MKLDNN_ENABLED``, read once when the
    MXNet library loads: :mod:`mmsctl.engine.kernels` measures it once per model and machine, so this may
    take seconds).

    Raises:
        ConfigError: the ``max_model_memory`` setting is not a number of bytes.
    """
    env = dict(os.environ)
    env.update(extra or {})
    if not (env.get(MEMORY_VAR, "").strip().isdigit() and int(env[MEMORY_VAR]) > 0):
        from mmsctl.config import max_model_memory

        env[MEMORY_VAR] = str(max_model_memory())
    if spec is not None:
        from mmsctl.engine.kernels import kernel_env

        env.update(kernel_env(Path(spec.root), threads=max(1, threads), gpu=spec.gpu_id, model=spec.model_name,
                              max_memory=int(env[MEMORY_VAR]), handler=spec.chosen_handler))
    env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(max(1, threads))
    if env.get("MXNET_MKLDNN_ENABLED") == "0":  # else every bind logs a storage-fallback warning
        env.setdefault("MXNET_STORAGE_FALLBACK_LOG_VERBOSE", "0")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def command(fd: int) -> list[str]:
    """``python -m mmsctl.engine.worker FD``: the package's ``__main__`` runs :func:`~mmsctl.engine.worker.child.main`."""
    return [sys.executable, "-m", "mmsctl.engine.worker", str(fd)]


@contextmanager
def sigint_blocked() -> Iterator[None]:
    """Spawn with SIGINT blocked: the mask survives exec, so a Ctrl+C that reaches the whole process
    group while a worker is still importing cannot interrupt it (the child ignores SIGINT, then
    unblocks it). Here a Ctrl+C waits until the spawn is done; none is lost."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - not POSIX
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
