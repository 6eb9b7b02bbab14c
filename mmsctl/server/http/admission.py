"""Who gets in: the rules every request passes before a handler, on aiohttp's path and the lean path alike.

Both paths of the inference API (aiohttp's middleware, :mod:`~mmsctl.server.http.middleware`, and the
lean path, :mod:`~mmsctl.server.http.lean`) and the management and metrics APIs call
:meth:`Gate.admit`, so a request gets the same answer whichever path its bytes took. In order:

* header anomalies: no ``Host`` on HTTP/1.1, or a header that may appear once
  (:data:`SINGLETON_HEADERS`: aiohttp's list, plus ``Authorization``, whose first and last
  values could otherwise be read differently) sent twice: 400; an upgrade (``Connection: upgrade`` and
  ``Upgrade``) with a chunked body: 400, and the connection closes, as on the lean path, where llhttp would
  not read such a body (:mod:`~mmsctl.http1.requests`); any other upgrade is not taken, the request served
  in HTTP/1.1 (a ``Content-Length`` body read to its length);
* the Bearer token (401), except on the inference API's health routes;
* draining (503 with ``Retry-After``), except for health checks, metrics and management reads;
* a declared body over ``max_request_size`` (413);
* room for the body among the bytes held at once (``max_buffered_bytes``, 503).

An admitted request holds a :class:`Ticket`: its place among the answers in flight and its body
bytes, given back once by :meth:`Ticket.release` (a context manager too). :class:`Traffic`'s
counters change only through tickets.
"""

from __future__ import annotations

import asyncio
import hmac
from types import TracebackType
from typing import Iterable, Optional

from mmsctl.http1.requests import UPGRADE_WITH_BODY
from mmsctl.server.errors import BadRequest, InvalidKey, RequestTooLarge, ServiceUnavailable

__all__ = ["HEALTH_ROUTES", "SINGLETON_HEADERS", "Gate", "Ticket", "Traffic", "asks_upgrade", "bearer_matches",
           "request_headers"]

#: Headers a request may carry once (RFC 9110 singletons as aiohttp's parser lists them, and Authorization).
SINGLETON_HEADERS = frozenset({
    "authorization", "content-length", "content-location", "content-range", "content-type", "etag", "host",
    "max-forwards", "server", "transfer-encoding", "user-agent",
})
#: Routes of the inference API that answer without a token and while draining (health checks).
HEALTH_ROUTES = frozenset({"/ping", "/ping/{model}", "/v2/health/live", "/v2/health/ready"})
_READS = frozenset({"GET", "HEAD", "OPTIONS"})


class Traffic:
    """The front end's traffic: draining (stop taking requests), answers in flight, and request body
    bytes held at once, bounded by ``max_buffered_bytes`` (a body is held from before it is read until
    its answer is sent: queued predictions hold theirs). The counters move only through :class:`Ticket`."""

    def __init__(self, max_buffered: Optional[int] = None) -> None:
        self.draining = False
        self.max_buffered = max_buffered
        self._in_flight = 0
        self._buffered = 0
        #: Resolved when the last request in flight is answered (made by :meth:`quiet`).
        self._quiet: Optional["asyncio.Future[None]"] = None

    @property
    def in_flight(self) -> int:
        """Admitted requests not answered yet."""
        return self._in_flight

    @property
    def buffered(self) -> int:
        """Request body bytes held now."""
        return self._buffered

    def drain(self) -> None:
        """Stop taking requests (the server is stopping)."""
        self.draining = True

    async def quiet(self) -> None:
        """Return once no admitted request is unanswered (a request whose body is still coming or being
        decoded counts until it is answered, as does one queued for a model)."""
        while self._in_flight:
            if self._quiet is None or self._quiet.done():
                self._quiet = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._quiet)

    def _hold(self, size: int) -> bool:
        """Hold *size* more bytes unless they would pass ``max_buffered_bytes`` (while nothing else is held,
        anything fits: ``max_request_size`` bounds one body)."""
        if size and self.max_buffered is not None and self._buffered + size > self.max_buffered \
                and self._buffered > 0:
            return False
        self._buffered += size
        return True

    def reserve(self, size: int, *, counted: bool = True) -> Optional["Ticket"]:
        """A ticket holding *size* body bytes (and, if *counted*, a place in flight); None when the bytes
        do not fit."""
        if not self._hold(size):
            return None
        if counted:
            self._in_flight += 1
        return Ticket(self, size, counted)

    def _give_back(self, size: int, counted: bool) -> None:
        self._buffered -= size
        if counted:
            self._in_flight -= 1
            if not self._in_flight and self._quiet is not None and not self._quiet.done():
                self._quiet.set_result(None)


class Ticket:
    """What one request holds of the :class:`Traffic`; :meth:`release` gives it back, once however often called."""

    __slots__ = ("_traffic", "size", "counted", "headers")

    def __init__(self, traffic: Traffic, size: int, counted: bool) -> None:
        self._traffic: Optional[Traffic] = traffic
        self.size = size
        self.counted = counted
        #: The request's headers (names lower-cased), as :func:`request_headers` read them.
        self.headers: dict[str, str] = {}

    def grow(self, size: int) -> bool:
        """Hold *size* more bytes (more of a body arrived); False, and nothing more held, when they do not fit."""
        traffic = self._traffic
        if traffic is None or not traffic._hold(size):
            return False
        self.size += size
        return True

    def release(self) -> None:
        traffic, self._traffic = self._traffic, None
        if traffic is not None:
            traffic._give_back(self.size, self.counted)

    def __enter__(self) -> "Ticket":
        return self

    def __exit__(self, kind: Optional[type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.release()


def bearer_matches(authorization: str, token: str) -> bool:
    """Whether an ``Authorization`` value is ``Bearer <token>``, compared as bytes.

    Header values are whatever the client sent (undecodable bytes kept as surrogates);
    any value, ASCII or not, is compared in constant time and never raises.
    """
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    sent = value.strip().encode("utf-8", "surrogateescape")
    return hmac.compare_digest(sent, token.encode("utf-8"))


#: Header names as sent -> as a handler gets them (clients send the same few names): at most so many.
_KEYS: dict[bytes, str] = {}
_KEYS_KEPT = 1024


def _key(name: bytes) -> str:
    key = name.decode("utf-8", "surrogateescape").lower()
    if len(_KEYS) >= _KEYS_KEPT:
        _KEYS.clear()
    _KEYS[name] = key
    return key


def asks_upgrade(raw: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether a ``Connection`` header lists ``upgrade`` (with an ``Upgrade`` header, llhttp's upgrade)."""
    return any(len(name) == 10 and name.lower() == b"connection"
               and any(token.strip().lower() == b"upgrade" for token in value.split(b","))
               for name, value in raw)


def request_headers(raw: Iterable[tuple[bytes, bytes]], http11: bool) -> dict[str, str]:
    """The headers as a handler gets them (names lower-cased, the last of repeated ones); BadRequest for
    a singleton header sent twice or no ``Host`` on HTTP/1.1."""
    headers: dict[str, str] = {}
    keys = _KEYS
    for name, value in raw:
        key = keys.get(name) or _key(name)
        if key in headers and key in SINGLETON_HEADERS:
            raise BadRequest(f"Invalid HTTP message: the {key} header is sent more than once.")
        headers[key] = value.decode("utf-8", "surrogateescape")
    if http11 and "host" not in headers:
        raise BadRequest("Invalid HTTP message: an HTTP/1.1 request needs a Host header.")
    return headers


class Gate:
    """The admission rules of one API (``inference``, ``management`` or ``metrics``)."""

    __slots__ = ("api", "token", "max_request_size", "traffic")

    def __init__(self, api: str, token: Optional[str], max_request_size: int, traffic: Traffic) -> None:
        self.api = api
        #: The API's Bearer key (None: no token needed).
        self.token = token
        self.max_request_size = max_request_size
        self.traffic = traffic

    def admit(self, method: str, route: str, raw_headers: Iterable[tuple[bytes, bytes]], http11: bool,
              length: Optional[int], body: bool) -> Ticket:
        """Admit one request or raise the ApiException it is answered with.

        Args:
            method: the request method.
            route: the canonical path of the route that will handle it ("" when none matches).
            raw_headers: the header lines as sent.
            http11: whether it is an HTTP/1.1 request.
            length: the declared body length (None: chunked or none).
            body: whether a body follows.
        """
        headers = request_headers(raw_headers, http11)
        if body and length is None and "upgrade" in headers and asks_upgrade(raw_headers):
            raise BadRequest(UPGRADE_WITH_BODY, close=True)  # (a declared length is read, the upgrade not taken)
        if self.token and not (self.api == "inference" and route in HEALTH_ROUTES) \
                and not bearer_matches(headers.get("authorization", ""), self.token):
            raise InvalidKey("Token Authorization failed. Token either incorrect, expired, or not provided correctly")
        if self.traffic.draining and not self._open_while_draining(method, route):
            raise ServiceUnavailable("The server is shutting down: it answers the requests it holds and "
                                     "takes no new ones.", retry_after=1)
        if length is not None and length > self.max_request_size:
            raise RequestTooLarge(f"Request body of {length} bytes exceeds max_request_size "
                                  f"({self.max_request_size} bytes).")
        size = (length if length is not None else self.max_request_size) if body else 0  # chunked: it may grow that big
        ticket = self.traffic.reserve(size)
        if ticket is None:
            raise ServiceUnavailable("The server holds as many request bodies as it may "
                                     "(max_buffered_bytes); retry shortly.", retry_after=1)
        ticket.headers = headers
        return ticket

    def _open_while_draining(self, method: str, route: str) -> bool:
        if self.api == "metrics":
            return True
        if self.api == "management":
            return method in _READS
        return route in HEALTH_ROUTES or method == "OPTIONS" or route == "/api-description"
