"""MMS's error body ``{"code", "type", "message"}``: built and parsed in this one place.

The server's front end, its supervisor, the engine (a failed batch) and every
client speak it. ``type`` is the Java exception name MMS sends
(``ModelNotFoundException``...); clients switch on it, so it is kept verbatim.
Where MMS's message is a fixed text (``Failed to start workers``), mmsctl's server
adds why in a fourth key, ``cause``, which MMS's clients ignore and ours show.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple, Optional

__all__ = ["ErrorBody", "error_body", "parse_error_body"]

#: How much of a body that is not an error body a parser keeps for a message.
_MAX_TEXT = 300


class ErrorBody(NamedTuple):
    """One MMS error answer (a NamedTuple: the lean ``predict`` reads them; tests/cli/test_lazy_imports.py)."""

    code: int
    type: str
    message: str
    #: Why, where the message is MMS's fixed text (a handler's error behind "Failed to start workers").
    cause: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"code": self.code, "type": self.type, "message": self.message}
        if self.cause:
            data["cause"] = self.cause
        return data

    def encode(self) -> bytes:
        """Pretty-printed as MMS's front end writes it (two-space indent, trailing newline)."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False).encode("utf-8") + b"\n"


def error_body(code: int, type: str, message: str, cause: Optional[str] = None) -> bytes:
    """The encoded body for *code*, *type* and *message* (and *cause*, where there is one)."""
    return ErrorBody(code, type, message, cause).encode()


def parse_error_body(body: bytes) -> tuple[Optional[str], Optional[str]]:
    """``(type, message)`` from an MMS/TorchServe error body.

    A JSON object without ``message`` may carry ``status`` (MMS's plain answers);
    a ``cause`` follows the message (``message: cause``); a body that is not JSON
    gives ``(None, its first 300 characters)``; anything else ``(None, None)``.
    """
    try:
        data: Any = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        text = body.decode("utf-8", "replace").strip()
        return None, (text[:_MAX_TEXT] or None)
    if isinstance(data, dict):
        kind = data.get("type")
        message = data.get("message") or data.get("status") or data.get("error")  # error: KServe v2
        if message and data.get("cause"):
            message = f"{message}: {data['cause']}"
        return (str(kind) if kind else None), (str(message) if message else None)
    return None, None
