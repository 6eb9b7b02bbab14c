"""Inside a worker process: load the model the parent names, answer batches in order, exit with the parent.

``python -m mmsctl.engine.worker FD`` runs :func:`main`: SIGINT ignored (the parent decides when a
worker stops), a thread that ends the process when the parent goes, then :func:`serve` on the
connection FD: the spec arrives, the process's data memory is capped
(:func:`mmsctl.engine.memory.limit_this_process`, before mxnet loads; not on a GPU), the model
loads, batches are answered. After its first batches the worker gives freed heap back to the system.
A worker the parent names (a server's: ``[model W-9000]``) writes every line with that name and its pid
(:func:`_log_as`), so its output in the server's log says which worker wrote it.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, Optional

from mmsctl.engine.protocol import RequestItem
from mmsctl.engine.spec import ServiceSpec
from mmsctl.engine.worker.frames import (
    BATCHES,
    EXIT,
    FAILED,
    LOAD,
    LOAD_FAILED,
    READY,
    RESULT,
    RESULTS,
    BatchResult,
    LoadFailure,
    Message,
    describe,
)
from mmsctl.errors import MmsError

if TYPE_CHECKING:
    from mmsctl.engine.service import ModelService

__all__ = ["EXIT_ORPHANED", "main", "serve"]


def _load(spec: ServiceSpec, tag: Optional[str]) -> tuple[Optional[ModelService], Message]:
    """Load the model; the service (None on failure) and the message for the parent."""
    from mmsctl.engine.service import load_service

    try:
        service = load_service(spec)
        service.pin()  # one model per worker process
        return service, (READY, None)
    except BaseException as exc:  # noqa: BLE001 - every load failure is reported to the parent
        failure = LoadFailure.of(exc)
        if tag:
            print(f"model failed to load: {failure.message}", file=sys.stderr, flush=True)  # tagged by _log_as
            if not isinstance(exc, MmsError):
                traceback.print_exc(file=sys.stderr)
        return None, (LOAD_FAILED, failure)


def _answer(service: ModelService, batch: list[RequestItem], tag: Optional[str]) -> Message:
    try:
        responses = service.handle(batch)
    except BaseException as exc:  # noqa: BLE001 - the batch fails, the worker lives on
        if tag:
            print(f"batch failed: {describe(exc)}", file=sys.stderr, flush=True)  # tagged by _log_as
        return FAILED, describe(exc)
    detail = service.last_exception
    return RESULT, BatchResult(responses, f"{type(detail).__name__}: {detail}" if detail is not None else None)


#: A worker's exit status when its parent went away without telling it.
EXIT_ORPHANED = 4

#: After which batches a worker gives the memory freed so far back to the system (see _release_freed).
_RELEASE_AFTER = frozenset({1, 2, 4, 16, 64})


def _release_freed() -> None:
    """Return free heap memory to the system (glibc's ``malloc_trim``).

    Loading a model and its first forward passes free a lot (a loaded copy of the weights, MKL-DNN's
    set-up buffers) among blocks still in use, and glibc keeps such holes, which a worker holds for
    nothing otherwise. Cheap; a no-op where the C library is not glibc.
    """
    global _trim
    if _trim is None:
        import ctypes

        try:
            _trim = ctypes.CDLL(None).malloc_trim  # the process's own C library
        except (OSError, AttributeError):
            _trim = False
    if _trim:
        _trim(0)


_trim: Any = None


def serve(conn: Connection, *, own_process: bool = False) -> int:
    """Load the model the parent names, then answer batches until EXIT or end of file.

    With *own_process* (a worker process, not a caller's own), the process's data memory is capped first, and a
    tagged worker's output carries its tag (:func:`_log_as`: the process's logging and standard streams).
    """
    try:
        kind, payload = conn.recv()
    except (EOFError, OSError):
        return 2
    if kind != LOAD:
        return 2
    spec, tag = payload
    if own_process and spec.gpu_id is None:  # CUDA maps host memory of its own: no cap on a GPU
        _limit_memory()
    if tag:
        tag = f"{tag[:-1]} pid {os.getpid()}]" if tag.endswith("]") else f"{tag} (pid {os.getpid()})"
        if own_process:
            _log_as(tag)
    service, reply = _load(spec, tag)
    try:
        conn.send(reply)
        if service is None:
            return 1
        frames = 0
        while True:
            try:
                kind, batch = conn.recv()
            except EOFError:
                break
            if kind == EXIT:
                break
            if kind == BATCHES:  # several batches in one frame (a busy server): the answers in one too
                conn.send((RESULTS, [_answer(service, items, tag) for items in batch]))
            else:
                conn.send(_answer(service, batch, tag))
            frames += 1
            if frames in _RELEASE_AFTER:
                _release_freed()
    except OSError:
        # The parent closed its end while this worker loaded or answered (a Ctrl+C as it started us):
        # nobody is left to tell, and a traceback would land on the terminal the user just left.
        return EXIT_ORPHANED
    finally:
        if service is not None:
            service.close()
    return 0


class _Tagged:
    """A text stream whose every line starts with the worker's tag (what ``print`` writes, and tracebacks)."""

    def __init__(self, stream: Any, tag: str) -> None:
        self._stream = stream
        self._tag = tag + " "
        self._line_start = True

    def write(self, text: str) -> int:
        pieces = []
        for line in text.splitlines(keepends=True):
            pieces.append(self._tag + line if self._line_start else line)
            self._line_start = line.endswith(("\n", "\r"))
        self._stream.write("".join(pieces))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, encoding, buffer: the stream's own
        return getattr(self._stream, name)


def _log_as(tag: str) -> None:
    """Everything this worker writes carries *tag* (``[model W-9000 pid 4242]``): Python logging at INFO, as MMS's
    workers log (a handler's ``logging.info`` reaches the server's log), in the server's own line format; and
    each line of ``print`` output and of tracebacks."""
    import logging

    class Tagged(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:  # the lines of a traceback carry the tag too
            return super().format(record).replace("\n", "\n" + tag + " ")

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(Tagged("%(asctime)s [%(levelname)s] " + tag.replace("%", "%%") + " %(name)s - %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    sys.stdout = _Tagged(sys.stdout, tag)
    sys.stderr = _Tagged(sys.stderr, tag)


def _exit_with_parent(fd: int) -> None:
    """Exit at once when the parent is gone, whatever the main thread is doing (a handler stuck in
    ``initialize`` or in a batch): a daemon thread watches for the parent's end of the connection to
    close (it closes when the parent dies, even by SIGKILL) and, as a fallback, for a new parent pid."""
    import select
    import threading

    parent = os.getppid()

    def watch() -> None:
        poller = select.poll()
        # POLLIN is left out on purpose: a batch waiting to be read is not the parent leaving.
        poller.register(fd, getattr(select, "POLLRDHUP", 0) | select.POLLHUP | select.POLLERR)
        while True:
            if poller.poll(1000) or os.getppid() != parent:
                os._exit(EXIT_ORPHANED)

    threading.Thread(target=watch, name="mmsctl-parent-watch", daemon=True).start()


def _limit_memory() -> None:
    """Cap this process's data memory from the network limit its parent passed (before mxnet loads:
    :func:`serve` calls it between receiving the spec and loading)."""
    from mmsctl.engine.memory import limit_from_env, limit_this_process

    try:
        limit_this_process(limit_from_env())
    except MmsError:  # a bad setting: the load's own check reports it
        pass


def main(argv: list[str]) -> None:
    """``python -m mmsctl.engine.worker FD``."""
    # The parent decides when a worker stops; Ctrl+C in its terminal must not kill us first.
    # (The parent started us with SIGINT blocked, so none arrived during the imports.)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    _exit_with_parent(int(argv[0]))
    from mmsctl.engine.mxnet_compat import leave_out_operator_docs

    leave_out_operator_docs()  # nobody reads them here
    conn = Connection(int(argv[0]))
    try:
        code = serve(conn, own_process=True)
    finally:
        conn.close()
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)  # nothing more to wait for: skip tearing mxnet down
