"""A connection's requests as they arrive: the request line to route by, then heads and bodies to their last byte.

:func:`request_line` reads the line a request starts with, and nothing else, so a server can give the request
to one handler or another before its head is parsed. :class:`RequestReader` then parses it with llhttp and
calls its sink: :meth:`~RequestSink.on_head` once the head is whole, which answers what to tell of the body:
:meth:`~BodySink.on_body` for each piece of it (a chunked one unchunked), :meth:`~BodySink.on_complete` at its end. The reader never
parses past a request's last byte: :meth:`RequestReader.feed` says how many bytes the request took, and the
rest of the read, the next request, is still the caller's to route.

Where a request ends is where llhttp (strict: CRLF line ends, one Content-Length, chunked last) ends it:
after the blank line that closes a head without a body, after Content-Length bytes of body, or after the
blank line that closes a chunked body's trailer. Each read is fed up to the next place a request may end
(a blank line, or the declared length), so llhttp stops there when it does.

The limits on a head are aiohttp's (the server's other path), so both paths refuse the same heads: a header
field over 8190 bytes, more than 128 fields (trailer fields included); a request line over 8190 bytes is not
one :func:`request_line` reads (a server refuses it as aiohttp does: 414). What a chunked body holds besides its
data (chunk-size lines, their extensions, the trailer) is held to :data:`MAX_HEAD` bytes between two pieces of
data (431): llhttp holds a trailer field's value until it ends, and grows it with each read.

A request that asks to leave HTTP/1.1 (``Connection: upgrade`` with an ``Upgrade`` header: ``curl --http2`` on an
``http://`` URL sends one) is read as any other, and the connection goes on in HTTP/1.1: the upgrade is not
taken (RFC 9110 7.8; none is offered). llhttp reads no body after such a head, so the reader reads a
Content-Length body itself, to its declared length, and parses what follows with a fresh parser; a chunked body
with an upgrade is refused (400), as ``CONNECT`` with a body is. :attr:`RequestReader.upgrades` counts the
requests that asked to upgrade (a parser that drops what follows one in a read is given them one by one).
"""

from __future__ import annotations

from typing import Optional, Protocol

import httptools

from mmsctl.http1.errors import ParseError

__all__ = ["MAX_FIELD", "MAX_FIELDS", "MAX_HEAD", "MAX_LINE", "UPGRADE_WITH_BODY", "BodySink", "RequestReader",
           "RequestSink", "request_line"]

#: The longest request line and header field (name and value), and the most fields, as aiohttp's parser.
MAX_LINE = 8190
MAX_FIELD = 8190
MAX_FIELDS = 128
_BLANK = b"\r\n\r\n"
#: What is being read: a head, a body of declared length, a chunked one, a declared length that llhttp skips
#: (after an upgrade's head: the reader reads it).
_HEAD, _LENGTH, _CHUNKED, _SKIPPED = 0, 1, 2, 3
_CAREFUL, _WHOLE, _SMALL = 0, 1, 2
#: The most bytes a head may take (its line and every field at their limits): past it, 431 before llhttp (which
#: holds a field's value until it ends) holds more.
MAX_HEAD = MAX_LINE + MAX_FIELDS * (MAX_FIELD + 4) + 4
#: Why a request that asks to upgrade and has a chunked body is refused.
UPGRADE_WITH_BODY = ("Invalid HTTP message: a request with a chunked body (Transfer-Encoding: chunked) may not ask "
                     "to upgrade (Connection: Upgrade); send its length (Content-Length) or no Upgrade header.")
#: A slice of a read smaller than this is copied; a larger one is fed as a view.
_COPY_BELOW = 1 << 14


def request_line(data: bytes) -> Optional[tuple[bytes, bytes, bytes]]:
    """``(method, target, version)`` of the request *data* starts with (the empty lines llhttp skips before a
    request skipped), ``(b"", b"", b"")`` for a line that is not three words or longer than :data:`MAX_LINE`,
    None while the line is incomplete."""
    start = 0
    while data.startswith(b"\r\n", start):
        start += 2
    end = data.find(b"\r\n", start, start + MAX_LINE + 2)
    if end < 0:
        return None if len(data) - start <= MAX_LINE + 2 else (b"", b"", b"")
    words = data[start:end].split(b" ")
    if len(words) != 3:
        return b"", b"", b""
    return words[0], words[1], words[2]


class BodySink(Protocol):
    """What a :class:`RequestReader` tells of one request's body."""

    def on_body(self, chunk: bytes) -> None:
        """The next bytes of the body."""

    def on_complete(self) -> None:
        """The request's last byte has been read."""


class RequestSink(Protocol):
    """What a :class:`RequestReader` tells of each request's head."""

    def on_head(self, headers: list[tuple[bytes, bytes]], keep_alive: bool, length: Optional[int],
                expect: Optional[bytes]) -> BodySink:
        """The head is whole (its request line is the one :func:`request_line` read): *headers* as sent (values
        without trailing blanks), *keep_alive* what the version and ``Connection`` ask, *length* the body's
        declared length (0: no body; None: chunked), *expect* the first ``Expect`` value (a client that sent
        ``100-continue`` waits for one before it sends its body). Returns what is told of the body."""


class RequestReader:
    """Parses one connection's requests, one at a time, for a :class:`RequestSink`."""

    __slots__ = ("_sink", "_body", "_parser", "_state", "_tail", "_remaining", "_head_size", "_headers", "_fields", "_length",
                 "_expect", "_done", "_mode", "_data", "upgrades")

    def __init__(self, sink: RequestSink) -> None:
        self._sink = sink
        self._body: Optional[BodySink] = None
        self._parser = httptools.HttpRequestParser(self)
        self._state = _HEAD
        #: The last bytes fed while looking for a blank line (one may straddle two reads).
        self._tail = b""
        #: Body bytes still to come (a declared length), and head bytes fed so far (in a chunked body: bytes
        #: other than data, at most, since its last data).
        self._remaining = 0
        self._head_size = 0
        #: Data bytes of a chunked body in the piece being fed, or -1 while none came in it.
        self._data = -1
        self._headers: list[tuple[bytes, bytes]] = []
        #: Trailer fields of this request so far.
        self._fields = 0
        self._length: Optional[int] = 0
        self._expect: Optional[bytes] = None
        self._done = False
        #: How the read being parsed is fed: :data:`_CAREFUL`, or at once (it holds a whole head: :meth:`feed`),
        #: :data:`_SMALL` when that head is shorter than a field may be (no field to measure).
        self._mode = _CAREFUL
        #: Requests read so far that asked to upgrade (served in HTTP/1.1 all the same).
        self.upgrades = 0

    # -- feeding --------------------------------------------------------------------------------
    def feed(self, data: bytes) -> int:
        """Parse *data* up to the end of the request being read; how many of its bytes the request took (all
        of them, unless it ended inside *data*: the rest is the next request's, not parsed).

        A read that holds a whole head, of a request without a chunked body, is fed at once: if a second request
        begins in it, the first ended at its head and declared length, and the parser starts over there. (A
        chunked body after all, its coding spelt in capitals, is read again the careful way.) Any other read is
        fed up to the places a request may end (:meth:`_feed_careful`).

        Raises:
            ParseError: the bytes are not a request (the connection cannot go on), or a head over the limits.
        """
        if self._state != _HEAD or self._tail:
            return self._feed_careful(data)
        head_end = data.find(_BLANK) + 4
        if not 4 < head_end <= MAX_HEAD or data.find(b"hunked", 0, head_end) >= 0:
            return self._feed_careful(data)
        self._mode = _SMALL if head_end <= MAX_FIELD else _WHOLE
        try:
            self._parser.feed_data(data)
        except (httptools.HttpParserCallbackError, httptools.HttpParserError) as exc:
            if isinstance(exc.__context__, _Chunked):
                self._parser = httptools.HttpRequestParser(self)
                return self._feed_careful(data)
            if not self._done:
                raise _parse_error(exc) from None
            self._parser = httptools.HttpRequestParser(self)  # it began the next request: not its to read
            self._done, self._state = False, _HEAD
            return head_end + (self._length or 0)
        except httptools.HttpParserUpgrade as exc:
            self.upgrades += 1
            if self._state == _SKIPPED:  # its body follows its head: read here, llhttp skips it
                self._parser = httptools.HttpRequestParser(self)
                return self._take_skipped(data, exc.args[0])
            if not self._done:  # CONNECT: what follows is not HTTP/1.1
                raise ParseError("the connection asks to leave HTTP/1.1") from None
            self._done, self._state = False, _HEAD
            return head_end
        if self._done:
            self._done, self._state = False, _HEAD
        elif self._state == _LENGTH:
            self._remaining -= len(data) - head_end
        return len(data)

    def _feed_careful(self, data: bytes) -> int:
        """Feed *data* up to each place the request may end: a blank line, or its declared length."""
        self._mode = _CAREFUL
        taken, size = 0, len(data)
        parser = self._parser
        while taken < size:
            state = self._state
            if state == _SKIPPED:
                taken = self._take_skipped(data, taken)
                if self._state == _HEAD:
                    return taken
                continue
            if state == _LENGTH:
                stop = min(size, taken + self._remaining)
                self._remaining -= stop - taken
            else:
                stop = self._after_blank_line(data, taken)
                if state == _HEAD:
                    self._head_size += stop - taken
                    if self._head_size > MAX_HEAD:
                        raise ParseError("Request header fields too large.", 431)
                else:
                    self._data = -1
            if taken == 0 and stop == size:
                piece: "bytes | memoryview" = data
            elif stop - taken < _COPY_BELOW:
                piece = data[taken:stop]
            else:  # a large body's slice: no copy
                piece = memoryview(data)[taken:stop]
            try:
                parser.feed_data(piece)
            except httptools.HttpParserUpgrade as exc:
                self.upgrades += 1
                if self._state == _SKIPPED:  # its body follows its head: read here, llhttp skips it
                    self._parser = parser = httptools.HttpRequestParser(self)
                    taken += exc.args[0]
                    continue
                if not self._done:  # CONNECT: what follows is not HTTP/1.1
                    raise ParseError("the connection asks to leave HTTP/1.1") from None
            except (httptools.HttpParserCallbackError, httptools.HttpParserError) as exc:
                raise _parse_error(exc) from None
            if self._done:
                self._done = False
                self._state, self._tail, self._head_size = _HEAD, b"", 0
                return stop
            if state != _LENGTH and self._state == state:
                self._tail = (self._tail + data[max(taken, stop - 3):stop])[-3:]
                if state == _CHUNKED:
                    self._count_framing(stop - taken)
            taken = stop
        return taken

    def _take_skipped(self, data: bytes, start: int) -> int:
        """Hand the sink what *data* holds, from *start*, of a body llhttp skips (an upgrade's); where it stopped.
        The request ends at its declared length (the next one is parsed from there)."""
        stop = min(len(data), start + self._remaining)
        self._remaining -= stop - start
        if stop > start:
            self._body.on_body(data[start:stop])  # type: ignore[union-attr]  # (set by the head, which comes first)
        if not self._remaining:
            self._state, self._tail, self._head_size = _HEAD, b"", 0
            self._body.on_complete()  # type: ignore[union-attr]
        return stop

    def _count_framing(self, fed: int) -> None:
        """Count what a piece of *fed* bytes of a chunked body held besides data (all of it, after the piece's
        last data: llhttp says how much data, not where); 431 past :data:`MAX_HEAD` since the last data."""
        data = self._data
        if data < 0:
            self._head_size += fed
        else:
            self._head_size = fed - data
        if self._head_size > MAX_HEAD:
            raise ParseError("Request header fields too large.", 431)

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

    # -- httptools' callbacks -------------------------------------------------------------------
    def on_message_begin(self) -> None:
        if self._done:
            raise _NextRequest()  # (fed at once: the request before ended in this read)
        self._headers, self._fields, self._length, self._expect = [], 0, 0, None

    def on_header(self, name: bytes, value: bytes) -> None:
        if value and value[-1] in b" \t":
            value = value.rstrip(b" \t")
        size = len(name)
        if self._mode != _SMALL and size + len(value) > MAX_FIELD:
            raise ParseError("Request header fields too large.", 431)
        if self._state:  # a chunked body's trailer: counted, for framing only
            self._fields += 1
            if self._fields + len(self._headers) > MAX_FIELDS:
                raise ParseError("Too many request header fields.", 431)
            return
        self._headers.append((name, value))
        if size == 14 and name.lower() == b"content-length":
            self._length = int(value)  # llhttp took it: digits (one field, one value)
        elif size == 17 and name.lower() == b"transfer-encoding":
            self._length = None  # llhttp took it: chunked, last
        elif size == 6 and self._expect is None and name.lower() == b"expect":
            self._expect = value

    def on_headers_complete(self) -> None:
        if len(self._headers) > MAX_FIELDS:
            raise ParseError("Too many request header fields.", 431)
        length = self._length
        if length != 0 and self._parser.should_upgrade():  # llhttp reads no body after this head
            if length is None:
                raise ParseError(UPGRADE_WITH_BODY, public=True)
            if self._parser.get_method() == b"CONNECT":
                raise ParseError("the connection asks to leave HTTP/1.1")
            self._state, self._remaining = _SKIPPED, length  # (read by the reader, up to its length)
        elif length is None:
            if self._mode:
                raise _Chunked()
            self._state = _CHUNKED
        elif length:
            self._state, self._remaining = _LENGTH, length
        if not self._mode:
            self._tail, self._head_size = b"", 0
        self._body = self._sink.on_head(self._headers, self._parser.should_keep_alive(), length, self._expect)

    def on_body(self, body: bytes) -> None:
        if self._state == _CHUNKED:
            self._data = len(body) + (self._data if self._data > 0 else 0)
        self._body.on_body(body)  # type: ignore[union-attr]  # (set by the head, which comes first)

    def on_message_complete(self) -> None:
        if self._state == _SKIPPED:  # (llhttp ends it at its head: its body is still to be read)
            return
        self._done = True
        self._body.on_complete()  # type: ignore[union-attr]


class _NextRequest(Exception):
    """A read fed at once holds the start of the next request."""


class _Chunked(Exception):
    """A read fed at once holds a chunked body's head, its coding spelt in capitals (its end is found the careful
    way)."""


def _parse_error(exc: Exception) -> BaseException:
    """The ParseError (or the sink's own error) behind an httptools error."""
    if isinstance(exc, httptools.HttpParserCallbackError) and exc.__context__ is not None:
        return exc.__context__
    return ParseError(f"Invalid HTTP message: {exc}")
