"""Where pipelined requests end, so that bytes no parser takes cost only the request they belong to.

A parser that fails a whole read (aiohttp's does) gives the requests that were complete before the bad
bytes of that read no answer, only one 400. A :class:`RequestSplitter` follows a connection's bytes with a
:class:`~mmsctl.http1.requests.RequestReader`, which knows where each request ends; when a read fails to
parse, it is cut after each request that ended in it, and the parser is given the pieces one by one: it
answers each request, then the 400 for the bad bytes.

A parser that is told a request asks to upgrade (``Connection: upgrade``) may take what follows it in the same
read for the new protocol's, and drop it when it does not switch (aiohttp's does, for any upgrade but a
WebSocket one). The upgrade is not taken: once a connection has asked for one, each read is cut after each
request that ends in it, so that every request reaches the parser in a piece of its own or at a piece's end.
"""

from __future__ import annotations

from typing import Optional, Sequence

from mmsctl.http1.errors import ParseError
from mmsctl.http1.requests import RequestReader

__all__ = ["RequestSplitter"]


class _Ends:
    """A sink that only counts the requests that end."""

    __slots__ = ("ended",)

    def __init__(self) -> None:
        self.ended = 0

    def on_head(self, headers: list[tuple[bytes, bytes]], keep_alive: bool, length: Optional[int],
                expect: Optional[bytes]) -> "_Ends":
        return self

    def on_body(self, chunk: bytes) -> None:
        pass

    def on_complete(self) -> None:
        self.ended += 1


class RequestSplitter:
    """One connection's bytes, followed to cut a read that fails to parse after its whole requests."""

    __slots__ = ("_ends", "_reader", "_done")

    def __init__(self) -> None:
        self._ends = _Ends()
        self._reader = RequestReader(self._ends)
        #: The bytes stopped parsing (or the connection left HTTP/1.1): reads pass as they are from now on.
        self._done = False

    def split(self, data: bytes) -> Sequence[bytes]:
        """*data* as the pieces to give the connection's parser one after the other (usually just *data*)."""
        if self._done:
            return (data,)
        cuts, taken, ends = [], 0, self._ends
        reader = self._reader
        try:
            while taken < len(data):
                before = ends.ended
                taken += reader.feed(data[taken:] if taken else data)
                if ends.ended > before:
                    cuts.append(taken)
        except ParseError:
            self._done = True
            return _cut(data, cuts)
        if reader.upgrades and cuts:
            return _cut(data, cuts)
        return (data,)


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    """*data* cut at each of *cuts* (offsets, in order), without empty pieces."""
    start, pieces = 0, []
    for cut in cuts:
        pieces.append(data[start:cut])
        start = cut
    pieces.append(data[start:])
    return [piece for piece in pieces if piece]
