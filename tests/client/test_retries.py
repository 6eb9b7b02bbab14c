"""The client's retry policy (docs/cli.md, "Retries and timeouts") against a scripted real server.

Each test scripts what a loopback HTTP server does with the next requests (answer a status,
drop the connection after reading the request, answer late) and records what arrived, so
a policy change (a POST sent twice, a missing backoff step) fails here.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator, Union

import pytest

from mmsctl.client._http import HttpApi
from mmsctl.errors import ApiError, ConnectionFailed, RequestTimeout
from tests.support._proc import free_port

DROP = "drop"  # read the request, then close the connection without answering
LATE = "late"  # answer 200 after one second


@dataclass
class Scripted:
    url: str
    script: deque[Union[int, str]] = field(default_factory=deque)
    received: list[tuple[str, str, bytes]] = field(default_factory=list)

    def then(self, *steps: Union[int, str]) -> None:
        self.script.extend(steps)


@contextmanager
def scripted_server() -> Iterator[Scripted]:
    state = Scripted(url="")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
            pass

        def _any(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            state.received.append((self.command, self.path, body))
            step = state.script.popleft() if state.script else 200
            if step == DROP:
                self.close_connection = True
                return
            if step == LATE:
                time.sleep(1.0)
                step = 200
            assert isinstance(step, int)
            if step == 200:
                payload = {"status": "ok"}
            else:
                payload = {"code": step, "type": "ServiceUnavailableException", "message": "busy"}
            data = json.dumps(payload).encode()
            self.send_response(step)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = _any  # noqa: N815 - http.server's naming

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    # shutdown() waits out one poll: 0.5 s by default, in every test that starts this server
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def server() -> Iterator[Scripted]:
    with scripted_server() as state:
        yield state


def api(url: str, sleeps: list[float], retries: int = 2, timeout: float = 5.0) -> HttpApi:
    return HttpApi(url, retries=retries, timeout=timeout, sleep=sleeps.append)


def test_get_is_retried_on_503_with_doubling_backoff(server: Scripted) -> None:
    server.then(503, 502)
    sleeps: list[float] = []
    response = api(server.url, sleeps).request("GET", "/models")
    assert response.json() == {"status": "ok"}
    assert [r[0] for r in server.received] == ["GET"] * 3
    assert sleeps == pytest.approx([0.2, 0.4])


def test_get_gives_up_after_the_last_attempt_with_the_server_error(server: Scripted) -> None:
    server.then(503, 503, 503, 503)
    sleeps: list[float] = []
    with pytest.raises(ApiError, match="busy") as info:
        api(server.url, sleeps).request("GET", "/models")
    assert info.value.status == 503
    assert len(server.received) == 3 and sleeps == pytest.approx([0.2, 0.4])


def test_put_is_retried_after_the_connection_broke(server: Scripted) -> None:
    server.then(DROP)
    sleeps: list[float] = []
    api(server.url, sleeps).request("PUT", "/models/m", params={"min_worker": 2})
    assert [r[0] for r in server.received] == ["PUT", "PUT"]
    assert sleeps == pytest.approx([0.2])


@pytest.mark.parametrize("method", ["POST", "DELETE"])
def test_a_sent_post_or_delete_is_never_sent_again(server: Scripted, method: str) -> None:
    server.then(DROP)
    sleeps: list[float] = []
    with pytest.raises(ConnectionFailed, match="connection to 127.0.0.1"):
        api(server.url, sleeps).request(method, "/models", content=b"payload")
    assert [(m, body) for m, _, body in server.received] == [(method, b"payload")]
    assert sleeps == []


@pytest.mark.parametrize("method", ["POST", "DELETE"])
def test_post_or_delete_answered_503_is_not_retried(server: Scripted, method: str) -> None:
    server.then(503)
    sleeps: list[float] = []
    with pytest.raises(ApiError, match="busy"):
        api(server.url, sleeps).request(method, "/models")
    assert len(server.received) == 1 and sleeps == []


def test_a_refused_connection_is_retried_for_any_method() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    sleeps: list[float] = []
    with pytest.raises(ConnectionFailed, match="connection refused"):
        api(url, sleeps).request("POST", "/models")
    assert sleeps == pytest.approx([0.2, 0.4])


def test_a_read_timeout_is_never_retried(server: Scripted) -> None:
    server.then(LATE)
    sleeps: list[float] = []
    with pytest.raises(RequestTimeout, match="did not answer after 0.3 s"):
        api(server.url, sleeps, timeout=0.3).request("GET", "/models")
    assert len(server.received) == 1 and sleeps == []


def test_retries_zero_sends_once_and_per_call_retries_override(server: Scripted) -> None:
    server.then(503, 503)
    sleeps: list[float] = []
    client = api(server.url, sleeps, retries=0)
    with pytest.raises(ApiError):
        client.request("GET", "/models")
    assert len(server.received) == 1
    assert client.request("GET", "/models", retries=1).status_code == 200
    assert len(server.received) == 3 and sleeps == pytest.approx([0.2])


def test_ok_statuses_are_returned_not_retried(server: Scripted) -> None:
    server.then(503)
    sleeps: list[float] = []
    response = api(server.url, sleeps).request("GET", "/models", ok_statuses=(503,))
    assert response.status_code == 503 and len(server.received) == 1 and sleeps == []
