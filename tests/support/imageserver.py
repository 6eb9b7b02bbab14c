"""A small HTTP server on 127.0.0.1 with the behaviours ``?url=`` downloads must survive.

    /img/NAME      the file NAME from the served folder
    /big           announces 50 MB in Content-Length
    /endless       chunked, no length, never stops on its own
    /drip          one byte every 0.2 s, for a long time
    /redirect/N    redirects N more times, then to /img/kitten.jpg
    /to?u=URL      redirects to URL (anywhere)
    anything else  404
"""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

__all__ = ["StandInServer", "serving", "serving_images"]


def _handler(root: Path, seen: list[tuple[str, str]]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

        def _head(self, status: int, length: int | None, extra: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream")
            if length is None:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Content-Length", str(length))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()

        def do_GET(self) -> None:  # noqa: N802
            path = self.path
            seen.append((path, self.headers.get("Host", "")))
            try:
                if path.startswith("/img/"):
                    file = root / path[len("/img/"):]
                    if not file.is_file():
                        self._head(404, 0)
                        return
                    data = file.read_bytes()
                    self._head(200, len(data))
                    self.wfile.write(data)
                elif path == "/big":
                    self._head(200, 50 * 1024 * 1024)
                    self.wfile.write(b"\0" * 1024)
                elif path == "/endless":
                    self._head(200, None)
                    chunk = b"\0" * 65536
                    for _ in range(10_000):  # ~650 MB at most: the client must stop long before
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                elif path == "/drip":
                    self._head(200, 1000)
                    for _ in range(1000):
                        self.wfile.write(b"\0")
                        self.wfile.flush()
                        time.sleep(0.2)
                elif path.startswith("/redirect/"):
                    left = int(path.rsplit("/", 1)[1])
                    target = f"/redirect/{left - 1}" if left > 0 else "/img/kitten.jpg"
                    self._head(302, 0, {"Location": target})
                elif path.startswith("/to?u="):
                    from urllib.parse import unquote

                    self._head(302, 0, {"Location": unquote(path[len("/to?u="):])})
                else:
                    self._head(404, 0)
            except (BrokenPipeError, ConnectionResetError):
                pass

    return Handler


class StandInServer(ThreadingHTTPServer):
    """A loopback stand-in that says nothing when a client drops its connection.

    Tests here make clients stop reading on purpose (a size cap, a deadline) and close: the reset reaches a
    handler thread as a ConnectionError, and the stdlib server would print its traceback into the run's output.
    Any other error is printed as before.
    """

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


@contextmanager
def serving_images(root: Path, seen: list[tuple[str, str]] | None = None) -> Iterator[str]:
    """Serve *root* on a free loopback port; yields the base URL (no trailing slash).

    Each request's path and Host header are appended to *seen* when it is given."""
    with serving(_handler(root, [] if seen is None else seen)) as url:
        yield url


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A :class:`StandInServer` of *handler* on a free loopback port until the block ends; its base URL."""
    server = StandInServer(("127.0.0.1", 0), handler)
    # shutdown() waits out one poll: 0.5 s by default, in every test that starts this server
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
