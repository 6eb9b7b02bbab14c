"""What the codec refuses: bytes that are not HTTP/1.1, heads past the limits, answers past their ceiling."""

from __future__ import annotations

__all__ = ["AnswerTooLarge", "ParseError"]


class ParseError(Exception):
    """Bytes that are not an HTTP/1.1 message; *status* is what a server answers them (400; 431 for header
    fields over their limits); *public*: a 400's message is fit to tell the client (else it says what the parser
    saw, for the log)."""

    def __init__(self, message: str, status: int = 400, *, public: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.public = public


class AnswerTooLarge(Exception):
    """An answer (head and body) longer than the reader's ceiling: read no further."""
