"""The HTTP/1.1 codec (mmsctl/http1): requests read to their last byte whatever the reads, heads held to the
limits, answers written and read back within their ceiling. In process: these are the wire's rules."""

from __future__ import annotations

from typing import Optional

import pytest

from mmsctl.http1.errors import AnswerTooLarge, ParseError
from mmsctl.http1.requests import MAX_FIELDS, MAX_HEAD, UPGRADE_WITH_BODY, RequestReader, request_line
from mmsctl.http1.answers import AnswerReader, BodyReader
from mmsctl.http1.responses import encode_response
from mmsctl.http1.splitter import RequestSplitter

GET = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
POST = b"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
#: A chunk whose data holds blank lines, chunk extensions and a trailer field.
CHUNKED = (b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n"
           b"4\r\n\r\n\r\n\r\n0\r\nTrailer: t\r\n\r\n")
#: Empty lines before a request line are skipped (llhttp and aiohttp alike); blanks after a value are not the value.
SPACED = b"\r\nGET /d HTTP/1.1\r\nHost: x  \t\r\n\r\n"
BAD = b"GARBAGE\r\n\r\n"


class Sink:
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def on_head(self, headers: list[tuple[bytes, bytes]], keep_alive: bool, length: Optional[int],
                expect: Optional[bytes]) -> "Sink":
        self.events.append(("head", tuple(headers), keep_alive, length, expect))
        return self

    def on_body(self, chunk: bytes) -> None:
        if self.events[-1][0] == "body":
            self.events[-1] = ("body", self.events[-1][1] + chunk)
        else:
            self.events.append(("body", chunk))

    def on_complete(self) -> None:
        self.events.append(("end",))


def _read(reads: list[bytes]) -> tuple[list[tuple], list[int]]:
    """The events of *reads* fed as a connection would, and where in the stream each request ended."""
    sink, ends, pending, offset = Sink(), [], b"", 0
    reader = RequestReader(sink)
    for read in reads:
        pending += read
        while pending:
            ended = len(sink.events)
            taken = reader.feed(pending)
            offset, pending = offset + taken, pending[taken:]
            if sink.events[ended:] and sink.events[-1] == ("end",):
                ends.append(offset)
    return sink.events, ends


def test_each_request_is_read_to_its_last_byte_however_the_reads_fall() -> None:
    stream = GET + POST + CHUNKED + SPACED
    whole, ends = _read([stream])
    assert ends == [len(GET), len(GET + POST), len(GET + POST + CHUNKED), len(stream)]
    assert [e for e in whole if e[0] == "head"] == [
        ("head", ((b"Host", b"x"),), True, 0, None),
        ("head", ((b"Host", b"x"), (b"Content-Length", b"5")), True, 5, None),
        ("head", ((b"Host", b"x"), (b"Transfer-Encoding", b"chunked")), True, None, None),
        ("head", ((b"Host", b"x"),), True, 0, None),
    ]
    assert [e[1] for e in whole if e[0] == "body"] == [b"hello", b"abc\r\n\r\n"]
    for cut in range(1, len(stream)):
        assert _read([stream[:cut], stream[cut:]]) == (whole, ends), cut
    assert _read([stream[i:i + 1] for i in range(len(stream))]) == (whole, ends)


@pytest.mark.parametrize("spelling", [b"CHUNKED", b"cHuNkEd"])
def test_a_chunked_body_spelt_in_any_case_ends_where_llhttp_ends_it(spelling: bytes) -> None:
    spelt = CHUNKED.replace(b"chunked", spelling)
    stream = spelt + GET
    events, ends = _read([stream])
    assert ends == [len(spelt), len(stream)] and [e[1] for e in events if e[0] == "body"] == [b"abc\r\n\r\n"]
    for cut in range(1, len(stream)):
        assert _read([stream[:cut], stream[cut:]]) == (events, ends), cut


def test_a_head_that_never_ends_is_refused_before_it_is_held() -> None:
    reader = RequestReader(Sink())
    reader.feed(b"GET / HTTP/1.1\r\nX-Long: ")
    with pytest.raises(ParseError) as refused:
        for _ in range(MAX_HEAD // 65536 + 2):
            reader.feed(b"a" * 65536)
    assert refused.value.status == 431


CHUNKED_HEAD = b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize("opening, filler", [(b"0\r\nX-T: ", b"a"), (b"1;ext=", b"a"), (b"", b"0")],
                         ids=["trailer-field", "chunk-extension", "chunk-size-line"])
def test_a_chunked_body_s_framing_that_never_ends_is_refused_before_it_is_held(opening: bytes, filler: bytes) -> None:
    """A trailer field, chunk extension or size line that goes on and on is refused once it passes MAX_HEAD
    bytes (llhttp would grow it with every read, at a cost that grows with its length)."""
    reader, fed = RequestReader(Sink()), 0
    reader.feed(CHUNKED_HEAD + opening)
    with pytest.raises(ParseError) as refused:
        while fed <= 2 * MAX_HEAD:
            reader.feed(filler * 4096)
            fed += 4096
    assert refused.value.status == 431 and MAX_HEAD - 4096 < fed + len(opening) <= MAX_HEAD


def test_a_chunked_body_of_many_chunks_is_not_framing() -> None:
    """The framing limit counts what lies between two pieces of data: a long body in many small chunks, read in
    pieces that fall anywhere, is read whole."""
    chunk = b"%x\r\n" % 1000 + b"d" * 1000 + b"\r\n"
    stream = CHUNKED_HEAD + chunk * (2 * MAX_HEAD // 1000) + b"0\r\nTrailer: t\r\n\r\n"
    events, ends = _read([stream[i:i + 4093] for i in range(0, len(stream), 4093)])
    assert ends == [len(stream)] and len(events[1][1]) == 1000 * (2 * MAX_HEAD // 1000)


UPGRADE = b"POST /u HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Upgrade\r\nUpgrade: h2c\r\n"


#: A body that is a request of its own: read as the next one, it would be smuggled past the server's checks.
SMUGGLED = b"POST /s HTTP/1.1\r\nHost: x\r\nContent-Length: 8\r\n\r\nsmuggled"


@pytest.mark.parametrize("framing", [b"Transfer-Encoding: chunked\r\n\r\n", b"TRANSFER-ENCODING: CHUNKED\r\n\r\n"],
                         ids=["chunked", "capitals"])
@pytest.mark.parametrize("reads", [1, 2])
def test_an_upgrade_with_a_chunked_body_is_refused(framing: bytes, reads: int) -> None:
    """llhttp reads no body after an upgrade's head; a chunked one is not read here either: refused (400), with
    a message the client may read, before any of it is taken as a request."""
    stream = UPGRADE + framing + b"%x\r\n" % len(SMUGGLED) + SMUGGLED + b"\r\n0\r\n\r\n"
    cut = len(UPGRADE + framing)
    with pytest.raises(ParseError) as refused:
        _read([stream] if reads == 1 else [stream[:cut], stream[cut:]])
    assert refused.value.status == 400 and refused.value.public and str(refused.value) == UPGRADE_WITH_BODY


def test_an_upgrade_with_a_length_is_not_taken_and_its_body_read_to_its_length() -> None:
    """``curl --http2 -d`` on an http:// URL: the upgrade is not taken, the body (bytes that look like a
    request) is the request's, to its declared length, and the request after it is read from there, however the
    reads fall."""
    upgrade = UPGRADE + b"Content-Length: %d\r\n\r\n" % len(SMUGGLED) + SMUGGLED
    for stream in (upgrade, upgrade + POST, GET + upgrade + upgrade + CHUNKED + upgrade + POST):
        whole, ends = _read([stream])
        assert [e for e in whole if e[0] == "body" and e[1] == SMUGGLED] == [("body", SMUGGLED)] * stream.count(upgrade)
        lengths = {upgrade: len(SMUGGLED), GET: 0, POST: 5, CHUNKED: None}
        parts = _parts(stream, upgrade)
        assert [e[3] for e in whole if e[0] == "head"] == [lengths[p] for p in parts]
        assert ends == [sum(map(len, parts[:i + 1])) for i in range(len(parts))]
        for cut in range(1, len(stream)):
            assert _read([stream[:cut], stream[cut:]]) == (whole, ends), cut
        assert _read([stream[i:i + 1] for i in range(len(stream))]) == (whole, ends)
        assert _read([stream[i:i + 7] for i in range(0, len(stream), 7)]) == (whole, ends)


def _parts(stream: bytes, upgrade: bytes) -> list[bytes]:
    """The requests *stream* was made of (for the test above)."""
    parts, rest = [], stream
    while rest:
        part = next(p for p in (upgrade, GET, POST, CHUNKED) if rest.startswith(p))
        parts.append(part)
        rest = rest[len(part):]
    return parts


def test_a_connect_with_a_body_is_refused() -> None:
    """CONNECT leaves HTTP/1.1 for good: its bytes are never read as a body or as the next request."""
    with pytest.raises(ParseError) as refused:
        _read([b"CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\nContent-Length: %d\r\n\r\n" % len(SMUGGLED) + SMUGGLED])
    assert refused.value.status == 400


def test_an_upgrade_without_a_body_is_not_taken() -> None:
    """No upgrade is offered: the request is read as any other, and the connection goes on in HTTP/1.1."""
    stream = UPGRADE + b"\r\n" + POST
    events, ends = _read([stream])
    assert ends == [len(UPGRADE) + 2, len(stream)] and events[-2:] == [("body", b"hello"), ("end",)]
    assert _read([stream[:len(UPGRADE) + 2], POST]) == (events, ends)


def test_the_bytes_after_a_request_are_not_parsed() -> None:
    """What follows a request is the next one's: a server routes it, or hands it to another parser, untouched."""
    sink = Sink()
    reader = RequestReader(sink)
    assert reader.feed(POST + BAD) == len(POST)
    assert sink.events[-1] == ("end",)
    with pytest.raises(ParseError) as refused:
        reader.feed(BAD)
    assert refused.value.status == 400


@pytest.mark.parametrize("request_bytes, status", [
    (b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 8190 + b"\r\n\r\n", 431),
    (b"GET / HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(MAX_FIELDS)) + b"\r\n", 431),
    (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello", 400),
    (b"GET / HTTP/1.1\nHost: x\n\n", 400),
    (b"GET / HTTP/1.1\r\nHost: x\r\nX: a\x00b\r\n\r\n", 400),
], ids=["long-field", "too-many-fields", "length-and-chunked", "two-lengths", "bare-lf", "nul"])
def test_a_head_past_the_limits_or_malformed_is_refused(request_bytes: bytes, status: int) -> None:
    with pytest.raises(ParseError) as refused:
        RequestReader(Sink()).feed(request_bytes)
    assert refused.value.status == status


def test_the_request_line_is_read_alone() -> None:
    assert request_line(b"\r\n\r\nPOST /p HTTP/1.1\r\nHost") == (b"POST", b"/p", b"HTTP/1.1")
    assert request_line(b"POST /p HTT") is None
    assert request_line(b"GARBAGE\r\n") == (b"", b"", b"") and request_line(b"A B C D\r\n") == (b"", b"", b"")
    assert request_line(b"GET /" + b"a" * 8190) == (b"", b"", b"")  # past the line limit: not a line to route


def test_a_read_that_fails_is_cut_after_its_whole_requests() -> None:
    splitter = RequestSplitter()
    assert splitter.split(GET) == (GET,)
    assert splitter.split(POST[:20]) == (POST[:20],)  # a head in two reads
    assert splitter.split(POST[20:] + CHUNKED + BAD) == [POST[20:], CHUNKED, BAD]
    assert splitter.split(b"more") == (b"more",)  # failed: the rest passes as it is
    whole = RequestSplitter()
    assert whole.split(GET + POST) == (GET + POST,)  # nothing fails: one read stays one piece
    late = RequestSplitter()  # a body that began three reads before the bad bytes
    assert late.split(POST[:-4]) == (POST[:-4],) and late.split(b"e") == (b"e",)
    assert late.split(b"llo" + BAD) == [b"llo", BAD]


def test_a_read_is_cut_after_each_request_once_the_connection_asked_to_upgrade() -> None:
    """aiohttp's parser drops what follows a request that asks to upgrade in the same read (when it does not
    switch): once a connection asked for one, each request ends a piece of its own."""
    upgrade = UPGRADE + b"Content-Length: %d\r\n\r\n" % len(SMUGGLED) + SMUGGLED
    splitter = RequestSplitter()
    assert splitter.split(GET + POST) == (GET + POST,)
    assert splitter.split(upgrade + GET + POST[:9]) == [upgrade, GET, POST[:9]]
    assert splitter.split(POST[9:] + GET) == [POST[9:], GET]
    body = RequestSplitter()  # an upgrade's body read over two reads, a request after it
    assert body.split(upgrade[:-4]) == (upgrade[:-4],)
    assert body.split(upgrade[-4:] + POST) == [upgrade[-4:], POST]
    bare = RequestSplitter()  # no body
    assert bare.split(UPGRADE + b"\r\n" + POST) == [UPGRADE + b"\r\n", POST]


def test_an_answer_is_written_whole_or_not_at_all() -> None:
    raw = encode_response(201, None, b"text/plain", {"X-A": "1"}, b"hi", b"x-request-id: r\r\n", close=True)
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"HTTP/1.1 201 Created" and body == b"hi"
    assert {b"Content-Type: text/plain", b"X-A: 1", b"x-request-id: r", b"Content-Length: 2",
            b"Connection: close"} <= set(lines)
    assert encode_response(299, "Fine", None, {}, b"").startswith(b"HTTP/1.1 299 Fine\r\n")
    for status, headers in ((1000, {}), (199, {}), ("200", {}), (200, {"X": "a\r\nSet-Cookie: x"})):
        with pytest.raises(ValueError):
            encode_response(status, None, None, headers, b"")  # type: ignore[arg-type]


@pytest.mark.parametrize("status", [204, 304])
def test_an_answer_without_a_body_has_none_to_frame(status: int) -> None:
    """A 204 or 304 has no body: one given is not sent, and no Content-Length says there is one, so what follows
    on the connection is read as the next answer."""
    raw = encode_response(status, None, None, {}, b"null", close=True)
    assert raw.startswith(b"HTTP/1.1 %d " % status) and raw.endswith(b"\r\nConnection: close\r\n\r\n")
    assert b"Content-Length" not in raw and b"null" not in raw


ANSWER = encode_response(200, None, b"application/json", {}, b'{"a": 1}')


def test_answers_are_read_one_at_a_time_within_their_ceiling() -> None:
    reader = BodyReader(limit=len(ANSWER))
    for _ in range(2):  # keep-alive: the same reader, answer after answer
        assert not reader.feed(ANSWER[:10]) and reader.feed(ANSWER[10:])
        assert (reader.status, reader.keep_alive, reader.body) == (200, True, b'{"a": 1}')
        assert reader.headers["content-type"] == "application/json"
        reader.next()
    with pytest.raises(AnswerTooLarge):
        BodyReader(limit=len(ANSWER) - 1).feed(ANSWER)
    with pytest.raises(ParseError):
        AnswerReader(limit=1 << 20).feed(ANSWER + ANSWER)  # two answers to one request
    with pytest.raises(ParseError):
        AnswerReader(limit=1 << 20).feed(b"NOT HTTP\r\n\r\n")
    closing = AnswerReader(limit=1 << 20)
    assert closing.feed(encode_response(503, None, None, {}, b"", close=True))
    assert (closing.status, closing.keep_alive) == (503, False)
