"""The request/response logic every client shares, without I/O; a sync and an async face drive it.

An API operation is written once, as a generator (the "sans-I/O" style): it yields a
:class:`Call` — one HTTP request described as data — and is sent back the
:class:`httpx.Response` (or, thrown in, the mmsctl error) until it returns its result.
Operations of several requests are one generator too: following ``nextPageToken`` yields a
call per page, and waiting for workers yields a :class:`Pause` between describes.

:class:`BaseApi` holds what both faces need: the httpx client settings (base URL, bearer
token, user agent, timeouts, no TLS for plain http), the retry policy and the translation of
answers into results or mmsctl errors (:mod:`mmsctl.client._errors`). The sync face
(:class:`~mmsctl.client._http.HttpApi`, over ``httpx.Client``) and the async face
(:class:`~mmsctl.client._http.AsyncHttpApi`, over ``httpx.AsyncClient``) only send calls and
sleep pauses — the way httpx's own ``Client`` and ``AsyncClient`` share a ``BaseClient``.

Retry policy (attempts 1 + ``retries``, backoff 0.2 s, 0.4 s, …; run by tenacity):

- the connection could not be made (refused, DNS, connect timeout): any method is
  retried, because nothing reached the server;
- the request was sent and the connection broke, or the server said 502/503/504:
  only idempotent calls are retried (GET, HEAD, OPTIONS, PUT — a scale to N
  workers twice is still N workers);
- POST (register, predict) and DELETE (unregister) are never re-sent once sent: a
  second register answers 409 and a second unregister 404 even though the first
  one worked, which would turn a success into a confusing error;
- a read timeout is never retried: the timeout is the user's budget.

Deadline and size (docs/cli.md): a call's timeout bounds the whole call, every attempt,
backoff, connect, upload and read together, not each network operation (a server that
trickles a byte a second fails at the deadline); an answer is read as a stream and given up
once it passes the ``max_response_bytes`` setting (64 MiB), never read whole and then checked.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generator, Mapping, Optional, TypeVar, Union
from urllib.parse import quote

from mmsctl.client._errors import AnswerTooLarge, error_from_response, error_from_transport
from mmsctl.errors import ApiError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    import httpx

__all__ = [
    "IDEMPOTENT",
    "RETRY_STATUS",
    "USER_AGENT",
    "BaseApi",
    "Call",
    "Deadline",
    "Operation",
    "Pause",
    "json_of",
    "status_message",
    "url_path",
]

IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT"})
RETRY_STATUS = frozenset({502, 503, 504})
#: The longest a connection may take to open, whatever the call's timeout.
_MAX_CONNECT_S = 10.0

T = TypeVar("T")


def _user_agent() -> str:
    from mmsctl import __version__

    return f"mmsctl/{__version__}"


USER_AGENT = _user_agent()


@dataclass(frozen=True)
class Call:
    """One HTTP request of an operation, as data.

    *path* is already encoded (build it with :func:`url_path`); *params* are encoded by
    httpx (``None`` values are left out, booleans sent as ``true``/``false``). *model* and
    *operation* name the request in errors; *ok_statuses* are non-2xx answers the operation
    reads itself; *retries* overrides the client's count for this call.
    """

    method: str
    path: str
    params: Mapping[str, Any] = field(default_factory=dict)
    content: Optional[bytes] = None
    headers: Mapping[str, str] = field(default_factory=dict)
    operation: str = ""
    model: Optional[str] = None
    timeout: Optional[float] = None
    ok_statuses: tuple[int, ...] = ()
    retries: Optional[int] = None

    @property
    def idempotent(self) -> bool:
        return self.method.upper() in IDEMPOTENT


@dataclass(frozen=True)
class Pause:
    """Wait *seconds* before the next call (polling); the face sleeps its own way."""

    seconds: float


@dataclass
class Deadline:
    """When one call must be over (``time.monotonic()`` seconds): *seconds* from its start."""

    seconds: float
    at: float = field(init=False)

    def __post_init__(self) -> None:
        self.at = time.monotonic() + self.seconds

    def left(self) -> float:
        return self.at - time.monotonic()


#: An operation: yields calls and pauses, is sent the responses, returns its result.
Operation = Generator[Union[Call, Pause], Any, T]


def url_path(*segments: Optional[str]) -> str:
    """``/a/b`` from segments, each percent-encoded whole (a ``/`` in a model name stays in it).

    ``None`` and empty segments after the first are left out (an unset version).
    """
    head, *rest = segments
    if not head:
        raise UsageError("model name is empty")
    parts = [head, *(s for s in rest if s)]
    return "".join("/" + quote(str(p), safe="") for p in parts)


def json_of(response: "httpx.Response") -> Any:
    """The JSON document of an answer; an :class:`ApiError` if it is not JSON."""
    try:
        return json.loads(response.content)
    except ValueError:
        raise ApiError(
            f"{response.request.method} {response.request.url}: the answer is not JSON",
            status=response.status_code,
        ) from None


def status_message(response: "httpx.Response") -> str:
    """The server's status line of a write (``{"status": "..."}``), or its text."""
    try:
        data = json.loads(response.content)
    except ValueError:
        return response.text.strip()
    if isinstance(data, dict):
        return str(data.get("status") or data.get("message") or "")
    return ""


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class BaseApi:
    """One API's base URL, token and settings, and the logic both faces share.

    Args:
        base_url: ``http(s)://host:port`` of the API.
        token: bearer token for this API (None: no ``Authorization`` header).
        timeout: seconds each call may take in all (its attempts, connect at most 10 s).
        retries: extra attempts where the retry policy allows one.
        backoff: first backoff in seconds (doubles each attempt).
        transport: an httpx transport (``httpx.MockTransport`` in tests).
        verify: TLS verification for https URLs (httpx's ``verify``).
        max_response_bytes: the most bytes of an answer read (default: the setting).
    """

    def __init__(
        self,
        base_url: str,
        token: Optional[str] = None,
        timeout: float = 30.0,
        retries: int = 2,
        backoff: float = 0.2,
        transport: Any = None,
        verify: Any = True,
        max_response_bytes: Optional[int] = None,
    ) -> None:
        if max_response_bytes is None:
            from mmsctl.config import max_response_bytes as setting

            max_response_bytes = setting()
        self.max_response_bytes = max_response_bytes
        self.base_url = base_url
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.transport = transport
        self.verify = verify

    # --- building requests ---

    def _verify(self) -> Any:
        # Every call is relative to base_url and redirects are not followed, so a plain-http
        # server never needs TLS: the CA bundle is not loaded for it.
        from mmsctl.tls import verify

        return verify(self.verify) if self.base_url.lower().startswith("https:") else False

    def _client_options(self, transport: Any = None) -> dict[str, Any]:
        """Keyword arguments for ``httpx.Client`` and ``httpx.AsyncClient`` alike (*transport*
        replaces the one given to the API, if any)."""
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return {
            "base_url": self.base_url,
            "headers": headers,
            "timeout": self._timeout(self.timeout),
            "transport": self.transport or transport,
            "verify": self._verify(),
            "follow_redirects": False,
            "trust_env": False,
        }

    @staticmethod
    def _timeout(seconds: float) -> "httpx.Timeout":
        import httpx

        seconds = max(seconds, 0.001)
        return httpx.Timeout(seconds, connect=min(seconds, _MAX_CONNECT_S))

    def _deadline(self, call: Call) -> Deadline:
        return Deadline(self._limit(call))

    def _limit(self, call: Call) -> float:
        """The seconds *call* may take: its own timeout, else the client's."""
        return call.timeout if call.timeout is not None else self.timeout

    def _request_options(self, call: Call, deadline: Deadline) -> dict[str, Any]:
        """Keyword arguments for ``client.build_request`` (sync or async) for an attempt at *call*."""
        import httpx

        left = deadline.left()
        if left <= 0:
            raise httpx.ReadTimeout("the call's deadline passed before this attempt")
        return {
            "params": {k: _param(v) for k, v in call.params.items() if v is not None},
            "content": call.content,
            "headers": dict(call.headers) or None,
            "timeout": self._timeout(left),
        }

    def _bad_url(self, call: Call, exc: Exception) -> UsageError:
        return UsageError(f"bad server URL {self.base_url + call.path!r}: {exc}")

    # --- retries ---

    def _retry_options(self, call: Call, deadline: Deadline) -> dict[str, Any]:
        """tenacity's stop/wait/retry for *call* (``Retrying`` and ``AsyncRetrying`` alike):
        no attempt after *deadline*."""
        import httpx
        from tenacity import retry_if_exception, retry_if_result, stop_after_attempt, stop_after_delay, wait_exponential

        idempotent = call.idempotent

        def resend_after(exc: BaseException) -> bool:
            if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
                return True  # nothing reached the server
            broken = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)
            return idempotent and isinstance(exc, broken)

        def answer_again(response: "httpx.Response") -> bool:
            return idempotent and not self._wanted(call, response) and response.status_code in RETRY_STATUS

        retries = self.retries if call.retries is None else call.retries
        return {
            "stop": stop_after_attempt(1 + max(0, retries)) | stop_after_delay(deadline.seconds),
            "wait": wait_exponential(multiplier=self.backoff, exp_base=2),
            "retry": retry_if_exception(resend_after) | retry_if_result(answer_again),
            # Out of attempts: hand back the last response, or raise the last exception.
            "retry_error_callback": lambda state: state.outcome.result(),
        }

    # --- reading answers ---

    def _check_size(self, call: Call, response: "httpx.Response", size: int) -> None:
        """Raise :class:`AnswerTooLarge` once *size* bytes of *response* pass the limit."""
        if size > self.max_response_bytes:
            raise AnswerTooLarge(self.base_url + call.path, self.max_response_bytes, status=response.status_code)

    def _announced(self, call: Call, response: "httpx.Response") -> None:
        """Fail before reading an answer whose ``Content-Length`` is already over the limit."""
        try:
            length = int(response.headers.get("content-length", "0"))
        except ValueError:
            return  # h11 refuses a malformed length before this
        self._check_size(call, response, length)

    @staticmethod
    def _keep(response: "httpx.Response", body: bytes) -> None:
        """Hand *body*, read chunk by chunk, to *response* as ``Response.read()`` would have."""
        response._content = body

    @staticmethod
    def _wanted(call: Call, response: "httpx.Response") -> bool:
        return response.is_success or response.status_code in call.ok_statuses

    def _result(self, call: Call, response: "httpx.Response") -> "httpx.Response":
        """*response* when the operation reads it, else the mmsctl error for it."""
        if self._wanted(call, response):
            return response
        raise error_from_response(response, model=call.model, operation=call.operation)

    def _failed(self, call: Call, exc: "httpx.HTTPError") -> Exception:
        """The mmsctl error for a call that got no answer."""
        import httpx

        if isinstance(exc, httpx.InvalidURL):
            return self._bad_url(call, exc)
        return error_from_transport(exc, self.base_url + call.path, call.timeout or self.timeout)
