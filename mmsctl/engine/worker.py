"""A process that serves a model: the one worker runtime of ``mmsctl predict`` and ``mmsctl serve``.

A worker is ``python -m mmsctl.engine.worker FD``: a plain child process (not a
``multiprocessing`` child, which would re-run the caller's main script) talking over
its end of a socketpair with :mod:`multiprocessing.connection`'s framing: a 4-byte
big-endian length (``-1`` and 8 more bytes above 2 GiB), then a pickle. Only mmsctl
and its own children speak it, so pickle is safe. The conversation::

    parent                                    worker
    (LOAD, (ServiceSpec, tag))    ─────►      load_service(spec)
                                  ◄─────      (READY, None) | (LOAD_FAILED, LoadFailure), then exit
    (BATCH, [RequestItem, …])     ─────►      service.handle(batch)
                                  ◄─────      (RESULT, BatchResult) | (FAILED, "why")
    (BATCHES, [[RequestItem, …], …]) ──►      service.handle(batch) for each, in order
                                  ◄─────      (RESULTS, [(RESULT, …) | (FAILED, …), …])
    …                                         answers come in the order batches were sent
    (EXIT, None), or end of file  ─────►      service closed, exit 0

The parent has two faces, one per caller: :class:`WorkerProcess` for blocking code
(the predict pool waits on many with :func:`multiprocessing.connection.wait`) and
:class:`AsyncWorkerProcess` for the server's event loop, which reads the same frames
with a ``StreamReader`` and so never blocks on a worker's pipe. Both start the child
the same way (:func:`worker_env`, :func:`_command`).
"""

from __future__ import annotations

import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

from mmsctl.engine.protocol import RequestItem, ResponseItem
from mmsctl.engine.spec import ServiceSpec
from mmsctl import errors
from mmsctl.errors import EngineError, HandlerError, MmsError

if TYPE_CHECKING:
    # asyncio only where an event loop drives workers: a worker process starts tens of ms sooner without it.
    import asyncio

    from mmsctl.engine.service import ModelService

__all__ = [
    "AsyncWorkerProcess",
    "BatchFailed",
    "BatchResult",
    "LoadFailure",
    "WorkerExited",
    "WorkerProcess",
    "encode_frame",
    "main",
    "read_frame",
    "serve",
    "worker_env",
]

# -- messages ---------------------------------------------------------------------------------

LOAD, READY, LOAD_FAILED = "load", "ready", "load_failed"
BATCH, RESULT, FAILED, EXIT = "batch", "result", "failed", "exit"
BATCHES, RESULTS = "batches", "results"

Message = tuple[str, Any]


@dataclass(frozen=True)
class LoadFailure:
    """Why a worker could not load its model: the mmsctl error's class name, message, hint and param."""

    kind: str
    message: str
    hint: Optional[str] = None
    param: Optional[str] = None

    @classmethod
    def of(cls, exc: BaseException) -> LoadFailure:
        """An mmsctl error as it is; anything else (user code) as a HandlerError."""
        if isinstance(exc, MmsError):
            return cls(type(exc).__name__, _describe(exc), exc.hint, exc.param)
        return cls(HandlerError.__name__, _describe(exc))

    def error(self) -> MmsError:
        """The error to raise in the parent, of the type the worker raised (an EngineError at least)."""
        kind = getattr(errors, self.kind, None)
        if not (isinstance(kind, type) and issubclass(kind, EngineError)):
            kind = EngineError
        return kind(self.message, hint=self.hint, param=self.param)


@dataclass(frozen=True)
class BatchResult:
    """One response per request, in order, and why the batch failed as a whole (``"Type: text"``), if it did."""

    responses: list[ResponseItem]
    failure: Optional[str] = None


class WorkerExited(Exception):
    """The worker's end of the connection closed: the process died or exited."""


class BatchFailed(Exception):
    """The worker could not answer a batch at all (it lives on); the message says why."""


def _describe(exc: BaseException) -> str:
    """mmsctl's errors by their message; anything else as ``Type: text`` (user code raised it)."""
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return text if type(exc).__module__.startswith("mmsctl") else f"{type(exc).__name__}: {text}"


# -- the framing, read from asyncio (the worker and blocking parents use Connection itself) ----

_LENGTH = struct.Struct("!i")
_LONG_LENGTH = struct.Struct("!Q")


def encode_frame(message: Message) -> bytes:
    """*message* as :meth:`multiprocessing.connection.Connection.send` writes it."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    if len(data) > 0x7FFFFFFF:
        return _LENGTH.pack(-1) + _LONG_LENGTH.pack(len(data)) + data
    return _LENGTH.pack(len(data)) + data


async def read_frame(reader: asyncio.StreamReader) -> Message:
    """One message written by :meth:`Connection.send`.

    Raises:
        asyncio.IncompleteReadError: the stream ended (the worker is gone).
    """
    (size,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
    if size == -1:
        (size,) = _LONG_LENGTH.unpack(await reader.readexactly(_LONG_LENGTH.size))
    message: Message = pickle.loads(await reader.readexactly(size))
    return message


# -- starting a worker -------------------------------------------------------------------------


def worker_env(threads: int, extra: Optional[dict[str, str]] = None,
               spec: Optional[ServiceSpec] = None) -> dict[str, str]:
    """The worker's environment: ours, with *threads* OpenMP/MKL threads, unbuffered output, *extra*
    (the server's limits for handlers, such as ``MMSCTL_MAX_IMAGE_PIXELS``) and the kernel set
    chosen for *spec*'s model (``MXNET_MKLDNN_ENABLED``, read once when the MXNet library loads:
    :mod:`mmsctl.engine.kernels` measures it once per model and machine, so this may take seconds)."""
    env = dict(os.environ)
    env.update(extra or {})
    if spec is not None:
        from mmsctl.engine.kernels import kernel_env

        env.update(kernel_env(Path(spec.root), threads=max(1, threads), gpu=spec.gpu_id, model=spec.model_name))
    env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(max(1, threads))
    if env.get("MXNET_MKLDNN_ENABLED") == "0":  # else every bind logs a storage-fallback warning
        env.setdefault("MXNET_STORAGE_FALLBACK_LOG_VERBOSE", "0")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _command(fd: int) -> list[str]:
    return [sys.executable, "-m", "mmsctl.engine.worker", str(fd)]


@contextmanager
def _sigint_blocked() -> Iterator[None]:
    """Spawn with SIGINT blocked: the mask survives exec, so a Ctrl+C that reaches the whole process
    group while a worker is still importing cannot interrupt it (:func:`main` ignores SIGINT, then
    unblocks it). Here a Ctrl+C waits until the spawn is done; none is lost."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - not POSIX
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


#: How much of an answer the event loop buffers before it stops reading (big batches, few wake-ups).
_READ_BUFFER = 2**26
#: A worker's stdout goes onto stderr (stdin is closed): a handler's prints never mix with
#: answers on the parent's stdout (``predict -o jsonl``), and land in the server's log.
_STDOUT = 2


class WorkerProcess:
    """A worker driven from blocking code.

    :attr:`conn` can be passed to :func:`multiprocessing.connection.wait`; :meth:`send_batch`
    may run on another thread than :meth:`receive` (one writes, the other reads).
    """

    def __init__(self, spec: ServiceSpec, *, threads: int = 1, tag: Optional[str] = None) -> None:
        parent, child = socket.socketpair()
        try:
            with _sigint_blocked():
                self.process = subprocess.Popen(
                    _command(child.fileno()), pass_fds=(child.fileno(),), env=worker_env(threads, spec=spec),
                    stdin=subprocess.DEVNULL, stdout=_STDOUT,
                )
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
        self.conn = Connection(parent.detach())
        self.conn.send((LOAD, (spec, tag)))

    @property
    def pid(self) -> int:
        return self.process.pid

    def send_batch(self, items: list[RequestItem]) -> None:
        self.conn.send((BATCH, items))

    def receive(self) -> Message:
        """The next message (READY, LOAD_FAILED, RESULT or FAILED).

        Raises:
            WorkerExited: the worker is gone.
        """
        try:
            message: Message = self.conn.recv()
        except (EOFError, OSError):
            raise WorkerExited(self.exit_text()) from None
        return message

    def exit_text(self, wait: float = 5.0) -> str:
        """``pid N, exit code C`` of a worker whose connection closed (it is exiting: wait a little)."""
        try:
            code: Optional[int] = self.process.wait(wait)
        except subprocess.TimeoutExpired:
            code = None
        return f"pid {self.pid}" + (f", exit code {code}" if code is not None else "")

    def ask_to_stop(self) -> None:
        """Send EXIT (the worker finishes the batches it holds first)."""
        try:
            self.conn.send((EXIT, None))
        except (OSError, ValueError):  # already gone
            pass

    def kill(self) -> None:
        """End the worker now (SIGKILL): what it holds is lost."""
        if self.process.poll() is None:
            self.process.kill()

    def stop(self, timeout: float = 10.0, *, ask: bool = True) -> None:
        """Ask the worker to exit (unless it was asked already), wait up to *timeout*, then kill it."""
        if ask:
            self.ask_to_stop()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.conn.close()


def _result(message: Message, size: int) -> BatchResult:
    """The answer to a batch of *size* requests (raise BatchFailed: FAILED, or not one response each)."""
    kind, payload = message
    if kind == FAILED:
        raise BatchFailed(str(payload))
    if kind != RESULT or not isinstance(payload, BatchResult) or len(payload.responses) != size:
        raise BatchFailed("number of batch response mismatched")
    return payload


class AsyncWorkerProcess:
    """A worker driven from an event loop: every wait is an ``await``, never a blocking read."""

    def __init__(self, process: asyncio.subprocess.Process, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.process = process
        self._reader = reader
        self._writer = writer

    @classmethod
    async def start(cls, spec: ServiceSpec, *, threads: int = 1, tag: Optional[str] = None,
                    env: Optional[dict[str, str]] = None) -> AsyncWorkerProcess:
        """Start a worker and send it *spec* (it then loads; see :meth:`wait_ready`)."""
        import asyncio

        # The kernel choice may measure the model first (once per machine): off the event loop.
        full_env = await asyncio.get_running_loop().run_in_executor(None, worker_env, threads, env, spec)
        parent, child = socket.socketpair()
        try:
            with _sigint_blocked():
                process = await asyncio.create_subprocess_exec(
                    *_command(child.fileno()), pass_fds=(child.fileno(),), env=full_env,
                    stdin=subprocess.DEVNULL, stdout=_STDOUT,
                )
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
        reader, writer = await asyncio.open_unix_connection(sock=parent, limit=_READ_BUFFER)
        writer.write(encode_frame((LOAD, (spec, tag))))
        return cls(process, reader, writer)

    @property
    def pid(self) -> int:
        return self.process.pid

    async def _receive(self) -> Message:
        import asyncio

        try:
            return await read_frame(self._reader)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            raise WorkerExited(f"pid {self.pid}") from None

    async def wait_ready(self) -> Optional[LoadFailure]:
        """Wait until the model is loaded: None, or why it could not be.

        Raises:
            WorkerExited: the worker died while loading.
        """
        kind, payload = await self._receive()
        if kind == READY:
            return None
        if kind == LOAD_FAILED and isinstance(payload, LoadFailure):
            return payload
        return LoadFailure("EngineError", f"unexpected message from the worker: {kind!r}")

    def send(self, batches: list[list[RequestItem]]) -> None:
        """Send *batches* (one frame) without waiting: the worker answers frames in the order sent, so
        a frame sent while the worker is busy with another is started the moment that one is answered."""
        message = (BATCH, batches[0]) if len(batches) == 1 else (BATCHES, batches)
        self._writer.write(encode_frame(message))

    async def receive(self, batches: list[list[RequestItem]]) -> list[Union[BatchResult, BatchFailed]]:
        """The answer to the oldest frame sent (*batches*): per batch, its result or why it failed.

        Raises:
            WorkerExited: the worker died (what it held is lost).
        """
        kind, payload = await self._receive()
        if len(batches) == 1 and kind != RESULTS:
            try:
                return [_result((kind, payload), len(batches[0]))]
            except BatchFailed as exc:
                return [exc]
        if kind != RESULTS or not isinstance(payload, list) or len(payload) != len(batches):
            failed = BatchFailed("number of batch results mismatched")
            return [failed] * len(batches)
        outcomes: list[Union[BatchResult, BatchFailed]] = []
        for message, items in zip(payload, batches):
            try:
                outcomes.append(_result(message, len(items)))
            except BatchFailed as exc:
                outcomes.append(exc)
        return outcomes

    def kill(self) -> None:
        if self.process.returncode is None:
            try:
                self.process.kill()
            except ProcessLookupError:
                pass

    async def exit_code(self, timeout: float = 5.0) -> Optional[int]:
        """Wait for the process to end (kill it after *timeout*); its exit code, None if killed."""
        import asyncio

        try:
            return await asyncio.wait_for(self.process.wait(), timeout)
        except asyncio.TimeoutError:
            self.kill()
            return None

    async def close(self, grace: float = 5.0) -> None:
        """Ask the worker to exit, kill it if it lingers past *grace*, close the connection."""
        import asyncio

        try:
            self._writer.write(encode_frame((EXIT, None)))
            await self._writer.drain()
        except (ConnectionError, OSError, RuntimeError):
            pass
        try:
            await asyncio.wait_for(self.process.wait(), grace)
        except asyncio.TimeoutError:
            self.kill()
            await self.process.wait()
        self.close_connection()

    def close_connection(self) -> None:
        self._writer.close()


# -- in the worker process ---------------------------------------------------------------------


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
            print(f"{tag} model failed to load: {failure.message}", file=sys.stderr, flush=True)
            if not isinstance(exc, MmsError):
                traceback.print_exc(file=sys.stderr)
        return None, (LOAD_FAILED, failure)


def _answer(service: ModelService, batch: list[RequestItem], tag: Optional[str]) -> Message:
    try:
        responses = service.handle(batch)
    except BaseException as exc:  # noqa: BLE001 - the batch fails, the worker lives on
        if tag:
            print(f"{tag} batch failed: {_describe(exc)}", file=sys.stderr, flush=True)
        return FAILED, _describe(exc)
    detail = service.last_exception
    return RESULT, BatchResult(responses, f"{type(detail).__name__}: {detail}" if detail is not None else None)


#: After which batches a worker gives the memory freed so far back to the system (see _release_freed).
_RELEASE_AFTER = frozenset({1, 2, 4, 16, 64})


def _release_freed() -> None:
    """Return free heap memory to the system (glibc's ``malloc_trim``).

    Loading a model and its first forward passes free a lot (a loaded copy of the weights, MKL-DNN's
    set-up buffers) among blocks still in use, and glibc keeps such holes: a resnet-18 worker with
    MMS's example handler holds ~27 MB it no longer uses. Cheap (well under a millisecond here);
    a no-op where the C library is not glibc.
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


def serve(conn: Connection) -> int:
    """Load the model the parent names, then answer batches until EXIT or end of file."""
    try:
        kind, payload = conn.recv()
    except EOFError:
        return 2
    if kind != LOAD:
        return 2
    spec, tag = payload
    if tag:
        tag = f"{tag[:-1]} pid {os.getpid()}]" if tag.endswith("]") else f"{tag} (pid {os.getpid()})"
    service, reply = _load(spec, tag)
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
    service.close()
    return 0


#: A worker's exit status when its parent went away without telling it.
EXIT_ORPHANED = 4


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
        code = serve(conn)
    finally:
        conn.close()
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)  # nothing more to wait for: skip tearing mxnet down


if __name__ == "__main__":
    # Run the imported module, not this __main__ copy: what we send must unpickle in the parent
    # as mmsctl.engine.worker.BatchResult, not __main__.BatchResult.
    from mmsctl.engine import worker

    worker.main(sys.argv[1:])
