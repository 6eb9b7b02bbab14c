"""Answers as a client reads them: one at a time off a keep-alive connection, within a ceiling of bytes.

:class:`AnswerReader` reports each answer's status and whether the connection stays open (no callback per
header or body piece: ``mmsctl bench``'s load generator reads with it); :class:`BodyReader` keeps headers and
body too (``predict``'s warm path). Past its ceiling (head and body) a reader raises
:class:`~mmsctl.http1.errors.AnswerTooLarge` before parsing the bytes, and the caller drops the connection
instead of reading on.
"""

from __future__ import annotations

from typing import Any

import httptools

from mmsctl.http1.errors import AnswerTooLarge, ParseError

__all__ = ["AnswerReader", "BodyReader"]


class AnswerReader:
    """One connection's answers, one at a time: each one's status and whether the connection stays open.

    Only the status line and the end of each answer are reported (no callback per header or body piece:
    ``mmsctl bench``'s load generator reads its answers with this); :class:`BodyReader` keeps headers and body.
    """

    __slots__ = ("_parser", "limit", "size", "complete", "status", "keep_alive")

    def __init__(self, limit: int) -> None:
        self._parser = self._new_parser()
        #: The most bytes (head and body) one answer may take.
        self.limit = limit
        self.size = 0
        self.complete = False
        self.status = 0
        self.keep_alive = False

    def _new_parser(self) -> Any:
        return httptools.HttpResponseParser(self)

    def feed(self, data: bytes) -> bool:
        """Read the next bytes of the answer; True once it is whole.

        Raises:
            AnswerTooLarge: the answer passes the ceiling (nothing of *data* was parsed).
            ParseError: the bytes are not an answer, or more than one answer came.
        """
        self.size += len(data)
        if self.size > self.limit:
            raise AnswerTooLarge(f"the answer is over {self.limit} bytes")
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            raise (exc.__context__ or ParseError("a malformed answer")) from None
        except httptools.HttpParserError as exc:
            raise ParseError(f"a malformed answer: {exc}") from None
        return self.complete

    def next(self) -> None:
        """Get ready for the next answer on the connection."""
        self.complete, self.size = False, 0

    def on_message_complete(self) -> None:
        if self.complete:
            raise ParseError("an answer nobody asked for")
        self.complete = True
        self.status = self._parser.get_status_code()
        self.keep_alive = self._parser.should_keep_alive()  # read now: llhttp forgets it once the answer is done


class BodyReader(AnswerReader):
    """An :class:`AnswerReader` that keeps each answer's headers (names lower-cased) and body."""

    __slots__ = ("headers", "_chunks")

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.headers: dict[str, str] = {}
        self._chunks: list[bytes] = []

    @property
    def body(self) -> bytes:
        return b"".join(self._chunks)

    def next(self) -> None:
        super().next()
        self.headers, self._chunks = {}, []

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self._chunks.append(body)
