"""Turning requests into the engine's items and answers into aiohttp responses, MMS's way.

Query and JSON-body parameters are checked here, once, into the value that is then
used: an integer that is not one, or below its floor, is a 400 (MMS silently uses the
default). Bodies are read only after the front end checked their declared size.
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional

from aiohttp import web

from mmsctl.engine.protocol import Parameter, RequestItem, ResponseItem
from mmsctl.error_body import error_body
from mmsctl.server.errors import BadRequest

__all__ = [
    "bool_param", "error_response", "int_param", "json_response", "params", "request_item",
    "status_response", "timeout_param", "web_response",
]


# -- responses ----------------------------------------------------------------------------------
def json_response(data: Any, status: int = 200, reason: Optional[str] = None) -> web.Response:
    """Pretty-printed JSON, as MMS's front end writes it."""
    body = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    return web.Response(status=status, reason=reason, text=body, content_type="application/json")


def status_response(message: str, status: int = 200, reason: Optional[str] = None) -> web.Response:
    """MMS's ``{"status": "..."}`` answer."""
    return json_response({"status": message}, status, reason)


def error_response(status: int, type_: str, message: str) -> web.Response:
    """MMS's error body ``{"code", "type", "message"}``."""
    return web.Response(status=status, body=error_body(status, type_, message), content_type="application/json")


def web_response(item: ResponseItem) -> web.Response:
    """A handler's answer as it is: status, reason, body, and its content type only if it set one."""
    resp = web.Response(status=item.status, body=item.body, reason=item.reason)
    if item.content_type:
        resp.headers["Content-Type"] = item.content_type
    else:
        resp.headers.popall("Content-Type", None)
    for key, value in item.headers.items():
        resp.headers[key] = value
    return resp


# -- parameters ---------------------------------------------------------------------------------
#: An integer as a request may write it: ASCII digits only (no ``1_000``, no other scripts' digits),
#: short enough that parsing it costs nothing.
_INTEGER = re.compile(r"[+-]?[0-9]{1,18}")
#: Ceilings of the numbers a request sets that no setting bounds.
MAX_BATCH_DELAY_MS = 600_000
MAX_RESPONSE_TIMEOUT = 86_400
MAX_WAIT_SECONDS = 3_600


def int_param(params: Any, key: str, default: int, minimum: Optional[int] = 0,
              maximum: Optional[int] = None, *, over: str = "") -> int:
    """An integer query (or JSON body) value, checked once into the number that is then used.

    Unlike MMS (which silently uses the default) a value that is not an integer, or is out of
    ``[minimum, maximum]``, is a 400 naming the parameter; *over* says which setting sets the ceiling.
    """
    value = params.get(key)
    if value is None or value == "":
        return default
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise BadRequest(f"Parameter {key} must be an integer, got {value!r}.")
    text = str(value).strip()
    if not _INTEGER.fullmatch(text):
        raise BadRequest(f"Parameter {key} must be an integer, got {_shown(value)}.")
    number = int(text)
    if minimum is not None and number < minimum:
        raise BadRequest(f"Parameter {key} must be >= {minimum}, got {number}.")
    if maximum is not None and number > maximum:
        raise BadRequest(f"Parameter {key} must be <= {maximum}{over}, got {number}.")
    return number


def _shown(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def bool_param(params: Any, key: str, default: bool) -> bool:
    value = params.get(key)
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise BadRequest(f"Parameter {key} must be true or false, got {_shown(value)}.")


def timeout_param(params: Any, key: str, default_seconds: int) -> int:
    """MMS's ``response_timeout`` is in minutes (it multiplies by 60); ``30s`` gives seconds. At most a day."""
    value = params.get(key)
    if value is None or value == "":
        return default_seconds
    text = str(value).strip().lower()
    if text.endswith("s") and _INTEGER.fullmatch(text[:-1]):
        seconds = int(text[:-1])
    else:
        seconds = 60 * int_param(params, key, 0, minimum=None, maximum=MAX_RESPONSE_TIMEOUT // 60)
        if seconds < 0:
            return default_seconds
    if seconds <= 0:
        raise BadRequest(f"Parameter {key} must be positive, got {_shown(value)}.")
    if seconds > MAX_RESPONSE_TIMEOUT:
        raise BadRequest(f"Parameter {key} must be at most {MAX_RESPONSE_TIMEOUT} seconds, got {seconds}.")
    return seconds


async def params(request: web.Request) -> Any:
    """The query, with a JSON object body's keys on top (register accepts either)."""
    content_type = (request.headers.get("Content-Type") or "").split(";")[0].strip().lower()
    if content_type == "application/json" and request.can_read_body:
        try:
            data = await request.json()
        except ValueError:
            raise BadRequest("Invalid JSON body.") from None
        if not isinstance(data, dict):
            raise BadRequest("The JSON body must be an object.")
        merged = dict(request.query)
        merged.update({k: v for k, v in data.items() if v is not None})
        return merged
    return request.query


async def request_item(request: web.Request, include_query: bool) -> RequestItem:
    """One prediction request as MMS hands it to a worker: the raw body as ``body``, or each form field."""
    parameters: list[Parameter] = []
    if include_query:
        parameters.extend(Parameter(k, v) for k, v in request.query.items())
    headers = {k.lower(): v for k, v in request.headers.items()}
    content_type = request.headers.get("Content-Type")
    mime = content_type.split(";")[0].strip().lower() if content_type else None
    if mime in ("multipart/form-data", "application/x-www-form-urlencoded"):
        try:
            form = await request.post()
        except ValueError as exc:
            raise BadRequest(f"Invalid form data: {exc}") from None
        for key, value in form.items():
            if isinstance(value, web.FileField):
                parameters.append(Parameter(key, value.file.read(), value.content_type))
            else:
                parameters.append(Parameter(key, str(value)))
    else:
        parameters.append(Parameter("body", await request.read(), mime))
    return RequestItem(request["request_id"], parameters, headers)
