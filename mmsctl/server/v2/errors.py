"""The Open Inference Protocol's error answers: ``{"error": "..."}`` for any path under ``/v2``.

The middleware builds every error as MMS's body first (one builder, :mod:`mmsctl.error_body`);
on a v2 path it is rewritten here into the protocol's form, keeping its status and headers
(``Retry-After``, ``WWW-Authenticate``).
"""

from __future__ import annotations

import json

from aiohttp import web

from mmsctl.error_body import parse_error_body

__all__ = ["as_v2_error", "is_v2_path", "v2_error_body"]


def is_v2_path(path: str) -> bool:
    """Whether *path* is the v2 API's."""
    return path == "/v2" or path.startswith("/v2/")


def v2_error_body(message: str) -> bytes:
    return json.dumps({"error": message}, ensure_ascii=False).encode("utf-8")


def as_v2_error(response: web.Response) -> web.Response:
    """An MMS error response as the protocol's ``{"error": message}``, same status and headers."""
    _, message = parse_error_body(response.body if isinstance(response.body, bytes) else b"")
    answer = web.Response(status=response.status, body=v2_error_body(message or response.reason or "error"),
                          content_type="application/json")
    for key in ("Retry-After", "WWW-Authenticate"):
        if key in response.headers:
            answer.headers[key] = response.headers[key]
    if response.keep_alive is False:
        answer.force_close()
    return answer
