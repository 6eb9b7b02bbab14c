"""Which requests the lean path takes, judged from the request line alone (nothing of the head is parsed yet).

An HTTP/1.1 request whose target is plain (ASCII, no query, fragment, percent-escape or dot segment, no empty
segment, at most 2048 bytes) and one of:

* ``GET /ping``;
* ``POST /predictions/{model}`` and ``POST /predictions/{model}/{version}``;
* ``POST /invocations`` (SageMaker's);
* ``POST /v2/models/{model}/infer`` and ``POST /v2/models/{model}/versions/{version}/infer``.

Every other request line (HTTP/1.0, a query, other methods and routes, bytes that are not a request line)
is aiohttp's, with its connection, before anything of it is parsed.
"""

from __future__ import annotations

from typing import Optional, Union

from mmsctl.http1.requests import MAX_LINE, request_line

__all__ = ["INVOKE", "PING", "PREDICT", "V2", "Route", "route_at", "route_of"]

PING, PREDICT, INVOKE, V2 = range(4)
#: (kind, the route's canonical path as aiohttp's application names it (the gate judges by it), model, version).
Route = tuple[int, str, Optional[str], Optional[str]]
_PING: Route = (PING, "/ping", None, None)
_INVOKE: Route = (INVOKE, "/invocations", None, None)
_MAX_TARGET = 2048
#: The routes of request lines seen (clients repeat theirs), at most so many.
_KNOWN: dict[bytes, Optional[Route]] = {}
_KNOWN_KEPT = 1024


def route_at(data: bytes) -> Union[Route, None, bool]:
    """The route of the request *data* starts with: a :data:`Route`, None when it is aiohttp's (a request line
    past the line limit too: aiohttp answers it), False while its request line is not whole."""
    end = data.find(b"\r\n", 0, MAX_LINE + 2)
    if end > 0:
        known = _KNOWN.get(data[:end], False)
        if known is not False:
            return known
    words = request_line(data)
    if words is None:
        return False
    route = route_of(*words)
    if end > 0:
        if len(_KNOWN) >= _KNOWN_KEPT:
            _KNOWN.clear()
        _KNOWN[data[:end]] = route
    return route


def route_of(method: bytes, target: bytes, version: bytes) -> Optional[Route]:
    """The lean route of a request line, or None when the request is aiohttp's."""
    if (version != b"HTTP/1.1" or len(target) > _MAX_TARGET or not target.isascii() or b"?" in target
            or b"%" in target or b"#" in target or b"/." in target):
        return None
    if method == b"GET":
        return _PING if target == b"/ping" else None
    parts = target.split(b"/")
    if method != b"POST" or parts[0] or not all(parts[1:]):
        return None
    if parts[1] == b"predictions":
        if len(parts) == 3:
            return PREDICT, "/predictions/{model}", parts[2].decode(), None
        if len(parts) == 4:
            return PREDICT, "/predictions/{model}/{version}", parts[2].decode(), parts[3].decode()
    elif len(parts) == 2 and parts[1] == b"invocations":
        return _INVOKE
    elif len(parts) >= 5 and parts[1] == b"v2" and parts[2] == b"models":
        if len(parts) == 5 and parts[4] == b"infer":
            return V2, "/v2/models/{model}/infer", parts[3].decode(), None
        if len(parts) == 7 and parts[4] == b"versions" and parts[6] == b"infer":
            return V2, "/v2/models/{model}/versions/{version}/infer", parts[3].decode(), parts[5].decode()
    return None
