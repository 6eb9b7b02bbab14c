"""The error answers of mmsctl's server: MMS's body ``{"code", "type", "message"}``, plus ``cause`` (why) where the
message is MMS's fixed text (``Failed to start workers``, ``Failed to download model from: URL``)."""

from __future__ import annotations

from typing import Any

__all__ = ["error_text", "is_error_body"]


def is_error_body(body: Any) -> bool:
    """MMS's three keys, and at most a text ``cause`` besides."""
    if not isinstance(body, dict) or not {"code", "type", "message"} <= set(body):
        return False
    extra = set(body) - {"code", "type", "message"}
    return not extra or (extra == {"cause"} and isinstance(body["cause"], str) and bool(body["cause"]))


def error_text(body: dict[str, Any]) -> str:
    """The message and its cause, as a client shows them."""
    return f"{body['message']}: {body['cause']}" if body.get("cause") else str(body["message"])
