"""The parent's two faces of a worker: :class:`WorkerProcess` for blocking code (the predict pool waits
on many with :func:`multiprocessing.connection.wait`) and :class:`AsyncWorkerProcess` for the server's
event loop, which reads the same frames with a ``StreamReader`` and so never blocks on a worker's pipe.
Both start the child the same way (:mod:`mmsctl.engine.worker.spawn`).
"""

from __future__ import annotations

import socket
import subprocess
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Optional, Union

from mmsctl.engine.protocol import RequestItem
from mmsctl.engine.spec import ServiceSpec
from mmsctl.engine.worker.frames import (
    BATCH,
    BATCHES,
    EXIT,
    LOAD,
    LOAD_FAILED,
    READY,
    RESULTS,
    BatchFailed,
    BatchResult,
    LoadFailure,
    Message,
    WorkerExited,
    batch_result,
    encode_frame,
    frame_parts,
    read_frame,
)
from mmsctl.engine.worker.spawn import READ_BUFFER, STDOUT, command, sigint_blocked, worker_env

if TYPE_CHECKING:
    # asyncio only where an event loop drives workers: a worker process starts tens of ms sooner without it.
    import asyncio

__all__ = ["AsyncWorkerProcess", "WorkerProcess"]


class WorkerProcess:
    """A worker driven from blocking code.

    :attr:`conn` can be passed to :func:`multiprocessing.connection.wait`; :meth:`send_batch`
    may run on another thread than :meth:`receive` (one writes, the other reads).
    """

    def __init__(self, spec: ServiceSpec, *, threads: int = 1, tag: Optional[str] = None) -> None:
        parent, child = socket.socketpair()
        try:
            with sigint_blocked():
                self.process = subprocess.Popen(
                    command(child.fileno()), pass_fds=(child.fileno(),), env=worker_env(threads, spec=spec),
                    stdin=subprocess.DEVNULL, stdout=STDOUT,
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
            with sigint_blocked():
                process = await asyncio.create_subprocess_exec(
                    *command(child.fileno()), pass_fds=(child.fileno(),), env=full_env,
                    stdin=subprocess.DEVNULL, stdout=STDOUT,
                )
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
        reader, writer = await asyncio.open_unix_connection(sock=parent, limit=READ_BUFFER)
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
        for part in frame_parts(message):
            self._writer.write(part)

    async def receive(self, batches: list[list[RequestItem]]) -> list[Union[BatchResult, BatchFailed]]:
        """The answer to the oldest frame sent (*batches*): per batch, its result or why it failed.

        Raises:
            WorkerExited: the worker died (what it held is lost).
        """
        kind, payload = await self._receive()
        if len(batches) == 1 and kind != RESULTS:
            try:
                return [batch_result((kind, payload), len(batches[0]))]
            except BatchFailed as exc:
                return [exc]
        if kind != RESULTS or not isinstance(payload, list) or len(payload) != len(batches):
            failed = BatchFailed("number of batch results mismatched")
            return [failed] * len(batches)
        outcomes: list[Union[BatchResult, BatchFailed]] = []
        for message, items in zip(payload, batches):
            try:
                outcomes.append(batch_result(message, len(items)))
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
