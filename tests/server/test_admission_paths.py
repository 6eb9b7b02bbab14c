"""One answer whichever path a request takes, and one answer per complete request.

Raw sockets against a real server. The same ``POST /predictions/echo`` goes to the lean path
(plain) and to aiohttp's path (a query string sends it there): generated header anomalies must
get the same status and error type from both. Requests pipelined before bytes that
cannot be parsed are each answered, then a 400 with the MMS body, then the connection closes.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Iterator, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.mmsctl_server import ServerInfo, make_noop_archive, running_mmsctl_server

TOKEN = "s3cret-token"
LEAN = b"/predictions/echo"
FULL = b"/predictions/echo?z=1"  # a query: the lean path hands it to aiohttp unparsed


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    echo = make_noop_archive(tmp_path_factory.mktemp("m") / "echo", name="echo")
    with running_mmsctl_server(tmp_path_factory.mktemp("srv"), models={"echo": str(echo)}, token=TOKEN) as info:
        yield info


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _read_all(sock: socket.socket, deadline: float = 20.0) -> bytes:
    """Everything until the server closes (socket.timeout fails the test: it never closed)."""
    sock.settimeout(deadline)
    out = b""
    while chunk := sock.recv(65536):
        out += chunk
    return out


def _responses(raw: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """The answers in *raw*, each (status, headers, body), read by their Content-Length."""
    answers = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        length = int(headers["content-length"])
        answers.append((int(lines[0].split(" ")[1]), headers, rest[:length]))
        raw = rest[length:]
    return answers


def _one_answer(url: str, data: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send one request on a fresh connection and read its one answer (the connection may stay open)."""
    with socket.create_connection(("127.0.0.1", _port(url)), timeout=20) as sock:
        sock.sendall(data)
        raw = b""
        end = time.monotonic() + 20
        while time.monotonic() < end:
            answers = _responses(raw) if b"\r\n\r\n" in raw else []
            if answers and len(raw.partition(b"\r\n\r\n")[2]) >= int(answers[0][1]["content-length"]):
                return answers[0]
            chunk = sock.recv(65536)
            assert chunk, raw[:300]
            raw += chunk
    raise AssertionError(f"no whole answer in 20 s: {raw[:300]!r}")


def _error_type(answer: tuple[int, dict[str, str], bytes]) -> Optional[str]:
    status, _, body = answer
    if status < 400:
        return None
    data = json.loads(body)
    assert set(data) == {"code", "type", "message"} and data["code"] == status
    return str(data["type"])


def _request(target: bytes, headers: list[tuple[bytes, bytes]], version: bytes = b"HTTP/1.1") -> bytes:
    return (b"POST " + target + b" " + version + b"\r\n" + b"".join(k + b": " + v + b"\r\n" for k, v in headers)
            + b"\r\nhello")


AUTH = b"Bearer " + TOKEN.encode()
#: Each header the generator may send (0, 1 or 2 times), with the values it picks from.
CHOICES: dict[bytes, list[bytes]] = {
    b"Host": [b"a", b"b"],
    b"User-Agent": [b"x", b"y"],
    b"Authorization": [AUTH, b"Bearer WRONG"],
    b"Content-Type": [b"text/plain", b"application/octet-stream"],
    b"Content-Length": [b"5"],
    b"X-Tag": [b"1", b"2"],
}


@st.composite
def header_sets(draw: st.DrawFn) -> tuple[list[tuple[bytes, bytes]], bytes]:
    headers = []
    for name, values in CHOICES.items():
        low = 1 if name == b"Content-Length" else 0
        for _ in range(draw(st.integers(low, 2))):
            spelled = draw(st.sampled_from([name, name.lower(), name.upper()]))
            headers.append((spelled, draw(st.sampled_from(values))))
    version = draw(st.sampled_from([b"HTTP/1.1", b"HTTP/1.1", b"HTTP/1.0"]))
    return draw(st.permutations(headers)), version


@settings(max_examples=40, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=header_sets())
def test_both_paths_give_header_anomalies_the_same_answer(srv: ServerInfo, case: tuple) -> None:
    headers, version = case
    lean = _one_answer(srv.inference_url, _request(LEAN, headers, version))
    full = _one_answer(srv.inference_url, _request(FULL, headers, version))
    assert (lean[0], _error_type(lean)) == (full[0], _error_type(full)), (headers, lean, full)
    assert "server" in full[1]  # aiohttp answered the query's
    if lean[0] == 200 and version == b"HTTP/1.1":
        assert "server" not in lean[1] and lean[2] == b"hello"  # ... and the lean path its own


@pytest.mark.parametrize("headers, status, error", [
    ([(b"Content-Length", b"5"), (b"Authorization", AUTH)], 400, "BadRequestException"),
    ([(b"Host", b"a"), (b"Host", b"b"), (b"Content-Length", b"5"), (b"Authorization", AUTH)], 400,
     "BadRequestException"),
    ([(b"Host", b"a"), (b"User-Agent", b"x"), (b"User-Agent", b"y"), (b"Content-Length", b"5"),
      (b"Authorization", AUTH)], 400, "BadRequestException"),
    ([(b"Host", b"a"), (b"Authorization", b"Bearer WRONG"), (b"Authorization", AUTH), (b"Content-Length", b"5")],
     400, "BadRequestException"),
    ([(b"Host", b"a"), (b"Authorization", b"Bearer WRONG"), (b"Content-Length", b"5")], 401, "InvalidKeyException"),
    ([(b"Host", b"a"), (b"Authorization", AUTH), (b"Content-Length", b"5")], 200, None),
], ids=["no-host", "two-host", "two-user-agent", "wrong-then-right-token", "wrong-token", "plain"])
def test_the_lean_path_refuses_what_the_full_path_refuses(srv: ServerInfo, headers: list, status: int,
                                                          error: Optional[str]) -> None:
    for target in (LEAN, FULL):
        answer = _one_answer(srv.inference_url, _request(target, headers))
        assert (answer[0], _error_type(answer)) == (status, error), (target, answer)


def test_connection_close_on_the_lean_path_closes_after_the_answer(srv: ServerInfo) -> None:
    headers = [(b"Host", b"a"), (b"Authorization", AUTH), (b"Content-Length", b"5"), (b"Connection", b"close")]
    with socket.create_connection(("127.0.0.1", _port(srv.inference_url)), timeout=20) as sock:
        sock.sendall(_request(LEAN, headers))
        (status, _, body), = _responses(_read_all(sock))
    assert (status, body) == (200, b"hello")


GARBAGE = b"GARBAGE\r\n\r\n"
PREDICT = b"Host: a\r\nAuthorization: " + AUTH + b"\r\nContent-Length: 5\r\n\r\nfirst"


@pytest.mark.parametrize("api, first, expected", [
    ("inference", b"POST " + LEAN + b" HTTP/1.1\r\n" + PREDICT, b"first"),
    ("inference", b"POST " + FULL + b" HTTP/1.1\r\n" + PREDICT, b"first"),
    ("management", b"GET /models HTTP/1.1\r\nHost: a\r\nAuthorization: " + AUTH + b"\r\n\r\n", b'"modelName": "echo"'),
], ids=["inference-lean-first", "inference-full-first", "management"])
def test_a_request_pipelined_before_bad_bytes_is_answered_then_400(srv: ServerInfo, api: str, first: bytes,
                                                                   expected: bytes) -> None:
    url = srv.inference_url if api == "inference" else srv.management_url
    with socket.create_connection(("127.0.0.1", _port(url)), timeout=20) as sock:
        sock.sendall(first + first + GARBAGE)
        raw = _read_all(sock)  # then EOF: the server closed
    answers = _responses(raw)
    assert [a[0] for a in answers] == [200, 200, 400], raw[:600]
    assert all(expected in a[2] for a in answers[:2])
    assert _error_type(answers[2]) == "BadRequestException"
