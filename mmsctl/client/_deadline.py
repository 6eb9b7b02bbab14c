"""A total deadline for each request of the sync client, kept where the socket is read.

httpx's timeouts are per operation: a server that sends a byte a second, in its headers or
its body, never trips a 5 s read timeout and holds a request for as long as it likes. The
sync face therefore sends through an ``httpx.HTTPTransport`` whose httpcore network backend
gives every connect, read and write only the time left until the request's deadline (held
in a context variable while the request runs, so pooled connections and threads need no
bookkeeping); once none is left the operation raises httpcore's own timeout, which httpx
turns into ``httpx.ReadTimeout`` and the client into :class:`~mmsctl.errors.RequestTimeout`.
The async face needs none of this: it bounds each request with ``asyncio.wait_for``.
Imported by the sync face only when it builds its client (httpx is loaded by then).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator, Optional

import httpcore
import httpx

__all__ = ["deadline_transport", "until"]

_DEADLINE: ContextVar[Optional[float]] = ContextVar("mmsctl_request_deadline", default=None)


@contextmanager
def until(deadline: float) -> Iterator[None]:
    """Network operations in this block end by *deadline* (``time.monotonic()`` seconds)."""
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _left(timeout: Optional[float], expired: type[Exception]) -> Optional[float]:
    """*timeout*, cut to the time left before the deadline; *expired* raised when none is left."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise expired("the request's deadline passed")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    """A connection whose every read and write ends by the deadline."""

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: Optional[float] = None) -> bytes:
        return self._stream.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: Optional[float] = None) -> None:
        self._stream.write(buffer, _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: Any, server_hostname: Optional[str] = None,
                  timeout: Optional[float] = None) -> httpcore.NetworkStream:
        return _Stream(self._stream.start_tls(ssl_context, server_hostname, _left(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    """httpcore's backend, with connections that keep the deadline."""

    def __init__(self, backend: httpcore.NetworkBackend) -> None:
        self._backend = backend

    def connect_tcp(self, host: str, port: int, timeout: Optional[float] = None,
                    local_address: Optional[str] = None, socket_options: Any = None) -> httpcore.NetworkStream:
        return _Stream(self._backend.connect_tcp(host, port, _left(timeout, httpcore.ConnectTimeout),
                                                 local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: Optional[float] = None,
                            socket_options: Any = None) -> httpcore.NetworkStream:
        return _Stream(self._backend.connect_unix_socket(path, _left(timeout, httpcore.ConnectTimeout),
                                                         socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def deadline_transport(verify: Any) -> httpx.HTTPTransport:
    """An ``httpx.HTTPTransport`` (no proxies from the environment) whose network I/O keeps the deadline."""
    transport = httpx.HTTPTransport(verify=verify, trust_env=False)
    # httpx takes no network backend; its pool (httpcore's ConnectionPool) does. Where a future
    # httpx hides it, the faces' check between body chunks still ends a trickling answer.
    pool = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if backend is not None:
        pool._network_backend = _Backend(backend)  # type: ignore[union-attr]
    return transport
