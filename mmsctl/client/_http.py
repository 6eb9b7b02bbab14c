"""One httpx client per API, with retries that are safe and errors that are translated.

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
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

from mmsctl.client._errors import error_from_response, error_from_transport
from mmsctl.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    import httpx

__all__ = ["HttpApi", "IDEMPOTENT", "USER_AGENT"]

IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT"})
RETRY_STATUS = frozenset({502, 503, 504})


def _user_agent() -> str:
    from mmsctl import __version__

    return f"mmsctl/{__version__}"


USER_AGENT = _user_agent()


@dataclass
class HttpApi:
    """A base URL, a token and an httpx client: the plumbing shared by every API client."""

    base_url: str
    token: Optional[str] = None
    timeout: float = 30.0
    retries: int = 2
    backoff: float = 0.2
    transport: Optional["httpx.BaseTransport"] = None
    verify: Any = True
    #: the backoff clock; tests pass a recorder instead of waiting.
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    def __post_init__(self) -> None:
        import httpx

        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        # Every call is relative to base_url and redirects are not followed, so a plain-http
        # server never needs TLS: skip loading the CA bundle (about 30 ms of every command).
        verify = self.verify if self.base_url.lower().startswith("https:") else False
        try:
            self.client = httpx.Client(
                base_url=self.base_url,
                headers=headers,
                timeout=httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0)),
                transport=self.transport,
                verify=verify,
                follow_redirects=False,
                trust_env=False,
            )
        except (httpx.InvalidURL, ValueError) as exc:
            raise UsageError(f"bad server URL {self.base_url!r}: {exc}") from None

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Optional[dict[str, Any]] = None,
        content: Optional[bytes] = None,
        headers: Optional[dict[str, str]] = None,
        model: Optional[str] = None,
        operation: str = "",
        timeout: Optional[float] = None,
        ok_statuses: tuple[int, ...] = (),
        retries: Optional[int] = None,
    ) -> "httpx.Response":
        """Send one call; return the response for a 2xx (or *ok_statuses*), else raise an mmsctl error."""
        import httpx
        from tenacity import (
            Retrying,
            retry_if_exception,
            retry_if_result,
            stop_after_attempt,
            wait_exponential,
        )

        method = method.upper()
        idempotent = method in IDEMPOTENT
        clean_params = {k: _param(v) for k, v in (params or {}).items() if v is not None}
        kwargs: dict[str, Any] = {}
        if timeout is not None:
            kwargs["timeout"] = httpx.Timeout(timeout, connect=min(timeout, 10.0))

        def send() -> "httpx.Response":
            return self.client.request(
                method, path, params=clean_params, content=content, headers=headers, **kwargs
            )

        def resend_after(exc: BaseException) -> bool:
            if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
                return True  # nothing reached the server
            broken = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)
            return idempotent and isinstance(exc, broken)

        def answer_again(response: "httpx.Response") -> bool:
            wanted = response.is_success or response.status_code in ok_statuses
            return idempotent and not wanted and response.status_code in RETRY_STATUS

        retrying = Retrying(
            stop=stop_after_attempt(1 + (self.retries if retries is None else retries)),
            wait=wait_exponential(multiplier=self.backoff, exp_base=2),
            retry=retry_if_exception(resend_after) | retry_if_result(answer_again),
            sleep=self.sleep,
            # Out of attempts: hand back the last response, or raise the last exception.
            retry_error_callback=lambda state: state.outcome.result(),  # type: ignore[union-attr]
        )
        url = self.base_url + path
        try:
            response: httpx.Response = retrying(send)
        except httpx.InvalidURL as exc:
            raise UsageError(f"bad server URL {url!r}: {exc}") from None
        except httpx.HTTPError as exc:
            raise error_from_transport(exc, url, timeout or self.timeout) from None
        if response.is_success or response.status_code in ok_statuses:
            return response
        raise error_from_response(response, model=model, operation=operation)

    def close(self) -> None:
        self.client.close()


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
