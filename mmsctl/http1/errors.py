"""What the codec refuses: bytes that are not HTTP/1.1, heads past the limits, answers past their ceiling."""

from __future__ import annotations

__all__ = ["AnswerTooLarge", "ParseError"]


class ParseError(Exception):
    """Bytes that are not an HTTP/1.1 message; *status* is what a server answers them (400; 431 for header
    fields over their limits)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class AnswerTooLarge(Exception):
    """An answer (head and body) longer than the reader's ceiling: read no further."""
