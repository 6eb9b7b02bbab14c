"""The Open Inference Protocol's error answers: ``{"error": "..."}`` for any path under ``/v2``.

Every error is built as MMS's body first (one builder, :func:`~mmsctl.server.http.replies.error_reply`); on a
v2 route it is rewritten here into the protocol's form, keeping its status, its headers (``Retry-After``,
``WWW-Authenticate``) and whether the connection closes.
"""

from __future__ import annotations

import json

from mmsctl.error_body import parse_error_body
from mmsctl.server.http.replies import JSON, Reply

__all__ = ["as_v2_error", "is_v2_path", "v2_error_body"]

_KEPT = ("Retry-After", "WWW-Authenticate")


def is_v2_path(path: str) -> bool:
    """Whether *path* is the v2 API's."""
    return path == "/v2" or path.startswith("/v2/")


def v2_error_body(message: str) -> bytes:
    return json.dumps({"error": message}, ensure_ascii=False).encode("utf-8")


def as_v2_error(reply: Reply) -> Reply:
    """An MMS error reply as the protocol's ``{"error": message}``, same status, headers and close."""
    _, message = parse_error_body(reply.body)
    return Reply(reply.status, v2_error_body(message or reply.reason or "error"), JSON,
                 {k: reply.headers[k] for k in _KEPT if k in reply.headers}, close=reply.close)
