"""The client core's two limits, against a loopback server that misbehaves on purpose.

* A call's timeout bounds the whole call: a server that trickles its body or its headers a
  byte at a time, or never answers, fails at the deadline with :class:`RequestTimeout`
  naming the server and the limit (each of these would hold the call for hours otherwise).
* An answer over ``max_response_bytes`` is an error naming the server, found while
  streaming: a huge ``Content-Length`` is refused unread, an endless body is cut off.

Both faces (sync and async) run every test.
"""

from __future__ import annotations

import asyncio
from typing import Any, Iterator

import pytest

from mmsctl.client._errors import AnswerTooLarge
from mmsctl.client.contexts import Context
from mmsctl.errors import ConfigError, RequestTimeout
from tests.client.faces import Face
from tests.support.misbehaving import (
    ENDLESS,
    HUGE,
    SILENT,
    TRICKLE,
    TRICKLE_HEADERS,
    Misbehaving,
    answer,
    misbehaving_server,
)

LIMIT = 256 * 1024


@pytest.fixture(params=["sync", "async"])
def face(request: pytest.FixtureRequest) -> Face:
    return Face(request.param)


def _context(srv: Misbehaving) -> Context:
    return Context("bad", srv.url, srv.url, srv.url)


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[Misbehaving]:
    with misbehaving_server(default=request.param) as srv:
        yield srv


def list_models(face: Face, srv: Misbehaving, **kwargs: Any) -> list[Any]:
    """``list_models`` with a fresh client of *face* (the async one in one event loop, start to end)."""
    from mmsctl.client.management import AsyncManagementClient, ManagementClient

    if face.kind == "sync":
        with ManagementClient(_context(srv), **kwargs) as client:
            return client.list_models()

    async def run() -> list[Any]:
        async with AsyncManagementClient(_context(srv), **kwargs) as client:
            return await client.list_models()

    return asyncio.run(run())


@pytest.mark.parametrize("server, said", [(TRICKLE, "did not finish its answer in 1 s"),
                                          (TRICKLE_HEADERS, "1 s"), (SILENT, "did not answer after 1 s")],
                         indirect=["server"], ids=["body", "headers", "silent"])
def test_the_timeout_bounds_the_whole_call(face: Face, server: Misbehaving, said: str) -> None:
    with pytest.raises(RequestTimeout) as info:
        list_models(face, server, timeout=1.0, retries=2)
    assert server.host in info.value.message and said in info.value.message
    assert info.value.exit_code == 7
    assert server.requests == ["GET /models"]  # a timeout is never retried


@pytest.mark.parametrize("server", [HUGE], indirect=True)
def test_an_announced_length_over_the_limit_is_refused_unread(face: Face, server: Misbehaving) -> None:
    with pytest.raises(AnswerTooLarge) as info:
        list_models(face, server, timeout=30.0, max_response_bytes=LIMIT)
    message = info.value.message
    assert server.host in message and f"{LIMIT:,} bytes" in message and info.value.exit_code == 8
    # what the server got written before the client hung up is socket buffers, not the GiB
    assert server.body_bytes < 64 * LIMIT


@pytest.mark.parametrize("server", [ENDLESS], indirect=True)
def test_an_endless_answer_is_cut_off_at_the_limit(face: Face, server: Misbehaving,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MMSCTL_MAX_RESPONSE_BYTES", str(LIMIT))
    with pytest.raises(AnswerTooLarge, match=server.host):
        list_models(face, server, timeout=30.0)
    assert LIMIT < server.body_bytes < 64 * LIMIT


def test_an_answer_at_the_limit_is_read_whole(face: Face) -> None:
    body = b'{"models": [], "pad": "' + b"p" * 1000 + b'"}'
    with misbehaving_server({"GET /models": answer(body)}) as srv:
        assert list_models(face, srv, max_response_bytes=len(body)) == []
        with pytest.raises(AnswerTooLarge):
            list_models(face, srv, max_response_bytes=len(body) - 1)


def test_a_compressed_answer_counts_its_decoded_size(face: Face) -> None:
    """A small gzip that inflates past the limit (a zip bomb) is cut off on its decoded bytes."""
    import gzip

    packed = gzip.compress(b'{"models": [' + b" " * (4 * LIMIT) + b"]}")
    assert len(packed) < LIMIT
    with misbehaving_server({"GET /models": answer(packed, headers={"Content-Encoding": "gzip"})}) as srv:
        with pytest.raises(AnswerTooLarge):
            list_models(face, srv, max_response_bytes=LIMIT)
        assert list_models(face, srv, max_response_bytes=5 * LIMIT) == []


@pytest.mark.parametrize("value", ["lots", "0"])
def test_a_bad_setting_is_a_config_error(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from mmsctl.client.management import ManagementClient

    monkeypatch.setenv("MMSCTL_MAX_RESPONSE_BYTES", value)
    with pytest.raises(ConfigError, match="max_response_bytes"):
        ManagementClient(Context("c", "http://127.0.0.1:1", "http://127.0.0.1:1"))
