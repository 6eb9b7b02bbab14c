"""A connection's requests as they arrive: the request line to route by, then heads and bodies to their last byte.

:func:`request_line` reads the line a request starts with, and nothing else, so a server can give the request
to one handler or another before its head is parsed. :class:`RequestReader` then parses it with llhttp and
calls its sink: :meth:`~RequestSink.on_head` once the head is whole, :meth:`~RequestSink.on_body` for each
piece of the body (a chunked one unchunked), :meth:`~RequestSink.on_complete` at its end. The reader never
parses past a request's last byte: :meth:`RequestReader.feed` says how many bytes the request took, and the
rest of the read, the next request, is still the caller's to route.

Where a request ends is where llhttp (strict: CRLF line ends, one Content-Length, chunked last) ends it:
after the blank line that closes a head without a body, after Content-Length bytes of body, or after the
blank line that closes a chunked body's trailer. Each read is fed up to the next place a request may end
(a blank line, or the declared length), so llhttp stops there when it does.

The limits on a head are aiohttp's (the server's other path), so both paths refuse the same heads: a request
target or header field over 8190 bytes, more than 128 fields (trailer fields included).
"""

from __future__ import annotations

from typing import Optional, Protocol

import httptools

from mmsctl.http1.errors import ParseError

__all__ = ["MAX_FIELD", "MAX_FIELDS", "MAX_LINE", "RequestReader", "RequestSink", "request_line"]

#: The longest request target and header field (name and value), and the most fields, as aiohttp's parser.
MAX_LINE = 8190
MAX_FIELD = 8190
MAX_FIELDS = 128
_BLANK = b"\r\n\r\n"
_HEAD, _LENGTH, _CHUNKED = 0, 1, 2


def request_line(data: bytes) -> Optional[tuple[bytes, bytes, bytes]]:
    """``(method, target, version)`` of the request *data* starts with (the empty lines llhttp skips before a
    request skipped), ``(b"", b"", b"")`` for a line that is not three words, None while the line is incomplete."""
    start = 0
    while data.startswith(b"\r\n", start):
        start += 2
    end = data.find(b"\r\n", start)
    if end < 0:
        return None
    words = data[start:end].split(b" ")
    if len(words) != 3:
        return b"", b"", b""
    return words[0], words[1], words[2]


class RequestSink(Protocol):
    """What a :class:`RequestReader` tells of each request."""

    def on_head(self, method: bytes, target: bytes, version: str, headers: list[tuple[bytes, bytes]],
                keep_alive: bool, length: Optional[int]) -> None:
        """The head is whole: *headers* as sent (values without trailing blanks), *length* the body's declared
        length (0: no body; None: chunked), *keep_alive* what the version and ``Connection`` ask."""

    def on_body(self, chunk: bytes) -> None:
        """The next bytes of the body."""

    def on_complete(self) -> None:
        """The request's last byte has been read."""


class RequestReader:
    """Parses one connection's requests, one at a time, for a :class:`RequestSink`."""

    __slots__ = ("_sink", "_parser", "_state", "_tail", "_remaining", "_target", "_headers", "_fields", "_length",
                 "_done")

    def __init__(self, sink: RequestSink) -> None:
        self._sink = sink
        self._parser = httptools.HttpRequestParser(self)
        self._state = _HEAD
        #: The last bytes fed while looking for a blank line (one may straddle two reads).
        self._tail = b""
        #: Body bytes still to come (a declared length).
        self._remaining = 0
        self._target = b""
        self._headers: list[tuple[bytes, bytes]] = []
        #: Header and trailer fields of this request so far.
        self._fields = 0
        self._length: Optional[int] = 0
        self._done = False

    # -- feeding --------------------------------------------------------------------------------
    def feed(self, data: bytes) -> int:
        """Parse *data* up to the end of the request being read; how many of its bytes the request took (all
        of them, unless it ended inside *data*: the rest is the next request's, not parsed).

        Raises:
            ParseError: the bytes are not a request (the connection cannot go on), or a head over the limits.
        """
        view = memoryview(data)
        taken, size = 0, len(data)
        while taken < size:
            state = self._state
            if state == _LENGTH:
                stop = min(size, taken + self._remaining)
                self._remaining -= stop - taken
            else:
                stop = self._after_blank_line(data, taken)
            self._execute(view[taken:stop] if taken or stop < size else data)
            if self._done:
                self._done = False
                self._state, self._tail = _HEAD, b""
                return stop
            if state != _LENGTH and self._state == state:
                self._tail = (self._tail + data[max(taken, stop - 3):stop])[-3:]
            taken = stop
        return taken

    def _after_blank_line(self, data: bytes, start: int) -> int:
        """Just past the first blank line (CRLF CRLF) in *data* from *start*, counting the bytes fed before; the
        end of *data* when there is none (a head, or a chunked body, cannot end before one)."""
        tail = self._tail
        if tail:
            edge = (tail + data[start:start + 3]).find(_BLANK)
            if edge >= 0:
                return start + edge + 4 - len(tail)
        found = data.find(_BLANK, start)
        return len(data) if found < 0 else found + 4

    def _execute(self, piece: memoryview) -> None:
        try:
            self._parser.feed_data(piece)
        except httptools.HttpParserUpgrade:
            if not self._done:  # CONNECT, or an upgrade without a body: what follows is not HTTP/1.1
                raise ParseError("the connection asks to leave HTTP/1.1") from None
        except httptools.HttpParserCallbackError as exc:
            raise (exc.__context__ or ParseError("Invalid HTTP message.")) from None
        except httptools.HttpParserError as exc:
            raise ParseError(f"Invalid HTTP message: {exc}") from None

    # -- httptools' callbacks -------------------------------------------------------------------
    def on_message_begin(self) -> None:
        self._target, self._headers, self._fields, self._length = b"", [], 0, 0

    def on_url(self, url: bytes) -> None:
        self._target += url
        if len(self._target) > MAX_LINE:
            raise ParseError("Request URI too long.", 414)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._fields += 1
        if self._fields > MAX_FIELDS:
            raise ParseError("Too many request header fields.", 431)
        value = value.rstrip(b" \t")
        if len(name) + len(value) > MAX_FIELD:
            raise ParseError("Request header fields too large.", 431)
        if self._state != _HEAD:
            return  # a chunked body's trailer: framing only
        self._headers.append((name, value))
        if len(name) == 14 and name.lower() == b"content-length":
            self._length = int(value)  # llhttp took it: digits (one field, one value)
        elif len(name) == 17 and name.lower() == b"transfer-encoding":
            self._length = None  # llhttp took it: chunked, last

    def on_headers_complete(self) -> None:
        length = self._length
        if length is None:
            self._state = _CHUNKED
        elif length:
            self._state, self._remaining = _LENGTH, length
        self._tail = b""
        parser = self._parser
        self._sink.on_head(parser.get_method(), self._target, parser.get_http_version(), self._headers,
                           parser.should_keep_alive(), length)

    def on_body(self, body: bytes) -> None:
        self._sink.on_body(body)

    def on_message_complete(self) -> None:
        self._done = True
        self._sink.on_complete()
