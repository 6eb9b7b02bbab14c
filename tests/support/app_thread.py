"""An aiohttp app served on 127.0.0.1 (a free port) from its own thread and event loop, for tests."""

from __future__ import annotations

import asyncio
import threading
from contextlib import contextmanager
from typing import Iterator

from aiohttp import web

__all__ = ["serving_app"]


@contextmanager
def serving_app(app: web.Application, what: str = "test server") -> Iterator[str]:
    """Serve *app* until the block ends; yields its base URL (``http://127.0.0.1:PORT``)."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    box: dict[str, object] = {}

    async def start() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        box["runner"] = runner
        box["url"] = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
        started.set()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        loop.run_forever()

    thread = threading.Thread(target=serve, name=what, daemon=True)
    thread.start()
    assert started.wait(10), f"{what} did not start"
    try:
        yield str(box["url"])
    finally:
        runner = box["runner"]
        assert isinstance(runner, web.AppRunner)
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
