"""Answers as both HTTP paths send them: a :class:`Reply` is made once, then written by the lean path
(:func:`mmsctl.http1.responses.encode_response`) or handed to aiohttp (:func:`as_response`).

MMS's forms: pretty-printed JSON, ``{"status": ...}``, the error body ``{"code", "type", "message"}`` (and
``cause``), and a handler's answer as it is. No answer carries an exception's class or text: what no check
foresaw is a 500 with :data:`~mmsctl.server.errors.INTERNAL_ERROR`.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from aiohttp import web

from mmsctl.error_body import error_body
from mmsctl.server.errors import INTERNAL_ERROR, ApiException, MethodNotAllowed, ResourceNotFound

__all__ = ["JSON", "Reply", "as_response", "error_reply", "error_response", "json_reply", "json_response",
           "status_response"]

JSON = b"application/json"
_JSON_UTF8 = b"application/json; charset=utf-8"


class Reply:
    """One answer: status (and *reason*, else the status's phrase), body, content type (None: aiohttp's
    default, octet-stream), extra headers, and whether the connection closes after it (a body not read).
    (Slots, no dataclass: one is made per request.)"""

    __slots__ = ("status", "reason", "body", "content_type", "headers", "close")

    def __init__(self, status: int, body: bytes, content_type: Optional[bytes], headers: Optional[dict[str, str]] = None,
                 *, reason: Optional[str] = None, close: bool = False) -> None:
        self.status = status
        self.reason = reason
        self.body = body
        self.content_type = content_type
        self.headers = headers if headers is not None else {}
        self.close = close


def json_reply(data: Any, status: int = 200, reason: Optional[str] = None) -> Reply:
    """Pretty-printed JSON, as MMS's front end writes it."""
    body = (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    return Reply(status, body, _JSON_UTF8, reason=reason)


def error_reply(exc: BaseException, max_request_size: int) -> Reply:
    """The MMS error body for anything a request raised; the connection closes where its body was not read
    (408, 413) or the error says so."""
    close = False
    if isinstance(exc, ApiException):
        headers, close = {}, exc.close
        if exc.retry_after:
            headers["Retry-After"] = str(exc.retry_after)
        if exc.status == 401:
            headers["WWW-Authenticate"] = "Bearer"
        status, body = exc.status, error_body(exc.status, exc.type_name, exc.message, exc.cause)
    else:
        headers, (status, body) = {}, _aiohttp_error(exc, max_request_size)
    return Reply(status, body, JSON, headers, close=close or status in (408, 413))


def _aiohttp_error(exc: BaseException, max_request_size: int) -> tuple[int, bytes]:
    """aiohttp's own HTTP errors as MMS's types; anything else a 500 that says nothing of it."""
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        return 413, error_body(413, "RequestEntityTooLargeException",
                               f"Request body exceeds max_request_size ({max_request_size} bytes).")
    for aiohttp_error, ours in ((web.HTTPMethodNotAllowed, MethodNotAllowed), (web.HTTPNotFound, ResourceNotFound)):
        if isinstance(exc, aiohttp_error):
            mapped = ours()
            return mapped.status, error_body(mapped.status, mapped.type_name, mapped.message)
    if isinstance(exc, web.HTTPException):
        return exc.status, error_body(exc.status, "BadRequestException" if exc.status < 500 else
                                      "InternalServerException", exc.reason)
    return 500, error_body(500, "InternalServerException", INTERNAL_ERROR)


# -- aiohttp's side ------------------------------------------------------------------------------
def as_response(reply: Reply) -> web.Response:
    """*reply* as aiohttp sends it (a Server header of its own, the rest the same)."""
    response = web.Response(status=reply.status, body=reply.body, reason=reply.reason)
    if reply.content_type is not None:
        response.headers["Content-Type"] = reply.content_type.decode()
    else:
        response.headers.popall("Content-Type", None)
    for key, value in reply.headers.items():
        response.headers[key] = value
    if reply.close:
        response.force_close()
    return response


def json_response(data: Any, status: int = 200, reason: Optional[str] = None) -> web.Response:
    return as_response(json_reply(data, status, reason))


def status_response(message: str, status: int = 200, reason: Optional[str] = None) -> web.Response:
    """MMS's ``{"status": "..."}`` answer."""
    return json_response({"status": message}, status, reason)


def error_response(status: int, type_: str, message: str, cause: Optional[str] = None) -> web.Response:
    """MMS's error body ``{"code", "type", "message"}`` (and ``cause``, where there is one)."""
    return as_response(Reply(status, error_body(status, type_, message, cause), JSON))
