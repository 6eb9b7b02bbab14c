"""Turning requests into the engine's items and answers into aiohttp responses, MMS's way.

Query and JSON-body parameters are checked here, once, into the value that is then
used: an integer that is not one, or out of its range, is a 400 (MMS silently uses the
default). Bodies are read only here (:func:`read_body`), after the front end checked their
declared size, within ``request_body_timeout``, and never past ``max_request_size`` (chunked
ones included). A prediction's body reaches the handler as MMS hands it over, except that a
body MMS would mangle is passed as it is: a ``x-www-form-urlencoded`` body that is not a form
(``curl --data-binary @kitten.jpg``) is the raw ``body``.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, Optional
from urllib.parse import parse_qsl

from aiohttp import web

from mmsctl.engine.protocol import Parameter, RequestItem, ResponseItem
from mmsctl.error_body import error_body
from mmsctl.server.errors import ApiException, BadRequest, RequestTimeout

__all__ = [
    "BODY_TIMEOUT", "bool_param", "error_response", "int_param", "json_response", "params", "read_body",
    "request_item", "status_response", "timeout_param", "web_response",
]

#: Seconds a request may take to send its body (``request_body_timeout``), kept on each application.
BODY_TIMEOUT = web.AppKey("body_timeout", float)
#: A urlencoded body with more fields than this is not read as a form (it is the raw body).
_MAX_FORM_FIELDS = 1000


# -- responses ----------------------------------------------------------------------------------
def json_response(data: Any, status: int = 200, reason: Optional[str] = None) -> web.Response:
    """Pretty-printed JSON, as MMS's front end writes it."""
    body = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    return web.Response(status=status, reason=reason, text=body, content_type="application/json")


def status_response(message: str, status: int = 200, reason: Optional[str] = None) -> web.Response:
    """MMS's ``{"status": "..."}`` answer."""
    return json_response({"status": message}, status, reason)


def error_response(status: int, type_: str, message: str, cause: Optional[str] = None) -> web.Response:
    """MMS's error body ``{"code", "type", "message"}`` (and ``cause``, where there is one)."""
    return web.Response(status=status, body=error_body(status, type_, message, cause),
                        content_type="application/json")


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


async def _within_body_timeout(request: web.Request, reading: Any) -> Any:
    timeout = request.config_dict.get(BODY_TIMEOUT, 60.0)
    try:
        return await asyncio.wait_for(reading, timeout)
    except asyncio.TimeoutError:
        raise RequestTimeout(f"The request body did not arrive within {timeout:g} s (request_body_timeout).") \
            from None


async def read_body(request: web.Request) -> bytes:
    """The whole body, within ``request_body_timeout`` (408) and ``max_request_size`` (413), chunked or not."""
    body: bytes = await _within_body_timeout(request, request.read())
    return body


async def params(request: web.Request) -> Any:
    """The query, with a JSON object body's keys on top (register accepts either)."""
    content_type = (request.headers.get("Content-Type") or "").split(";")[0].strip().lower()
    if content_type == "application/json" and request.can_read_body:
        try:
            data = json.loads(await read_body(request))
        except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: [[[[... nested too deep
            raise BadRequest("Invalid JSON body.") from None
        if not isinstance(data, dict):
            raise BadRequest("The JSON body must be an object.")
        merged = dict(request.query)
        merged.update({k: v for k, v in data.items() if v is not None})
        return merged
    return request.query


def _form_fields(body: bytes) -> Optional[list[tuple[str, str]]]:
    """The fields of a urlencoded form, or None if *body* is not one (an image sent by ``curl --data-binary``)."""
    if not body:
        return None
    try:
        return parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=True,
                         max_num_fields=_MAX_FORM_FIELDS)
    except (UnicodeDecodeError, ValueError):
        return None


async def request_item(request: web.Request) -> RequestItem:
    """One prediction request as a worker gets it: the query parameters (every prediction route),
    then the raw body as ``body``, or each field of a form."""
    parameters = [Parameter(k, v) for k, v in request.query.items()]
    headers = request.get("headers")  # read once, by the admission gate
    if headers is None:
        headers = {k.lower(): v for k, v in request.headers.items()}
    content_type = request.headers.get("Content-Type")
    mime = content_type.split(";")[0].strip().lower() if content_type else None
    if mime == "multipart/form-data":
        try:
            form = await _within_body_timeout(request, request.post())
        except (web.HTTPException, ApiException):
            raise  # 413 over max_request_size, 408 too slow
        except Exception as exc:  # noqa: BLE001 - whatever the multipart parser trips on is the client's body
            raise BadRequest(f"Invalid multipart body: {getattr(exc, 'message', None) or exc}") from None
        for key, value in form.items():
            if isinstance(value, web.FileField):
                parameters.append(Parameter(key, value.file.read(), value.content_type))
            else:
                parameters.append(Parameter(key, str(value)))
        return RequestItem(request["request_id"], parameters, headers)
    body = await read_body(request)
    fields = _form_fields(body) if mime == "application/x-www-form-urlencoded" else None
    if fields is not None:
        parameters.extend(Parameter(k, v) for k, v in fields)
    else:
        parameters.append(Parameter("body", body, mime))
    return RequestItem(request["request_id"], parameters, headers)
