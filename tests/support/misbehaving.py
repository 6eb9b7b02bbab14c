"""A loopback HTTP/1.1 server that misbehaves on purpose, for the clients' deadline and size limits.

    with misbehaving_server({"GET /ping": healthy()}, default=TRICKLE) as srv:
        ...  # every other request: 200, Content-Length 100000, then a byte every 0.2 s

Routes are ``"METHOD /path"`` prefixes (longest first) mapped to a behaviour:

* :func:`answer` — a whole answer at once (keep-alive);
* ``TRICKLE`` — 200 with ``Content-Length: 100000``, then one body byte every 0.2 s;
* ``TRICKLE_HEADERS`` — the status line, then one header byte every 0.2 s;
* ``SILENT`` — reads the request and never answers;
* ``HUGE`` — 200 with ``Content-Length: 1 GiB``, then body as fast as the client reads;
* ``ENDLESS`` — 200, ``Transfer-Encoding: chunked``, chunks for ever.

Bodies are generated lazily from one 64 KiB block (the big ones are never allocated);
:attr:`Misbehaving.body_bytes` counts what was written, so a test can prove the client stopped
reading. Every behaviour ends when the client goes away.
"""

from __future__ import annotations

import asyncio
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Iterator, Mapping, Optional

__all__ = ["ENDLESS", "HUGE", "SILENT", "TRICKLE", "TRICKLE_HEADERS", "Misbehaving", "answer", "healthy",
           "misbehaving_server"]

_BLOCK = b"x" * 65536
_TICK_S = 0.2
GIB = 1 << 30

Behaviour = Callable[["Misbehaving", asyncio.StreamReader, asyncio.StreamWriter], Awaitable[bool]]


@dataclass
class Misbehaving:
    """The running server: its URL, the requests it got (``METHOD /path``), body bytes written."""

    url: str = ""
    requests: list[str] = field(default_factory=list)
    body_bytes: int = 0

    @property
    def host(self) -> str:
        return self.url.split("://", 1)[1]


async def _send(state: Misbehaving, writer: asyncio.StreamWriter, data: bytes, body: bool = True) -> None:
    writer.write(data)
    await writer.drain()
    if body:
        state.body_bytes += len(data)


def answer(body: bytes, status: int = 200, content_type: str = "application/json",
           headers: Optional[Mapping[str, str]] = None) -> Behaviour:
    """A whole answer at once; the connection stays open for the next request."""
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())

    async def run(state: Misbehaving, _reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
        await _send(state, writer, head.encode() + body, body=False)
        return True

    return run


def healthy() -> Behaviour:
    return answer(b'{"status": "Healthy"}')


async def _trickle(state: Misbehaving, _reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    await _send(state, writer, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n",
                body=False)
    for _ in range(100000):
        await _send(state, writer, b" ")
        await asyncio.sleep(_TICK_S)
    return False


async def _trickle_headers(state: Misbehaving, _reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    await _send(state, writer, b"HTTP/1.1 200 OK\r\nX-Slow: ", body=False)
    for _ in range(50000):
        await _send(state, writer, b"a", body=False)
        await asyncio.sleep(_TICK_S)
    return False


async def _silent(_state: Misbehaving, reader: asyncio.StreamReader, _writer: asyncio.StreamWriter) -> bool:
    await reader.read()  # until the client hangs up
    return False


async def _huge(state: Misbehaving, _reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    await _send(state, writer, f"HTTP/1.1 200 OK\r\nContent-Length: {GIB}\r\n\r\n".encode(), body=False)
    for _ in range(GIB // len(_BLOCK)):
        await _send(state, writer, _BLOCK)
    return False


async def _endless(state: Misbehaving, _reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    await _send(state, writer, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n", body=False)
    chunk = b"%x\r\n" % len(_BLOCK) + _BLOCK + b"\r\n"
    for _ in range(GIB // len(_BLOCK)):  # a GiB is far past any limit a test sets
        await _send(state, writer, chunk)
    return False


TRICKLE: Behaviour = _trickle
TRICKLE_HEADERS: Behaviour = _trickle_headers
SILENT: Behaviour = _silent
HUGE: Behaviour = _huge
ENDLESS: Behaviour = _endless


async def _request(reader: asyncio.StreamReader) -> Optional[str]:
    """Read one request; its ``METHOD /path`` (query left out), or None at the end of the connection."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, target = lines[0].split(" ")[:2]
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    await reader.readexactly(length)
    return f"{method} {target.split('?', 1)[0]}"


@contextmanager
def misbehaving_server(routes: Optional[Mapping[str, Behaviour]] = None, *,
                       default: Behaviour = TRICKLE) -> Iterator[Misbehaving]:
    """Serve on 127.0.0.1 (a free port) in a thread until the block ends."""
    state = Misbehaving()
    ordered = sorted((routes or {}).items(), key=lambda item: -len(item[0]))

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while (line := await _request(reader)) is not None:
                state.requests.append(line)
                behaviour = next((b for prefix, b in ordered if line.startswith(prefix)), default)
                if not await behaviour(state, reader, writer):
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client hung up: what these tests want it to do
        except asyncio.CancelledError:
            pass  # the server stops (the end of the test's block)
        finally:
            writer.close()

    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(asyncio.start_server(handle, "127.0.0.1", 0))
    state.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    thread = threading.Thread(target=loop.run_forever, name="misbehaving-server", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        async def stop() -> None:
            server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
