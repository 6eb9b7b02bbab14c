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
import sys
from typing import Any, Iterable, Iterator, Optional

from mmsctl.engine.protocol import RequestItem, ResponseItem
from mmsctl.engine.spec import ServiceSpec
from mmsctl.errors import EngineError, HandlerError, MmsError

__all__ = ["POOL_MIN_INPUTS", "ServicePool", "choose_workers", "cpu_count"]

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


# -- in the worker process -------------------------------------------------------------------

_service: Any = None
_load_error: Optional[tuple[str, str, Optional[str]]] = None


def _init_worker(spec: ServiceSpec) -> None:
    """Load the model once per worker; a failure is reported instead of answers."""
    global _service, _load_error
    try:
        from mmsctl.engine.service import load_service

        _service = load_service(spec)
    except MmsError as exc:
        _load_error = (type(exc).__name__, exc.message, exc.hint)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises it
        _load_error = ("HandlerError", f"{type(exc).__name__}: {exc}", None)


def _run_batch(items: list[RequestItem]) -> tuple[list[ResponseItem], Optional[tuple[str, str]]]:
    """Answer one batch: the responses, and the batch's failure (type, text) if it failed whole."""
    responses = _service.handle(items)
    detail = _service.last_exception
    return responses, ((type(detail).__name__, str(detail)) if detail is not None else None)


def _worker_main(fd: int) -> int:
    """``python -m mmsctl.engine.pool FD``: load the model, then answer ``(index, items)`` messages."""
    from multiprocessing.connection import Connection

    conn = Connection(fd)
    _init_worker(conn.recv())
    conn.send(("ready", _load_error))
    if _load_error is None:
        while True:
            try:
                message = conn.recv()
            except EOFError:
                break
            if message is None:
                break
            index, items = message
            conn.send((index,) + _run_batch(items))
    conn.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # the parent waits for nothing more; skip tearing mxnet down


# -- in mmsctl ------------------------------------------------------------------------------


class _Worker:
    """One worker process, its connection, and a thread that sends it batches in order.

    Sending from a thread means the main thread never blocks on a full pipe while the
    worker is blocked sending an answer back.
    """

    def __init__(self, spec: ServiceSpec, number: int, threads: int) -> None:
        import socket
        import subprocess
        import threading
        from multiprocessing.connection import Connection
        from queue import SimpleQueue

        parent, child = socket.socketpair()
        env = dict(os.environ)
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "mmsctl.engine.pool", str(child.fileno())],
                pass_fds=(child.fileno(),), env=env, stdin=subprocess.DEVNULL,
                stdout=2,  # handler prints must not mix with the answers on stdout
            )
        finally:
            child.close()
        self.number = number
        self.conn = Connection(parent.detach())
        self.outstanding = 0
        self.ready = False
        self._outbox: SimpleQueue[Any] = SimpleQueue()
        self._outbox.put(spec)
        self._sender = threading.Thread(target=self._send_loop, name=f"mmsctl-pool-{number}", daemon=True)
        self._sender.start()

    def _send_loop(self) -> None:
        while True:
            message = self._outbox.get()
            try:
                self.conn.send(message)
            except (OSError, ValueError):  # the worker is gone; the reader reports it
                return
            if message is None:
                return

    def submit(self, index: int, items: list[RequestItem]) -> None:
        self.outstanding += 1
        self._outbox.put((index, items))

    def ask_to_stop(self) -> None:
        self._outbox.put(None)

    def stop(self, timeout: float = 10.0) -> None:
        import subprocess

        self.ask_to_stop()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.conn.close()


class ServicePool:
    """*workers* processes each running the model; :meth:`map` answers batches in order.

    Workers are plain ``python -m mmsctl.engine.pool`` processes (not ``multiprocessing``
    children, which would re-run the caller's main script), with one OpenMP thread each.
    A batch goes to the worker with the fewest batches outstanding.

    Example:
        >>> with ServicePool(spec, workers=2) as pool:
        ...     for responses in pool.map(batches_of_request_items):
        ...         ...
    """

    def __init__(self, spec: ServiceSpec, *, workers: int, threads: int = 1) -> None:
        self.spec = spec
        #: "ExcType: message" of the last batch that failed as a whole in a worker.
        self.last_exception: Optional[str] = None
        self._workers: list[_Worker] = []
        try:
            for number in range(workers):
                self._workers.append(_Worker(spec, number, threads))
        except BaseException:
            self.close()
            raise

    @property
    def workers(self) -> int:
        return len(self._workers)

    def _receive(self, done: dict[int, Any]) -> None:
        """Wait for at least one message from any worker and file it under its batch index."""
        from multiprocessing.connection import wait

        by_conn = {w.conn: w for w in self._workers if w.outstanding or not w.ready}
        for conn in wait(list(by_conn)):
            worker = by_conn[conn]  # type: ignore[index]
            try:
                message = worker.conn.recv()
            except (EOFError, OSError):
                code = worker.process.poll()
                raise EngineError(
                    f"predict worker {worker.number} (pid {worker.process.pid}) died"
                    + (f" with exit code {code}" if code is not None else ""),
                    hint="run again with --workers 1 to see the error in this process",
                ) from None
            if message[0] == "ready":
                worker.ready = True
                if message[1] is not None:
                    kind, text, hint = message[1]
                    raise (EngineError if kind == "EngineError" else HandlerError)(text, hint=hint)
                continue
            worker.outstanding -= 1
            done[message[0]] = message[1:]

    def map(self, batches: Iterable[list[RequestItem]]) -> Iterator[list[ResponseItem]]:
        """The responses of each batch, in the order the batches came."""
        done: dict[int, Any] = {}
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
            responses, problem = done.pop(wanted)
            wanted += 1
            self.last_exception = f"{problem[0]}: {problem[1]}" if problem else None
            yield responses

    def close(self) -> None:
        """Stop the workers (they finish the batch they hold)."""
        for worker in self._workers:
            worker.ask_to_stop()
        for worker in self._workers:
            worker.stop()
        self._workers = []

    def __enter__(self) -> "ServicePool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


if __name__ == "__main__":
    sys.exit(_worker_main(int(sys.argv[1])))
