"""Query and JSON-body parameters, checked once into the value that is then used.

An integer that is not one, or out of its range, is a 400 naming the parameter (MMS silently uses the
default); every number a request sets has a ceiling here or in a setting.
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional

from aiohttp import web

from mmsctl.server.errors import BadRequest
from mmsctl.server.http.bodies import read_body

__all__ = [
    "MAX_BATCH_DELAY_MS", "MAX_RESPONSE_TIMEOUT", "MAX_WAIT_SECONDS", "bool_param", "int_param", "params",
    "timeout_param",
]



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
            data = json.loads(await read_body(request))
        except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: [[[[... nested too deep
            raise BadRequest("Invalid JSON body.") from None
        if not isinstance(data, dict):
            raise BadRequest("The JSON body must be an object.")
        merged = dict(request.query)
        merged.update({k: v for k, v in data.items() if v is not None})
        return merged
    return request.query
