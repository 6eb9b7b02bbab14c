"""What a parent and its worker say to each other: the message kinds, their payloads, and the framing.

A frame is :mod:`multiprocessing.connection`'s: a 4-byte big-endian length (``-1`` and 8 more
bytes above 2 GiB), then a pickle. Blocking code and the worker use ``Connection`` itself; the
server's event loop writes with :func:`encode_frame` and reads with :func:`read_frame`. Only
mmsctl and its own children speak it, so pickle is safe.
"""

from __future__ import annotations

import pickle
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from mmsctl import errors
from mmsctl.engine.protocol import ResponseItem
from mmsctl.errors import EngineError, HandlerError, MmsError

if TYPE_CHECKING:
    # asyncio only where an event loop drives workers: a worker process starts tens of ms sooner without it.
    import asyncio

__all__ = [
    "BATCH",
    "BATCHES",
    "EXIT",
    "FAILED",
    "LOAD",
    "LOAD_FAILED",
    "READY",
    "RESULT",
    "RESULTS",
    "BatchFailed",
    "BatchResult",
    "LoadFailure",
    "Message",
    "WorkerExited",
    "batch_result",
    "describe",
    "encode_frame",
    "frame_parts",
    "read_frame",
]

LOAD, READY, LOAD_FAILED = "load", "ready", "load_failed"
BATCH, RESULT, FAILED, EXIT = "batch", "result", "failed", "exit"
BATCHES, RESULTS = "batches", "results"

Message = tuple[str, Any]


def describe(exc: BaseException) -> str:
    """mmsctl's errors by their message; anything else as ``Type: text`` (user code raised it)."""
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return text if type(exc).__module__.startswith("mmsctl") else f"{type(exc).__name__}: {text}"


@dataclass(frozen=True)
class LoadFailure:
    """Why a worker could not load its model: the mmsctl error's class name, message, hint and param, and whether
    the load ran out of memory (a ``MemoryError`` among its causes: MMS answers 507 for it)."""

    kind: str
    message: str
    hint: Optional[str] = None
    param: Optional[str] = None
    out_of_memory: bool = False

    @classmethod
    def of(cls, exc: BaseException) -> LoadFailure:
        """An mmsctl error as it is; anything else (user code) as a HandlerError."""
        memory = any(isinstance(cause, MemoryError) for cause in errors.causes(exc))
        if isinstance(exc, MmsError):
            return cls(type(exc).__name__, describe(exc), exc.hint, exc.param, memory)
        return cls(HandlerError.__name__, describe(exc), out_of_memory=memory)

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


def batch_result(message: Message, size: int) -> BatchResult:
    """The answer to a batch of *size* requests (raise BatchFailed: FAILED, or not one response each)."""
    kind, payload = message
    if kind == FAILED:
        raise BatchFailed(str(payload))
    if kind != RESULT or not isinstance(payload, BatchResult) or len(payload.responses) != size:
        raise BatchFailed("number of batch response mismatched")
    return payload


_LENGTH = struct.Struct("!i")
_LONG_LENGTH = struct.Struct("!Q")


#: A frame larger than this goes out as its header and its data, not one copy of both (a photo is not copied).
_JOIN_BELOW = 1 << 16


def frame_parts(message: Message) -> tuple[bytes, ...]:
    """*message* as :meth:`multiprocessing.connection.Connection.send` writes it, in the pieces to write."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    if len(data) > 0x7FFFFFFF:
        return _LENGTH.pack(-1) + _LONG_LENGTH.pack(len(data)), data
    if len(data) >= _JOIN_BELOW:
        return _LENGTH.pack(len(data)), data
    return (_LENGTH.pack(len(data)) + data,)


def encode_frame(message: Message) -> bytes:
    """*message* as :meth:`multiprocessing.connection.Connection.send` writes it, in one piece."""
    return b"".join(frame_parts(message))


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
