"""A process that serves a model: the one worker runtime of ``mmsctl predict`` and ``mmsctl serve``.

A worker is ``python -m mmsctl.engine.worker FD``: a plain child process (not a
``multiprocessing`` child, which would re-run the caller's main script) talking over
its end of a socketpair in :mod:`multiprocessing.connection`'s framing. The conversation::

    parent                                    worker
    (LOAD, (ServiceSpec, tag))    ─────►      load_service(spec)
                                  ◄─────      (READY, None) | (LOAD_FAILED, LoadFailure), then exit
    (BATCH, [RequestItem, …])     ─────►      service.handle(batch)
                                  ◄─────      (RESULT, BatchResult) | (FAILED, "why")
    (BATCHES, [[RequestItem, …], …]) ──►      service.handle(batch) for each, in order
                                  ◄─────      (RESULTS, [(RESULT, …) | (FAILED, …), …])
    …                                         answers come in the order batches were sent
    (EXIT, None), or end of file  ─────►      service closed, exit 0

The modules: :mod:`~mmsctl.engine.worker.frames` (the messages and their framing),
:mod:`~mmsctl.engine.worker.spawn` (command line and environment),
:mod:`~mmsctl.engine.worker.parent` (:class:`WorkerProcess` for blocking code,
:class:`AsyncWorkerProcess` for an event loop) and :mod:`~mmsctl.engine.worker.child`
(the worker's own loop). The names importers use are re-exported here.
"""

from mmsctl.engine.worker.child import EXIT_ORPHANED, main, serve
from mmsctl.engine.worker.frames import (
    BATCH,
    BATCHES,
    EXIT,
    FAILED,
    LOAD,
    LOAD_FAILED,
    READY,
    RESULT,
    RESULTS,
    BatchFailed,
    BatchResult,
    LoadFailure,
    Message,
    WorkerExited,
    encode_frame,
    frame_parts,
    read_frame,
)
from mmsctl.engine.worker.parent import AsyncWorkerProcess, WorkerProcess
from mmsctl.engine.worker.spawn import worker_env

__all__ = [
    "BATCH",
    "BATCHES",
    "EXIT",
    "EXIT_ORPHANED",
    "FAILED",
    "LOAD",
    "LOAD_FAILED",
    "READY",
    "RESULT",
    "RESULTS",
    "AsyncWorkerProcess",
    "BatchFailed",
    "BatchResult",
    "LoadFailure",
    "Message",
    "WorkerExited",
    "WorkerProcess",
    "encode_frame",
    "frame_parts",
    "main",
    "read_frame",
    "serve",
    "worker_env",
]
