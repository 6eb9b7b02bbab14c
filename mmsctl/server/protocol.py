"""Frontend ↔ worker messages: length-prefixed pickles over a socketpair.

Each frame is a 4-byte big-endian length followed by a pickled tuple
``(kind, payload)``. The parent writes ``load`` once, then ``batch`` frames; the
worker answers ``ready``/``load_failed`` once, then one ``result`` or ``failed``
per batch. Only the server and its own children speak this, so pickle is safe.
"""

from __future__ import annotations

import pickle
import socket
import struct
from typing import Any, Optional

__all__ = ["decode", "encode", "read_frame_blocking", "HEADER"]

HEADER = struct.Struct(">I")

# message kinds
LOAD = "load"
READY = "ready"
LOAD_FAILED = "load_failed"
BATCH = "batch"
RESULT = "result"
FAILED = "failed"
EXIT = "exit"


def encode(kind: str, payload: Any = None) -> bytes:
    data = pickle.dumps((kind, payload), protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(data)) + data


def decode(data: bytes) -> tuple[str, Any]:
    kind, payload = pickle.loads(data)
    return kind, payload


def _recv_exact(sock: socket.socket, n: int) -> Optional[bytes]:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def read_frame_blocking(sock: socket.socket) -> Optional[tuple[str, Any]]:
    """Read one message from a blocking socket; None at end of stream."""
    head = _recv_exact(sock, HEADER.size)
    if head is None:
        return None
    (size,) = HEADER.unpack(head)
    body = _recv_exact(sock, size)
    if body is None:
        return None
    return decode(body)
