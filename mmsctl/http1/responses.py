"""Answers as a server writes them: whole, with their ``Content-Length`` and ``Date``.

A status no HTTP/1.1 status line can carry, or a line break in a phrase or header, is refused before anything
is sent (ValueError). (Clients read answers with :mod:`~mmsctl.http1.answers`.)
"""

from __future__ import annotations

import time
from http import HTTPStatus
from typing import Any, Mapping, Optional

__all__ = ["CONTINUE", "encode_response", "http_date"]

#: What a server sends a client that waits (``Expect: 100-continue``) before its body.
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_PHRASES = {s.value: s.phrase for s in HTTPStatus}
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
    ``Connection: close`` when the connection ends after it.

    Raises:
        ValueError: a status outside 200-999 (or not an int), or a line break in a phrase, name or value.
    """
    if not isinstance(status, int) or not 200 <= status <= 999:
        raise ValueError(f"status {status!r}")
    lines = [b"HTTP/1.1 %d %s\r\n" % (status, _field(reason if reason is not None else _PHRASES.get(status, "")))]
    if content_type is not None:
        lines.append(b"Content-Type: " + _field(content_type.decode()) + b"\r\n")
    for key, value in headers.items():
        lines.append(_field(key) + b": " + _field(value) + b"\r\n")
    lines.append(b"%sDate: %s\r\nContent-Length: %d\r\n%s\r\n"
                 % (extra, http_date(), len(body), b"Connection: close\r\n" if close else b""))
    lines.append(body)
    return b"".join(lines)
