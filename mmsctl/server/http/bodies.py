"""Request bodies, on both HTTP paths: read within their limits, then turned into the engine's request items.

aiohttp's path reads a body only here (:func:`read_body`), after the front end checked its declared size,
within ``request_body_timeout``, never past ``max_request_size`` (chunked ones included); the lean path has
read the same limits itself (:mod:`~mmsctl.server.http.lean`). From the whole body, both make a prediction's
request item the same way (:func:`request_item`): the query parameters, then the raw body as ``body`` or each
field of a form. A body MMS would mangle is passed as it is: a ``x-www-form-urlencoded`` body that is not a
form (``curl --data-binary @kitten.jpg``) is the raw ``body``.
"""

from __future__ import annotations

import asyncio
from typing import Iterable, Optional
from urllib.parse import parse_qsl

from aiohttp import StreamReader, web
from aiohttp.multipart import BodyPartReader, MultipartReader

from mmsctl.engine.protocol import Parameter, RequestItem
from mmsctl.server.errors import ApiException, BadRequest, RequestTimeout, RequestTooLarge

__all__ = ["BODY_TIMEOUT", "FORMS", "MULTIPART", "body_parameters", "media_type", "multipart_parameters",
           "read_body", "request_item"]

#: Seconds a request may take to send its body (``request_body_timeout``), kept on each application.
BODY_TIMEOUT = web.AppKey("body_timeout", float)
MULTIPART = "multipart/form-data"
_URLENCODED = "application/x-www-form-urlencoded"
#: The bodies read as forms.
FORMS = frozenset({MULTIPART, _URLENCODED})
#: A form with more fields than this: a urlencoded body is the raw body, a multipart one is refused (as aiohttp does).
_MAX_FORM_FIELDS = 1000


#: ``Content-Type`` values seen -> their media types (clients send the same few): at most so many.
_MEDIA: dict[str, str] = {}
_MEDIA_KEPT = 256


def media_type(content_type: Optional[str]) -> Optional[str]:
    """The media type of a ``Content-Type`` value, lower case, without parameters (None: none sent)."""
    if not content_type:
        return None
    found = _MEDIA.get(content_type)
    if found is None:
        found = content_type.split(";")[0].strip().lower()
        if len(_MEDIA) >= _MEDIA_KEPT:
            _MEDIA.clear()
        _MEDIA[content_type] = found
    return found


async def read_body(request: web.Request) -> bytes:
    """The whole body, within ``request_body_timeout`` (408) and ``max_request_size`` (413), chunked or not."""
    timeout = request.config_dict.get(BODY_TIMEOUT, 60.0)
    try:
        return await asyncio.wait_for(request.read(), timeout)
    except asyncio.TimeoutError:
        raise RequestTimeout(f"The request body did not arrive within {timeout:g} s (request_body_timeout).") \
            from None


def _form_fields(body: bytes) -> Optional[list[tuple[str, str]]]:
    """The fields of a urlencoded form, or None if *body* is not one (an image sent by ``curl --data-binary``)."""
    if not body:
        return None
    try:
        return parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=True,
                         max_num_fields=_MAX_FORM_FIELDS)
    except (UnicodeDecodeError, ValueError):
        return None


def body_parameters(mime: Optional[str], body: bytes) -> list[Parameter]:
    """A body that is not multipart as the handler gets it: a urlencoded form's fields, else ``body``."""
    fields = _form_fields(body) if mime == _URLENCODED else None
    if fields is not None:
        return [Parameter(k, v) for k, v in fields]
    return [Parameter("body", body, mime)]


class _PartTooLarge(RequestTooLarge):
    def __init__(self, size: int) -> None:
        super().__init__(f"Request body exceeds max_request_size ({size} bytes).")


class _Held:
    """What :class:`aiohttp.StreamReader` asks of a connection, for a body that is already whole."""

    _reading_paused = False
    connected = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self, resume_parser: bool = True) -> None:
        pass


async def multipart_parameters(content_type: str, body: bytes, max_size: int) -> list[Parameter]:
    """A ``multipart/form-data`` body's fields, each by its name: a file's bytes with its content type, a text
    field as text (its charset, else UTF-8), any other field's bytes (BadRequest for a body that is not one)."""
    stream = StreamReader(_Held(), 1 << 16, loop=asyncio.get_running_loop())  # type: ignore[arg-type]
    stream.feed_data(body)
    stream.feed_eof()
    found: list[Parameter] = []
    try:
        reader = MultipartReader({"Content-Type": content_type}, stream, client_max_size=max_size,
                                 max_size_error_cls=_PartTooLarge)
        while (part := await reader.next()) is not None:
            if len(found) >= _MAX_FORM_FIELDS:
                raise _PartTooLarge(max_size)
            if not isinstance(part, BodyPartReader):
                raise ValueError("a multipart part inside a part")
            found.append(await _field(part))
    except ApiException:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the multipart parser trips on is the client's body
        raise BadRequest(f"Invalid multipart body: {getattr(exc, 'message', None) or exc}") from None
    return found


async def _field(part: BodyPartReader) -> Parameter:
    if part.name is None:
        raise ValueError("Multipart field missing name.")
    value = bytearray()
    async for decoded in part.decode_iter(await part.read()):
        value.extend(decoded)
    content_type = part.headers.get("Content-Type")
    if part.filename:
        return Parameter(part.name, bytes(value), content_type or "application/octet-stream")
    if content_type is None or content_type.startswith("text/"):
        return Parameter(part.name, value.decode(part.get_charset(default="utf-8")))
    return Parameter(part.name, bytes(value), content_type)


def request_item(request_id: str, query: Iterable[tuple[str, str]], headers: dict[str, str],
                 parameters: list[Parameter]) -> RequestItem:
    """One prediction request as a worker gets it: the query parameters, then the body's."""
    if query:
        parameters = [*(Parameter(k, v) for k, v in query), *parameters]
    return RequestItem(request_id, parameters, headers)
