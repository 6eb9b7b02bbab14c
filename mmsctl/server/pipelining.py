"""Where pipelined requests end, so that bytes no parser takes cost only the request they belong to.

aiohttp's parser fails a whole read: requests that were complete before the bad bytes of the same
read would get no answer, only one 400. A :class:`RequestSplitter` follows a connection's bytes
with httptools' parser (llhttp, C; no body copied, two callbacks per request); when that parser
fails on a read, the read is cut at the end of each request it completed, and aiohttp is given the
pieces one by one: it answers each request, then the 400 for the bad bytes, and closes.

The cut is found only on failure, from the last read that ended between requests (up to
``_CARRY`` bytes back); a request whose head or body arrived in earlier reads than that is
still lost with the read that fails.
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

import httptools

__all__ = ["RequestSplitter", "request_ends"]

#: How many bytes of a request still incomplete at the end of a read are kept, to cut the next read.
_CARRY = 1 << 16
_PARSE_ERRORS = (httptools.HttpParserError, httptools.HttpParserUpgrade)


class _Completions:
    """Counts the requests a parser completes."""

    __slots__ = ("complete",)

    def __init__(self) -> None:
        self.complete = 0

    def on_message_complete(self) -> None:
        self.complete += 1


def _completed(data: Union[bytes, memoryview]) -> int:
    """How many requests *data* holds whole, before anything llhttp cannot parse."""
    counter = _Completions()
    try:
        httptools.HttpRequestParser(counter).feed_data(data)
    except _PARSE_ERRORS:
        pass
    return counter.complete


def request_ends(data: bytes) -> list[int]:
    """The offset in *data* after each whole request it starts with (it begins with a request).

    Each end is the shortest prefix (from the previous end) that llhttp completes a request in:
    found by doubling, then halving, so the cost is a few parses of each request's own bytes.
    """
    view = memoryview(data)
    ends: list[int] = []
    start = 0
    for _ in range(_completed(view)):
        low, high = 0, 1
        while not _completed(view[start:start + high]):
            low, high = high, min(2 * high, len(data) - start)
        while high - low > 1:  # low: no request complete yet; high: one is
            middle = (low + high) // 2
            if _completed(view[start:start + middle]):
                high = middle
            else:
                low = middle
        start += high
        ends.append(start)
    return ends


class RequestSplitter:
    """One connection's bytes, followed to cut a read that fails to parse after its whole requests."""

    __slots__ = ("_parser", "_between", "_carry", "_done")

    def __init__(self) -> None:
        self._parser = httptools.HttpRequestParser(self)
        self._between = True
        #: The bytes since the last read that ended between requests (None: more than ``_CARRY``).
        self._carry: Optional[bytes] = b""
        #: The parser failed (or the connection upgraded): reads pass as they are from now on.
        self._done = False

    def on_message_begin(self) -> None:
        self._between = False

    def on_message_complete(self) -> None:
        self._between = True

    def split(self, data: bytes) -> Sequence[bytes]:
        """*data* as the pieces to give aiohttp's parser one after the other (usually just *data*)."""
        if self._done:
            return (data,)
        carry = self._carry
        try:
            self._parser.feed_data(data)
        except _PARSE_ERRORS:
            self._done = True
            return _pieces(carry, data) if carry is not None else (data,)
        if self._between:
            self._carry = b""
        elif carry is not None and len(carry) + len(data) <= _CARRY:
            self._carry = carry + data
        else:
            self._carry = None
        return (data,)


def _pieces(carry: bytes, data: bytes) -> list[bytes]:
    """*data* cut after each request that ends in it (*carry*: the bytes since the last request boundary)."""
    pieces, start = [], 0
    for end in request_ends(carry + data):
        if end > len(carry):
            pieces.append(data[start:end - len(carry)])
            start = end - len(carry)
    pieces.append(data[start:])
    return [piece for piece in pieces if piece]
