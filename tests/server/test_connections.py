"""What reaches the server before a handler does: request lines, headers, bodies, tokens, slow clients.

Raw sockets against a real server: every refusal is an MMS JSON error body, a chunked body is held
to ``max_request_size`` exactly, and a connection that stalls is closed after its timeout.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import re
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from mmsctl.http1.requests import UPGRADE_WITH_BODY
from tests.support.mmsctl_server import ServerInfo, make_noop_archive, running_mmsctl_server
from tests.support.waiting import wait_until_async

TOKEN = "s3cret-token"
MAX = 1000


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    noop = make_noop_archive(tmp_path_factory.mktemp("m") / "noop")
    with running_mmsctl_server(tmp_path_factory.mktemp("srv"), models={"noop": str(noop)}, token=TOKEN,
                               extra_config={"max_request_size": MAX, "request_header_timeout": 0.5,
                                             "request_body_timeout": 0.5, "max_buffered_bytes": 2 * MAX}) as info:
        yield info


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _exchange(url: str, data: bytes, deadline: float = 20.0) -> bytes:
    """Send *data*, then read until the server closes the connection (bounded by *deadline*)."""
    with socket.create_connection(("127.0.0.1", _port(url)), timeout=deadline) as sock:
        sock.sendall(data)
        out = b""
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            sock.settimeout(max(0.01, end - time.monotonic()))
            chunk = sock.recv(65536)  # socket.timeout fails the test: the server never closed
            if not chunk:
                return out
            out += chunk
        raise AssertionError(f"the server kept sending for {deadline:g} s and never closed: {out[:300]!r}")


def _mms_body(raw: bytes, status: int) -> dict:
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == str(status).encode(), raw[:300]
    data = json.loads(body)
    assert set(data) == {"code", "type", "message"} and data["code"] == status
    return data


AUTH = f"Authorization: Bearer {TOKEN}\r\n".encode()


@pytest.mark.parametrize("request_bytes, status, message", [
    (b"GET /" + b"a" * 10_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414, "Request URI too long."),
    (b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 10_000 + b"\r\n\r\n", 431, "Request header fields too large."),
    (b"GET /ping HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-H%d: 1\r\n" % i for i in range(200)) + b"\r\n", 431,
     "Too many request header fields."),
    (b"NOT HTTP AT ALL\r\n\r\n", 400, "Invalid HTTP message."),
], ids=["long-url", "long-header", "many-headers", "garbage"])
def test_unparsable_requests_get_the_mms_body(srv: ServerInfo, request_bytes: bytes, status: int, message: str) -> None:
    for url in (srv.inference_url, srv.management_url):
        body = _mms_body(_exchange(url, request_bytes), status)
        assert body["message"] == message and body["type"] == "BadRequestException"
    assert httpx.get(f"{srv.inference_url}/ping", timeout=10).status_code == 200


def _chunked(size: int) -> bytes:
    return (b"POST /predictions/noop HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Transfer-Encoding: chunked\r\n"
            b"Connection: close\r\n\r\n" + b"%x\r\n" % (size // 2) + b"x" * (size // 2) + b"\r\n"
            + b"%x\r\n" % (size - size // 2) + b"y" * (size - size // 2) + b"\r\n0\r\n\r\n")


def _predict(body: bytes, extra: bytes = b"") -> bytes:
    return (b"POST /predictions/noop HTTP/1.1\r\nHost: x\r\n" + AUTH + extra
            + b"Content-Length: %d\r\n\r\n" % len(body) + body)


def test_pipelined_requests_are_answered_in_order(srv: ServerInfo) -> None:
    raw = _exchange(srv.inference_url, _predict(b"aaa") + _predict(b"bbb") + _predict(b"ccc", b"Connection: close\r\n"))
    assert raw.count(b"HTTP/1.1 200 OK") == 3, raw[:300]
    assert raw.index(b"aaa") < raw.index(b"bbb") < raw.index(b"ccc")


def test_a_refused_request_that_expects_100_continue_ends_its_connection(srv: ServerInfo) -> None:
    """Told no 100 Continue, a client may send its body or not: after the refusal the connection closes, so no
    body is taken for the next request."""
    head = b"POST /predictions/noop HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"
    raw = _exchange(srv.inference_url, head)  # no token; then EOF, never a 100
    assert _mms_body(raw, 401)["type"] == "InvalidKeyException" and b"HTTP/1.1 100" not in raw
    assert b"\r\nConnection: close" in raw.split(b"\r\n\r\n")[0]


def test_a_keep_alive_connection_serves_plain_then_chunked_requests(srv: ServerInfo) -> None:
    """A connection whose first requests are plain predictions still serves whatever comes next."""
    with socket.create_connection(("127.0.0.1", _port(srv.inference_url)), timeout=20) as sock:
        for body in (b"one", b"two"):
            sock.sendall(_predict(body))
            answer = b""
            while not answer.endswith(body):  # socket.timeout fails the test
                chunk = sock.recv(65536)
                assert chunk, answer
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 200 OK") and b"x-request-id: " in answer
        sock.sendall(_chunked(10))
        rest = b""
        while chunk := sock.recv(65536):
            rest += chunk
    assert rest.startswith(b"HTTP/1.1 200") and rest.endswith(b"xxxxxyyyyy"), rest[:300]


def test_a_chunked_body_is_held_to_max_request_size_exactly(srv: ServerInfo) -> None:
    ok = _exchange(srv.inference_url, _chunked(MAX))
    assert ok.startswith(b"HTTP/1.1 200"), ok[:200]
    assert ok.endswith(b"x" * (MAX // 2) + b"y" * (MAX - MAX // 2))  # the handler echoed all of it
    body = _mms_body(_exchange(srv.inference_url, _chunked(MAX + 1)), 413)
    assert body["type"] == "RequestEntityTooLargeException"
    declared = httpx.post(f"{srv.inference_url}/predictions/noop", content=b"z" * (MAX + 1),
                          headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert declared.status_code == 413 and declared.json()["type"] == "RequestEntityTooLargeException"


def test_a_connection_that_never_finishes_its_head_is_closed(srv: ServerInfo) -> None:
    for url in (srv.inference_url, srv.management_url, srv.metrics_url):
        assert _exchange(url, b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Slow: ") == b""
        assert _exchange(url, b"") == b""  # idle: said nothing at all


def test_a_body_that_stops_coming_is_answered_408_and_closed(srv: ServerInfo) -> None:
    partial = b"POST /predictions/noop HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Content-Length: 100\r\n\r\nabc"
    body = _mms_body(_exchange(srv.inference_url, partial), 408)
    assert body == {"code": 408, "type": "RequestTimeoutException",
                    "message": "The request body did not arrive within 0.5 s (request_body_timeout)."}
    register = (b"POST /models HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Content-Type: application/json\r\n"
                b"Content-Length: 50\r\n\r\n{\"url\":")
    assert _mms_body(_exchange(srv.management_url, register), 408)["type"] == "RequestTimeoutException"


def _flood(url: str, head: bytes, most: int = 1 << 24) -> bytes:
    """Send *head*, then ``a`` after ``a`` (at most *most* bytes) while reading what comes back until the server
    closes; what it answered."""
    with socket.create_connection(("127.0.0.1", _port(url)), timeout=20) as sock:
        sock.sendall(head)
        closed = threading.Event()

        def pump() -> None:
            sent, block = 0, b"a" * 65536
            while not closed.is_set() and sent < most:
                try:
                    sock.sendall(block)
                except OSError:  # the server closed: nothing more to send
                    return
                sent += len(block)

        pumping = threading.Thread(target=pump, daemon=True)
        pumping.start()
        out = b""
        try:
            while chunk := sock.recv(65536):  # socket.timeout fails the test: the server kept reading
                out += chunk
        except ConnectionResetError:  # closed with the flood unread
            pass
        finally:
            closed.set()
            pumping.join(20)
    return out


@pytest.mark.parametrize("target", ["/predictions/noop", "/predictions/noop?aiohttp=1"], ids=["lean", "aiohttp"])
def test_a_chunked_trailer_that_never_ends_is_refused_and_closed(srv: ServerInfo, target: str) -> None:
    """A trailer field whose value never ends is cut at the head's limit (431), then the connection closes: it
    never holds the server's loop (each read used to grow the value by copying it). (On aiohttp's path the body
    timeout may come first: a 408, the connection closed all the same.)"""
    head = (b"POST " + target.encode() + b" HTTP/1.1\r\nHost: x\r\n" + AUTH
            + b"Transfer-Encoding: chunked\r\n\r\n0\r\nX-T: ")
    raw = _flood(srv.inference_url, head)
    if "aiohttp" in target and raw.startswith(b"HTTP/1.1 408"):
        _mms_body(raw, 408)
    else:
        assert _mms_body(raw, 431)["message"] == "Request header fields too large."
    assert httpx.get(f"{srv.inference_url}/ping", timeout=10).status_code == 200


SMUGGLED = b"POST /predictions/noop HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Content-Length: 8\r\n\r\nsmuggled"


PATHS = pytest.mark.parametrize("target", ["/predictions/noop", "/predictions/noop?aiohttp=1"], ids=["lean", "aiohttp"])


def _upgrade(target: str, framing: bytes, extra: bytes = b"") -> bytes:
    """The head of a request that asks to upgrade to h2c (as ``curl --http2`` on an http:// URL sends it)."""
    return (b"POST " + target.encode() + b" HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Connection: Upgrade, HTTP2-Settings\r\n"
            b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n" + extra + framing + b"\r\n")


def _answers(raw: bytes) -> list[bytes]:
    """The answers in *raw*, each with its body (their heads are the server's: a Content-Length each)."""
    answers = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        size = int(re.search(rb"\r\nContent-Length: (\d+)", head, re.IGNORECASE).group(1))  # type: ignore[union-attr]
        answers.append(head + b"\r\n\r\n" + rest[:size])
        raw = rest[size:]
    return answers


@pytest.mark.parametrize("reads", ["one", "two", "small"])
@PATHS
def test_an_upgrade_with_a_length_is_served_in_http_1_1_and_nothing_is_smuggled(srv: ServerInfo, target: str,
                                                                                reads: str) -> None:
    """``Connection: Upgrade`` with a Content-Length body: the upgrade is not taken (no 101) and the request is
    served as any other: its body is the bytes of its declared length, however they arrive, never a request of
    their own (llhttp skips such a body: its bytes would be served next). One answer, on both paths."""
    head = _upgrade(target, b"Content-Length: %d\r\n" % len(SMUGGLED))
    pieces = {"one": [head + SMUGGLED], "two": [head, SMUGGLED],
              "small": [head] + [SMUGGLED[i:i + 16] for i in range(0, len(SMUGGLED), 16)]}[reads]
    answers = _answers(_send_in_pieces(srv.inference_url, pieces, 0.02))  # (closed: the head timeout, 0.5 s)
    assert len(answers) == 1 and answers[0].startswith(b"HTTP/1.1 200 OK\r\n"), answers
    assert answers[0].endswith(b"\r\n\r\n" + SMUGGLED)


@pytest.mark.parametrize("reads", ["one", "two"])
@PATHS
def test_a_request_pipelined_after_an_upgrade_with_a_body_is_served_after_it(srv: ServerInfo, target: str,
                                                                             reads: str) -> None:
    """The request after it, in the same read or the next, is read from the upgrade's declared length on (aiohttp
    would drop it from the same read: its reads are cut after each request): two answers, in order."""
    first = _upgrade(target, b"Content-Length: %d\r\n" % len(SMUGGLED)) + SMUGGLED
    last = _predict(b"last", b"Connection: close\r\n").replace(b"/predictions/noop", target.encode(), 1)
    answers = _answers(_send_in_pieces(srv.inference_url, [first + last] if reads == "one" else [first, last], 0.02))
    assert [a.split(b"\r\n", 1)[0] for a in answers] == [b"HTTP/1.1 200 OK"] * 2, answers
    assert answers[0].endswith(b"\r\n\r\n" + SMUGGLED) and answers[1].endswith(b"\r\n\r\nlast")


@pytest.mark.parametrize("length, sent, status", [(MAX + 1, b"", 413), (100, b"abc", 408)], ids=["too-large", "stops"])
@PATHS
def test_an_upgrade_with_a_length_is_held_to_the_body_limits(srv: ServerInfo, target: str, length: int, sent: bytes,
                                                              status: int) -> None:
    """Its body is held to ``max_request_size`` (413) and ``request_body_timeout`` (408) as any other's, then the
    connection closes."""
    raw = _exchange(srv.inference_url, _upgrade(target, b"Content-Length: %d\r\n" % length) + sent)
    assert len(re.findall(rb"HTTP/1\.1 \d{3} ", raw)) == 1, raw[:400]
    _mms_body(raw, status)


@PATHS
def test_an_upgrade_that_expects_100_continue_is_told_to_send_its_body(srv: ServerInfo, target: str) -> None:
    """``Expect: 100-continue`` with an upgrade (curl sends both for a large body): a 100, never a 101, then the
    body is read and answered."""
    head = _upgrade(target, b"Content-Length: 5\r\nConnection: close\r\n", b"Expect: 100-continue\r\n")
    with socket.create_connection(("127.0.0.1", _port(srv.inference_url)), timeout=20) as sock:
        sock.sendall(head)
        told = b""
        while not told.endswith(b"\r\n\r\n"):
            chunk = sock.recv(65536)  # socket.timeout fails the test: the client would wait for ever
            assert chunk, told
            told += chunk
        sock.sendall(b"hello")
        rest = b""
        while chunk := sock.recv(65536):
            rest += chunk
    assert told.startswith(b"HTTP/1.1 100 Continue\r\n"), told
    assert rest.startswith(b"HTTP/1.1 200 OK\r\n") and rest.endswith(b"\r\n\r\nhello"), rest[:300]


@pytest.mark.parametrize("reads", [1, 2])
@PATHS
def test_an_upgrade_with_a_chunked_body_is_refused_and_nothing_is_smuggled(srv: ServerInfo, target: str,
                                                                           reads: int) -> None:
    """A chunked body with ``Connection: Upgrade`` stays refused: one answer, a 400 that says why, then the
    connection closes, on both paths."""
    head = _upgrade(target, b"Transfer-Encoding: chunked\r\n")
    body = b"%x\r\n" % len(SMUGGLED) + SMUGGLED + b"\r\n0\r\n\r\n"
    raw = _send_in_pieces(srv.inference_url, [head, body] if reads == 2 else [head + body], 0.05)
    assert len(re.findall(rb"HTTP/1\.1 \d{3} ", raw)) == 1 and b"smuggled" not in raw, raw[:400]
    assert _mms_body(raw, 400)["message"] == UPGRADE_WITH_BODY
    assert b"\r\nConnection: close\r\n" in raw.split(b"\r\n\r\n")[0] + b"\r\n"


def _curl_speaks_http2() -> bool:
    curl = shutil.which("curl")
    if curl is None:
        return False
    version = subprocess.run([curl, "--version"], capture_output=True, timeout=10, check=False).stdout
    return b"HTTP2" in version


@pytest.mark.skipif(not _curl_speaks_http2(), reason="no curl built with HTTP/2 (apt-get install curl)")
@PATHS
def test_curl_http2_with_a_body_on_an_http_url_is_served(srv: ServerInfo, target: str, tmp_path: Path) -> None:
    """``curl --http2 --data-binary @FILE`` on an http:// URL asks to upgrade to h2c with its body: served in
    HTTP/1.1, as MMS serves it."""
    sent = tmp_path / "body.bin"
    sent.write_bytes(b"POST /predictions/noop HTTP/1.1\r\nHost: x\r\n\r\n" * 9)  # (noop answers text)
    done = subprocess.run(["curl", "-sS", "--http2", "--max-time", "20", "-H", f"Authorization: Bearer {TOKEN}",
                           "--data-binary", f"@{sent}", "-o", str(tmp_path / "answer"), "-w", "%{http_code} %{http_version}",
                           f"{srv.inference_url}{target}"], capture_output=True, timeout=30, check=False)
    assert done.returncode == 0 and done.stdout == b"200 1.1", (done.stdout, done.stderr)
    assert (tmp_path / "answer").read_bytes() == sent.read_bytes()


@pytest.mark.parametrize("reads", ["one", "answered"])
@PATHS
def test_an_upgrade_without_a_body_is_served_as_http_1_1(srv: ServerInfo, target: str, reads: str) -> None:
    """No upgrade is offered: the request is served, and the connection goes on in HTTP/1.1, with the next request
    sent after its answer or in the same read."""
    head = _upgrade(target, b"")
    last = _predict(b"last", b"Connection: close\r\n").replace(b"/predictions/noop", target.encode(), 1)
    with socket.create_connection(("127.0.0.1", _port(srv.inference_url)), timeout=20) as sock:
        raw = b""
        if reads == "one":
            sock.sendall(head + last)
        else:
            sock.sendall(head)
            while not raw.endswith(b"\r\n\r\n"):  # an empty body: the answer ends with its head
                chunk = sock.recv(65536)  # socket.timeout fails the test
                assert chunk, raw
                raw += chunk
            sock.sendall(last)
        while chunk := sock.recv(65536):  # the last request closes the connection
            raw += chunk
    answers = _answers(raw)
    assert [a.split(b"\r\n", 1)[0] for a in answers] == [b"HTTP/1.1 200 OK"] * 2, answers
    assert b"\r\nContent-Length: 0\r\n" in answers[0] and answers[1].endswith(b"\r\n\r\nlast")


@pytest.mark.parametrize("value", [
    "Bearer s\u00e9cret".encode(), "Bearer \u2603".encode(), b"Bearer \xff\xfe", b"Bearer", b"Basic czNjcmV0",
    b"bearer  " + TOKEN.encode() + b"x", b"Bearer " + TOKEN.encode()[:-1],
], ids=["non-ascii", "snowman", "not-utf8", "no-token", "basic", "longer", "shorter"])
def test_a_bad_or_strange_credential_is_a_401_on_every_api(srv: ServerInfo, value: bytes) -> None:
    for url, path in ((srv.inference_url, "/predictions/noop"), (srv.management_url, "/models")):
        raw = _exchange(url, b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nAuthorization: " + value
                        + b"\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx")
        body = _mms_body(raw, 401)
        assert body["type"] == "InvalidKeyException"
        assert b"WWW-Authenticate: Bearer" in raw


def test_which_routes_are_open(srv: ServerInfo) -> None:
    """Health checks and metrics are open; anything else needs the key, however its path is spelled."""
    inf = srv.inference_url
    assert httpx.get(f"{inf}/ping", timeout=10).status_code == 200
    assert httpx.get(f"{inf}/ping/noop", timeout=10).status_code == 200
    assert httpx.get(f"{srv.metrics_url}/metrics", timeout=10).status_code == 200
    for path in ("/pingx", "/ping/../predictions/noop", "/ping/%2e%2e/predictions/noop", "/models"):
        assert httpx.post(f"{inf}{path}", content=b"x", timeout=10).status_code == 401, path
    assert httpx.get(f"{srv.management_url}/ping", timeout=10).status_code == 401  # not a health check there
    ok = httpx.post(f"{inf}/predictions/noop", content=b"x", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert ok.status_code == 200 and ok.text == "x"


def test_a_compressed_body_reaches_the_handler_as_sent(srv: ServerInfo, tmp_path: Path) -> None:
    """As in MMS, bodies are not decompressed: a gzip bomb never expands in the server."""
    packed = gzip.compress(b"\0" * 900_000)
    assert len(packed) < MAX
    resp = httpx.post(f"{srv.inference_url}/predictions/noop", content=packed, timeout=10,
                      headers={"Authorization": f"Bearer {TOKEN}", "Content-Encoding": "gzip",
                               "Content-Type": "application/octet-stream"})
    assert resp.status_code == 200
    assert resp.content == packed.decode("utf-8", "replace").encode()  # the echo handler got the gzip bytes


def test_the_bodies_held_at_once_are_bounded(srv: ServerInfo) -> None:
    """Many large requests together cannot take the server's memory: past max_buffered_bytes, 503."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    url = f"{srv.inference_url}/predictions/noop"

    async def scenario() -> tuple[list[httpx.Response], httpx.Response, httpx.Response]:
        async with httpx.AsyncClient(timeout=30, headers=headers) as client:
            # each holds ~900 bytes while its worker sleeps; the one worker takes them in turn
            slow = [asyncio.ensure_future(client.post(url, data={"data": "sleep:1", "pad": "p" * 800}))
                    for _ in range(2)]
            async def one_queued() -> bool:
                return "mmsctl_queue_depth{model=\"noop\"} 1.0" in (await client.get(srv.metrics_url + "/metrics")).text

            await wait_until_async(one_queued, timeout=30, what="one request queued behind the busy worker")
            refused = await client.post(url, content=b"q" * 800)
            small = await client.get(f"{srv.inference_url}/ping")
            return [await s for s in slow], refused, small

    held, refused, ping = asyncio.run(scenario())
    assert [r.status_code for r in held] == [200, 200]
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "1"
    assert "max_buffered_bytes" in refused.json()["message"]
    assert ping.status_code == 200  # requests without a body are never turned away
    ok = httpx.post(url, content=b"q" * 800, headers=headers, timeout=10)
    assert ok.status_code == 200  # once answered, their bytes are free again


def _send_in_pieces(url: str, pieces: list[bytes], pause: float) -> bytes:
    """Send *pieces* as separate TCP segments (*pause* apart, so the server reads them apart), then read
    until the server closes (the last piece asks it to)."""
    with socket.create_connection(("127.0.0.1", _port(url)), timeout=20) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i, piece in enumerate(pieces):
            if i:
                time.sleep(pause)  # bounded: only to split the request over reads, nothing waits on it
            sock.sendall(piece)
        out = b""
        while chunk := sock.recv(65536):  # socket.timeout fails the test
            out += chunk
    return out


def test_a_request_whose_body_comes_in_a_second_write_is_served_on_the_lean_path(srv: ServerInfo) -> None:
    """Go's and curl's clients write the head and a larger body separately: still the lean path
    (aiohttp's answers carry a Server header, the lean path's do not)."""
    body = b"b" * 900
    head = _predict(body, b"Connection: keep-alive\r\n")[: -len(body)]
    raw = _send_in_pieces(srv.inference_url, [head, body[:400], body[400:], _predict(b"last", b"Connection: close\r\n")],
                          pause=0.02)
    answers = raw.split(b"HTTP/1.1 ")[1:]
    assert [a[:3] for a in answers] == [b"200", b"200"], raw[:400]
    assert answers[0].endswith(body) and b"\r\nServer:" not in answers[0].split(b"\r\n\r\n")[0]


def test_a_slow_upload_is_served_on_the_lean_path_within_the_body_timeout(srv: ServerInfo) -> None:
    """A body that takes most of request_body_timeout to arrive is still the lean path's, and served; nothing is
    lost. (A body that stops coming altogether gets a 408: see the test above.)"""
    body = b"s" * 600
    head = _predict(body, b"Connection: close\r\n")[: -len(body)]
    raw = _send_in_pieces(srv.inference_url, [head, body[:300], body[300:]], pause=0.2)
    assert raw.startswith(b"HTTP/1.1 200") and raw.endswith(body), raw[:300]
    assert b"\r\nServer:" not in raw.split(b"\r\n\r\n")[0]


def test_slow_uploads_hold_no_more_than_max_buffered_bytes(srv: ServerInfo) -> None:
    """Clients that send a head and then their body slowly hold their declared bytes from the head on: past
    max_buffered_bytes (2000 here) the next one is refused at once (503), and the slow ones are still served."""
    port = _port(srv.inference_url)
    heads = [_predict(b"x" * MAX)[:-MAX], _predict(b"y" * MAX)[:-MAX]]
    slow = [socket.create_connection(("127.0.0.1", port), timeout=20) for _ in heads]
    try:
        for sock, head in zip(slow, heads):
            sock.sendall(head)
        def third() -> bytes:
            with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
                sock.sendall(_predict(b"z" * 10, b"Connection: close\r\n"))
                return sock.recv(65536)
        refused = third()
        for _ in range(50):  # bounded: the two heads may be read after the third's
            if refused.startswith(b"HTTP/1.1 503"):
                break
            refused = third()
        assert refused.startswith(b"HTTP/1.1 503") and b"max_buffered_bytes" in refused, refused[:300]
        answers = []
        for sock, fill in zip(slow, (b"x", b"y")):
            sock.sendall(fill * MAX)
            answer = b""
            while not answer.endswith(fill * MAX):  # socket.timeout fails the test
                answer += sock.recv(65536)
            answers.append(answer)
        assert all(a.startswith(b"HTTP/1.1 200") for a in answers)
    finally:
        for sock in slow:
            sock.close()


@pytest.mark.parametrize("extra, status", [
    (b"Content-Length: 5000\r\n", 413),
    (b"Content-Length: " + b"9" * 5000 + b"\r\n", 400),  # not a length llhttp takes
    (b"Expect: 100-continue\r\nContent-Length: 10\r\n", 100),
    (b"Expect: magic\r\nContent-Length: 10\r\n", 417),
], ids=["too-large", "thousands-of-digits", "expect-continue", "expect-other"])
def test_a_head_alone_is_answered_when_it_must_be(srv: ServerInfo, extra: bytes, status: int) -> None:
    """A declared body over max_request_size is refused, and a client waiting for 100 Continue gets it, as soon
    as the head is read: nothing waits for a body."""
    head = b"POST /predictions/noop HTTP/1.1\r\nHost: x\r\n" + AUTH + extra + b"Connection: close\r\n\r\n"
    with socket.create_connection(("127.0.0.1", _port(srv.inference_url)), timeout=20) as sock:
        sock.sendall(head)
        first = sock.recv(65536)  # socket.timeout fails the test: the server waited for a body
    assert first.split(b" ")[1] == b"%d" % status, first[:200]  # (aiohttp answers a parse error in HTTP/1.0)
