"""Answers as a server writes them: whole, with their ``Content-Length`` and ``Date``; a 204 or 304 with neither
body nor ``Content-Length`` (HTTP/1.1 gives them none: a client reads what follows as the next answer).

A status no HTTP/1.1 status line can carry, or a line break in a phrase or header, is refused before anything
is sent (ValueError). (Clients read answers with :mod:`~mmsctl.http1.answers`.)
"""

from __future__ import annotations

import time
from http import HTTPStatus
from typing import Any, Mapping, Optional

__all__ = ["BODILESS", "CONTINUE", "encode_response", "http_date"]

#: What a server sends a client that waits (``Expect: 100-continue``) before its body.
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
#: The final statuses whose answers have no body (RFC 9110 15.3.5, 15.4.5).
BODILESS = frozenset({204, 304})
#: The status line of each status with a phrase.
_STATUS_LINES = {s.value: b"HTTP/1.1 %d %s\r\n" % (s.value, s.phrase.encode()) for s in HTTPStatus}
_date = [-1, b""]


def http_date() -> bytes:
    """The ``Date`` header's value now, formatted once a second."""
    second = int(time.time())
    if second != _date[0]:
        from email.utils import formatdate  # (here: a client that only reads answers never imports email)

        _date[0], _date[1] = second, formatdate(second, usegmt=True).encode()
    return _date[1]  # type: ignore[return-value]


def _field(text: Any) -> bytes:
    """A status phrase, header name or value as bytes; ValueError for one that would split the head."""
    value = str(text)
    if "\r" in value or "\n" in value:
        raise ValueError("line break in a header")
    return value.encode("utf-8")


def encode_response(status: int, reason: Optional[str], content_type: Optional[bytes], headers: Mapping[str, str],
                    body: bytes, extra: bytes = b"", *, close: bool = False) -> bytes:
    """One whole answer: the status line (*reason*, or the status's phrase), ``Content-Type`` where there is
    one, *headers*, the header lines in *extra* (already encoded), ``Date``, ``Content-Length``, and
    ``Connection: close`` when the connection ends after it; a :data:`BODILESS` status's without *body* or
    ``Content-Length``.

    Raises:
        ValueError: a status outside 200-999 (or not an int), or a line break in a phrase, name or value.
    """
    if type(status) is not int or not 200 <= status <= 999:
        raise ValueError(f"status {status!r}")
    line = _STATUS_LINES.get(status) if reason is None else None
    if line is None:
        line = b"HTTP/1.1 %d %s\r\n" % (status, _field(reason or ""))
    if content_type is not None:
        if b"\r" in content_type or b"\n" in content_type:
            raise ValueError("line break in a header")
        line += b"Content-Type: " + content_type + b"\r\n"
    if headers:
        line += b"".join(_field(key) + b": " + _field(value) + b"\r\n" for key, value in headers.items())
    if status in BODILESS:
        return b"%s%sDate: %s\r\n%s\r\n" % (line, extra, http_date(), b"Connection: close\r\n" if close else b"")
    head = b"%s%sDate: %s\r\nContent-Length: %d\r\n%s\r\n" % (line, extra, http_date(), len(body),
                                                               b"Connection: close\r\n" if close else b"")
    return head + body
