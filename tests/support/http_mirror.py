"""A tiny threaded HTTP file server on 127.0.0.1, for tests that download things.

    with serving_folder(tmp_path) as mirror:
        mirror.url                      # http://127.0.0.1:PORT/
        mirror.fail["x.mar"] = [503]    # answer 503 once, then serve the file
        mirror.truncate["y.mar"] = 100  # send the full Content-Length, then close after 100 bytes
        mirror.slow["z.mar"] = 0.05     # sleep this long between 4 KiB chunks
        mirror.redirect["a.mar"] = "http://elsewhere/b.mar"  # answer 302 with this Location
        mirror.requests                 # paths asked for, in order

Real sockets, real HTTP/1.1: nothing is mocked, and nothing leaves the machine.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator
from urllib.parse import unquote, urlsplit

__all__ = ["Mirror", "serving_folder"]

_CHUNK = 4096


@dataclass
class Mirror:
    """A running file server and the knobs that make it misbehave."""

    root: Path
    url: str = ""
    requests: list[str] = field(default_factory=list)
    fail: dict[str, list[int]] = field(default_factory=dict)
    truncate: dict[str, int] = field(default_factory=dict)
    slow: dict[str, float] = field(default_factory=dict)
    redirect: dict[str, str] = field(default_factory=dict)

    def url_for(self, name: str) -> str:
        return self.url + name


def _handler(mirror: Mirror) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
            pass

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            name = unquote(urlsplit(self.path).path).lstrip("/")
            mirror.requests.append(name)
            if name in mirror.redirect:
                self.send_response(302)
                self.send_header("Location", mirror.redirect[name])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            statuses = mirror.fail.get(name)
            if statuses:
                self._status(statuses.pop(0))
                return
            path = (mirror.root / name).resolve()
            if mirror.root.resolve() not in path.parents or not path.is_file():
                self._status(404)
                return
            data = path.read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            limit = mirror.truncate.get(name)
            delay = mirror.slow.get(name, 0.0)
            body = data if limit is None else data[:limit]
            try:
                for start in range(0, len(body), _CHUNK):
                    self.wfile.write(body[start : start + _CHUNK])
                    self.wfile.flush()
                    if delay:
                        time.sleep(delay)
            except (BrokenPipeError, ConnectionResetError):
                pass
            if limit is not None:
                self.close_connection = True

        def _status(self, code: int) -> None:
            body = f'{{"code": {code}, "message": "test mirror says {code}"}}'.encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


@contextmanager
def serving_folder(root: Path) -> Iterator[Mirror]:
    """Serve *root* over HTTP on a free loopback port for the duration of the block."""
    mirror = Mirror(root=Path(root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(mirror))
    server.daemon_threads = True
    mirror.url = f"http://127.0.0.1:{server.server_address[1]}/"
    # shutdown() waits out one poll: 0.5 s by default, in every test that starts this server
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, name="http-mirror", daemon=True)
    thread.start()
    try:
        yield mirror
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
