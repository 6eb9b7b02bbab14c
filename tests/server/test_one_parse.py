"""Each request's head is parsed, and the request admitted, once: by the lean path or by aiohttp's, never both.

The server's own inference API runs in this process (its Frontend, lean path and aiohttp runner on loopback, a
real worker), with spies on what each path does per request: the heads the lean path parses
(``LeanConnection.on_head``), the requests aiohttp's application gets (a middleware in front of the API's own)
and every admission (``Gate.admit``, which both paths call). The requests are of every kind the lean path once
began and then handed to aiohttp (refused, declined after planning, too large, chunked, ``Expect``, forms,
custom attributes) and of kinds that are aiohttp's from their request line; each must be parsed and admitted
exactly once, and answered.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.support.mmsctl_server import make_noop_archive

TOKEN = "one-parse-token"
AUTH = b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
PHOTO = bytes(range(256)) * (3 * 4096)  # 3 MiB: a phone's photo
LIMIT = 8 << 20


class _Counts:
    def __init__(self) -> None:
        self.lean = self.aiohttp = self.admitted = 0


async def _serve(tmp_path: Path, counts: _Counts, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Callable[[], Any]]:
    """The inference API in this process, with the spies; (its port, how to stop it)."""
    from aiohttp import web

    from mmsctl.server.config import ServerConfig
    from mmsctl.server.http.admission import Gate
    from mmsctl.server.http.connections import MmsAppRunner
    from mmsctl.server.http.frontend import Frontend
    from mmsctl.server.http.lean.connection import LeanConnection
    from mmsctl.server.metrics import ServerMetrics
    from mmsctl.server.store import resolve_archive
    from mmsctl.server.workers.manager import ModelManager
    from mmsctl.server.workers.model import Model

    admit, on_head = Gate.admit, LeanConnection.on_head

    def admitted(self: Gate, *args: Any) -> Any:
        counts.admitted += 1
        return admit(self, *args)

    def lean_head(self: LeanConnection, *args: Any) -> Any:
        counts.lean += 1
        return on_head(self, *args)

    monkeypatch.setattr(Gate, "admit", admitted)
    monkeypatch.setattr(LeanConnection, "on_head", lean_head)
    (tmp_path / "token").write_text(TOKEN + "\n")
    config = ServerConfig(token_file=str(tmp_path / "token"), max_request_size=LIMIT)
    metrics = ServerMetrics(lambda: manager.models)
    manager = ModelManager(config, metrics)
    folder = make_noop_archive(tmp_path / "echo", name="echo")
    model = Model.from_archive("echo", str(folder), resolve_archive(str(folder), config, trusted=True))
    await manager.register(model, 1, synchronous=True, timeout=120)
    frontend = Frontend(config, manager, metrics)
    app = frontend.inference_app()

    @web.middleware
    async def seen(request: web.Request, handler: Any) -> web.StreamResponse:
        counts.aiohttp += 1
        return await handler(request)

    app.middlewares.insert(0, seen)
    runner = MmsAppRunner(app, header_timeout=5.0, body_timeout=5.0, access_log=None, handle_signals=False)
    await runner.setup()
    assert runner.server is not None
    lean = frontend.lean_inference(fallback=runner.server)
    server = await asyncio.get_running_loop().create_server(lean, "127.0.0.1", 0)

    async def stop() -> None:
        server.close()
        lean.close()
        await runner.cleanup()
        await manager.shutdown(time.monotonic() + 5)

    return server.sockets[0].getsockname()[1], stop


def _post(target: bytes, body: bytes, extra: bytes = b"", auth: bytes = AUTH) -> bytes:
    return (b"POST " + target + b" HTTP/1.1\r\nHost: x\r\n" + auth + extra
            + b"Content-Length: %d\r\n\r\n" % len(body) + body)


def _statuses(raw: bytes) -> list[int]:
    """The status of each whole answer in *raw* (read by its Content-Length; 100 Continue has none)."""
    found = []
    while b"\r\n\r\n" in raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        length = next((int(line.split(b":")[1]) for line in lines[1:] if line.lower().startswith(b"content-length:")),
                      0)
        if len(rest) < length:
            break
        found.append(int(lines[0].split(b" ")[1]))
        raw = rest[length:]
    return found


async def _exchange(port: int, *writes: bytes, answers: int, pause: float = 0.0) -> list[int]:
    """Send *writes* on one connection; the statuses of the first *answers* answers. Between two writes the
    client waits *pause* seconds (to split a request over reads), or with none for the 100 Continue the next
    write waits for."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    raw = b""
    try:
        for i, data in enumerate(writes):
            if i and pause:
                await asyncio.sleep(pause)  # bounded: only to split the request over reads
            elif i:
                raw += await asyncio.wait_for(reader.read(65536), 30)
            writer.write(data)
            await writer.drain()
        while len(_statuses(raw)) < answers:
            chunk = await asyncio.wait_for(reader.read(1 << 20), 30)
            assert chunk, raw[:300]
            raw += chunk
    finally:
        writer.close()
    return _statuses(raw)


v2_body = json.dumps({"inputs": [{"name": "body", "datatype": "BYTES", "shape": [1], "data": ["hi"]}]}).encode()
multipart = (b"--b\r\nContent-Disposition: form-data; name=\"data\"; filename=\"k.jpg\"\r\n"
             b"Content-Type: image/jpeg\r\n\r\nJPEG\r\n--b--\r\n")
#: (what is sent, the statuses answered, which path's): one request each unless pipelined.
CASES: list[tuple[str, tuple[bytes, ...], list[int], str]] = [
    ("plain", (_post(b"/predictions/echo", b"hello"),), [200], "lean"),
    ("a query", (_post(b"/predictions/echo?x=1", b"hello"),), [200], "aiohttp"),
    ("HTTP/1.0", (_post(b"/predictions/echo", b"hi").replace(b"HTTP/1.1", b"HTTP/1.0", 1),), [200], "aiohttp"),
    ("unknown v2 model", (_post(b"/v2/models/nope/infer", v2_body),), [404], "lean"),
    ("bad header length", (_post(b"/v2/models/echo/infer", v2_body, b"Inference-Header-Content-Length: abc\r\n"),),
     [400], "lean"),
    ("v2 infer", (_post(b"/v2/models/echo/infer", v2_body, b"Content-Type: application/json\r\n"),), [200], "lean"),
    ("custom attributes", (_post(b"/invocations", b"x", b"X-Model-Name: echo\r\n"
                                 b"X-Amzn-SageMaker-Custom-Attributes: topk=2\r\n"),),
     [200], "lean"),
    ("a 3 MiB photo", (_post(b"/predictions/echo", PHOTO, b"Content-Type: image/jpeg\r\n"),), [200], "lean"),
    ("chunked", (b"POST /predictions/echo HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Transfer-Encoding: chunked\r\n\r\n"
                 b"3\r\nhel\r\n2\r\nlo\r\n0\r\n\r\n",), [200], "lean"),
    ("expect", (b"POST /predictions/echo HTTP/1.1\r\nHost: x\r\n" + AUTH
                + b"Expect: 100-continue\r\nContent-Length: 5\r\n\r\n", b"hello"), [100, 200], "lean"),
    ("a form", (_post(b"/predictions/echo", multipart, b"Content-Type: multipart/form-data; boundary=b\r\n"),),
     [200], "lean"),
    ("wrong token", (_post(b"/predictions/echo", b"x", auth=b"Authorization: Bearer WRONG\r\n"),), [401], "lean"),
    ("ping", (b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n",), [200], "lean"),
    ("api description", (b"OPTIONS / HTTP/1.1\r\nHost: x\r\n" + AUTH + b"\r\n",), [200], "aiohttp"),
    ("pipelined", (_post(b"/predictions/echo", b"a") + _post(b"/predictions/echo?x", b"b")
                   + _post(b"/predictions/echo", b"c"),), [200, 200, 200], "lean, then aiohttp for the rest"),
]


def test_each_request_is_parsed_and_admitted_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counts = _Counts()

    async def scenario() -> list[tuple[str, list[int], tuple[int, int, int]]]:
        port, stop = await _serve(tmp_path, counts, monkeypatch)
        seen = []
        try:
            for name, writes, statuses, _ in CASES:
                before = (counts.lean, counts.aiohttp, counts.admitted)
                answered = await _exchange(port, *writes, answers=len(statuses))
                seen.append((name, answered, (counts.lean - before[0], counts.aiohttp - before[1],
                                              counts.admitted - before[2])))
        finally:
            await stop()
        return seen

    for (name, answered, (lean, aiohttp, admitted)), (_, _, statuses, path) in zip(asyncio.run(scenario()), CASES):
        requests = statuses.count(200) + sum(1 for s in statuses if s >= 400)
        assert answered == statuses, name
        assert lean + aiohttp == requests and admitted == requests, (name, lean, aiohttp, admitted)
        expected_lean = {"lean": requests, "aiohttp": 0}.get(path, 1)
        assert lean == expected_lean, (name, lean, aiohttp)


def test_a_photo_is_read_on_the_lean_path_however_it_arrives(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Head and body in one write, the head alone then the body, the body in 64 KiB writes: the lean path reads
    it whole, and it is answered whole."""
    counts = _Counts()
    request = _post(b"/predictions/echo", PHOTO, b"Content-Type: image/jpeg\r\n")
    head = request[:request.index(b"\r\n\r\n") + 4]
    pieces = [request[i:i + 65536] for i in range(0, len(request), 65536)]

    async def scenario() -> list[list[int]]:
        port, stop = await _serve(tmp_path, counts, monkeypatch)
        try:
            return [await _exchange(port, request, answers=1), await _exchange(port, head, PHOTO, answers=1, pause=0.005),
                    await _exchange(port, *pieces, answers=1, pause=0.005)]
        finally:
            await stop()

    assert asyncio.run(scenario()) == [[200]] * 3
    assert (counts.lean, counts.aiohttp, counts.admitted) == (3, 0, 3)
