"""The physical ceiling of bench/serve.py: the least an HTTP/1.1 server in Python can do per request.

    .venv/bin/python bench/echo_server.py PORT

A keep-alive server on 127.0.0.1:PORT built from the same parts as mmsctl's lean path
(httptools' C parser on uvloop): it reads each request's body and answers ``200 OK``
with the body ``OK``, nothing else (no routing, no worker, no limits). Runs until SIGTERM.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Optional

import httptools
import uvloop

_ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nOK"


class EchoProtocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: Optional[asyncio.Transport] = None
        self.parser = httptools.HttpRequestParser(self)
        self.body: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            assert self.transport is not None
            self.transport.close()

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.body = []
        assert self.transport is not None
        self.transport.write(_ANSWER)


async def serve(port: int) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    server = await loop.create_server(EchoProtocol, "127.0.0.1", port, reuse_address=True, backlog=1024)
    await stop.wait()
    server.close()


if __name__ == "__main__":
    uvloop.install()
    asyncio.run(serve(int(sys.argv[1])))
