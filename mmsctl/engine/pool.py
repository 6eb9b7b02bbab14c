"""Worker processes for ``mmsctl predict`` on many inputs: one model copy per CPU core.

MXNet runs a small convnet's forward pass on one core by default (it keeps the
other cores for its engine), and decoding images in Python adds to that core's
work. With one process per core, each with one OpenMP thread, every core decodes
and runs its own batches, the same way a server spreads requests over workers.

Each worker loads the model through :func:`~mmsctl.engine.service.load_service`,
so handlers see exactly what they see in-process and in the server. Batches go
out in order, several in flight, and answers come back in input order.
"""

from __future__ import annotations

import os
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Optional

from mmsctl.engine.protocol import RequestItem, ResponseItem
from mmsctl.errors import EngineError, HandlerError, MmsError

__all__ = ["POOL_MIN_INPUTS", "PoolSpec", "ServicePool", "choose_workers", "cpu_count"]

#: Batches queued per worker beyond the one it is running (keeps every core busy).
_AHEAD_PER_WORKER = 2
#: From this many inputs on, ``predict`` runs one worker per core by default: below it, the
#: extra model loads (~0.5 s of CPU each) cost more than the second core wins back.
POOL_MIN_INPUTS = 64


def cpu_count() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def choose_workers(requested: Optional[int], inputs: int, batch_size: int, *, gpu: Optional[int]) -> int:
    """How many processes run the model: 1 means in this process, no pool.

    An explicit ``--workers`` wins (but never more than there are batches); by default a
    run of :data:`POOL_MIN_INPUTS` or more inputs on the CPU gets one worker per core.
    A GPU run stays in this process.
    """
    batches = max(1, -(-inputs // max(1, batch_size)))
    if gpu is not None:  # one GPU: its own parallelism, one process
        return 1
    if requested is not None:
        return max(1, min(requested, batches))
    if inputs < POOL_MIN_INPUTS:
        return 1
    return max(1, min(cpu_count(), batches))


@dataclass(frozen=True)
class PoolSpec:
    """What a worker needs to load the model (plain values: it is pickled to each worker)."""

    root: str
    model_name: str
    handler: Optional[str]
    batch_size: int
    legacy: bool = False
    threads: int = 1


class _FolderModel:
    """The archive-like object load_service wants, rebuilt from a PoolSpec in the worker."""

    def __init__(self, spec: PoolSpec) -> None:
        from pathlib import Path

        self.root = Path(spec.root)
        self.model_name = spec.model_name
        self.handler = spec.handler
        self.manifest = _Legacy() if spec.legacy else None


class _Legacy:
    legacy = True

    def to_dict(self) -> None:
        return None


# -- in the worker process -------------------------------------------------------------------

_service: Any = None
_load_error: Optional[tuple[str, str, Optional[str]]] = None


def _init_worker(spec: PoolSpec) -> None:
    """Load the model once per worker; a failure is reported with the first batch."""
    global _service, _load_error
    threads = str(spec.threads)
    os.environ["OMP_NUM_THREADS"] = threads  # read when mxnet loads, so before the handler imports it
    os.environ["MKL_NUM_THREADS"] = threads
    try:
        from mmsctl.engine.service import load_service

        _service = load_service(_FolderModel(spec), model_name=spec.model_name,
                                batch_size=spec.batch_size, handler=spec.handler)
    except MmsError as exc:
        _load_error = (type(exc).__name__, exc.message, exc.hint)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises it
        _load_error = ("HandlerError", f"{type(exc).__name__}: {exc}", None)


def _run_batch(items: list[RequestItem]) -> tuple[Optional[list[ResponseItem]], Optional[tuple[str, ...]]]:
    """Answer one batch: (responses, None), or (None, load error), or responses + batch failure."""
    if _load_error is not None or _service is None:
        return None, _load_error or ("EngineError", "the worker has no model", None)
    responses = _service.handle(items)
    detail = _service.last_exception
    return responses, ((type(detail).__name__, str(detail)) if detail is not None else None)


# -- in mmsctl ------------------------------------------------------------------------------


class ServicePool:
    """*workers* processes each running the model; :meth:`map` answers batches in order.

    Example:
        >>> with ServicePool(spec, workers=2) as pool:
        ...     for responses in pool.map(batches_of_request_items):
        ...         ...
    """

    def __init__(self, spec: PoolSpec, *, workers: int) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self.spec = spec
        self.workers = workers
        #: "ExcType: message" of the last batch that failed as a whole in a worker.
        self.last_exception: Optional[str] = None
        # spawn, not fork: the parent may hold threads or an initialised mxnet engine.
        self._pool = ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_worker, initargs=(spec,),
        )

    def _result(self, future: "Future[Any]") -> list[ResponseItem]:
        from concurrent.futures.process import BrokenProcessPool

        try:
            responses, problem = future.result()
        except BrokenProcessPool as exc:
            raise EngineError(
                "a predict worker process died", hint="run again with --workers 1 to see the error"
            ) from exc
        if responses is None:
            kind, message, hint = (tuple(problem) + (None, None, None))[:3] if problem else ("", "", None)
            error = EngineError if kind == "EngineError" else HandlerError
            raise error(message or "the model failed to load in a worker process", hint=hint)
        self.last_exception = f"{problem[0]}: {problem[1]}" if problem else None
        return responses

    def map(self, batches: Iterable[list[RequestItem]]) -> Iterator[list[ResponseItem]]:
        """The responses of each batch, in the order the batches came."""
        pending: deque[Future[Any]] = deque()
        limit = self.workers * (1 + _AHEAD_PER_WORKER)
        for items in batches:
            pending.append(self._pool.submit(_run_batch, items))
            if len(pending) >= limit:
                yield self._result(pending.popleft())
        while pending:
            yield self._result(pending.popleft())

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "ServicePool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
