"""Worker processes for ``mmsctl predict`` on many inputs: one model copy per CPU core.

MXNet runs a small convnet's forward pass on one core by default (it keeps the
other cores for its engine), and decoding images in Python adds to that core's
work. With one process per core, each with one OpenMP thread, every core decodes
and runs its own batches, the same way a server spreads requests over workers.

Each worker is the same worker process the server runs (:mod:`mmsctl.engine.worker`),
so handlers see exactly what they see in-process and in the server. Batches go
out in order, several in flight, and answers come back in input order.
"""

from __future__ import annotations

import os
from collections import deque
from typing import Iterable, Iterator, Optional

from mmsctl.engine.protocol import RequestItem, ResponseItem
from mmsctl.engine.spec import ServiceSpec
from mmsctl.engine.worker.frames import FAILED, LOAD_FAILED, READY, BatchResult, WorkerExited
from mmsctl.engine.worker.parent import WorkerProcess
from mmsctl.errors import EngineError, WorkerDiedError

__all__ = ["POOL_MIN_INPUTS", "ServicePool", "choose_workers", "cpu_count"]

#: Batches queued per worker beyond the one it is running (keeps every core busy).
_AHEAD_PER_WORKER = 2
#: From this many inputs on, ``predict`` runs one worker per core by default: below it, the
#: extra model loads cost more than the second core wins back (docs/performance.md).
POOL_MIN_INPUTS = 64


def cpu_count() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def choose_workers(requested: Optional[int], inputs: int, batch_size: int, *, gpu: Optional[int]) -> int:
    """How many processes run the model: 1 means in this process, no pool.

    An explicit number wins (but never more than there are batches); by default a
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


class _PoolWorker:
    """One worker process, the batches it holds (in the order sent), and a thread that sends them.

    Sending from a thread means the main thread never blocks on a full pipe while the
    worker is blocked sending an answer back.
    """

    def __init__(self, spec: ServiceSpec, number: int, threads: int) -> None:
        import threading
        from queue import SimpleQueue

        self.number = number
        self.process = WorkerProcess(spec, threads=threads)
        try:
            self.held: deque[int] = deque()
            self.ready = False
            self._outbox: SimpleQueue[Optional[list[RequestItem]]] = SimpleQueue()
            self._sender = threading.Thread(target=self._send_loop, name=f"mmsctl-pool-{number}", daemon=True)
            self._sender.start()
        except BaseException:  # a Ctrl+C here: the pool never saw this worker, so it goes now
            self.process.kill()
            self.process.stop(ask=False)
            raise

    @property
    def outstanding(self) -> int:
        return len(self.held)

    def _send_loop(self) -> None:
        while True:
            items = self._outbox.get()
            if items is None:
                self.process.ask_to_stop()
                return
            try:
                self.process.send_batch(items)
            except (OSError, ValueError):  # the worker is gone; the reader reports it
                return

    def submit(self, index: int, items: list[RequestItem]) -> None:
        self.held.append(index)
        self._outbox.put(items)

    def ask_to_stop(self) -> None:
        self._outbox.put(None)


class ServicePool:
    """*workers* processes each running the model; :meth:`map` answers batches in order (a
    :class:`~mmsctl.predict.local.PredictService`, as an in-process ``ModelService`` is).

    Workers are :class:`~mmsctl.engine.worker.WorkerProcess` es with *threads* OpenMP
    threads each (one by default: one process per core). A batch goes to the worker with
    the fewest batches outstanding.

    Example:
        >>> with ServicePool(spec, workers=2) as pool:
        ...     for responses in pool.map(batches_of_request_items):
        ...         ...
    """

    def __init__(self, spec: ServiceSpec, *, workers: int, threads: int = 1) -> None:
        self.spec = spec
        #: "ExcType: message" of the last batch that failed as a whole in a worker.
        self.last_failure: Optional[str] = None
        self._workers: list[_PoolWorker] = []
        try:
            for number in range(workers):
                self._workers.append(_PoolWorker(spec, number, threads))
        except BaseException:
            self.close()
            raise

    @property
    def workers(self) -> int:
        return len(self._workers)

    def _receive(self, done: dict[int, BatchResult]) -> None:
        """Wait for at least one message from any worker and file it under its batch index."""
        from multiprocessing.connection import wait

        by_conn = {w.process.conn: w for w in self._workers if w.outstanding or not w.ready}
        for conn in wait(list(by_conn)):
            worker = by_conn[conn]  # type: ignore[index]
            try:
                kind, payload = worker.process.receive()
            except WorkerExited as exc:
                raise WorkerDiedError(f"predict worker {worker.number} ({exc}) died") from None
            if kind == READY:
                worker.ready = True
            elif kind == LOAD_FAILED:
                raise payload.error()
            elif kind == FAILED:
                raise EngineError(f"predict worker {worker.number}: the batch failed: {payload}")
            else:
                done[worker.held.popleft()] = payload

    def map(self, batches: Iterable[list[RequestItem]]) -> Iterator[list[ResponseItem]]:
        """The responses of each batch, in the order the batches came."""
        done: dict[int, BatchResult] = {}
        sent = 0
        wanted = 0
        limit = 1 + _AHEAD_PER_WORKER
        it = iter(batches)
        exhausted = False
        while True:
            while not exhausted and min(w.outstanding for w in self._workers) < limit:
                items = next(it, None)
                if items is None:
                    exhausted = True
                    break
                min(self._workers, key=lambda w: w.outstanding).submit(sent, items)
                sent += 1
            if wanted == sent and exhausted:
                return
            while wanted not in done:
                self._receive(done)
            result = done.pop(wanted)
            wanted += 1
            self.last_failure = result.failure
            yield result.responses

    def close(self) -> None:
        """Stop the workers: idle ones exit when asked; ones that still hold batches nobody will
        read (an interrupted or failed run) are killed, so Ctrl+C never waits for them."""
        for worker in self._workers:
            if worker.outstanding:
                worker.process.kill()
            worker.ask_to_stop()  # the sender thread sends EXIT after what it holds
        for worker in self._workers:
            worker.process.stop(ask=False)
        self._workers = []

    def __enter__(self) -> ServicePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
