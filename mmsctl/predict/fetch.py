"""Download one input named by URL into memory: http(s) only, a byte ceiling and a deadline.

``mmsctl predict URL`` and the Lambda handler's ``?url=`` requests both read their
image this way. The whole download, redirects included, must finish within *timeout*
seconds and *max_bytes* bytes; a server that announces more is refused before its
body is read, one that sends more is cut off at the ceiling, and one that sends a
byte at a time meets the deadline. A failure is a :class:`FetchError`: a
:class:`~mmsctl.errors.DownloadError` that also carries the HTTP status and MMS
error type a server answers with.

(Model archives are a different job: :mod:`mmsctl.zoo.download` streams them to disk,
atomically, with retries and a progress bar.)
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Optional
from urllib.parse import urlsplit

from mmsctl import addresses
from mmsctl.addresses import ENV_ALLOW, AllowList, NeverAllowed, Resolver, resolve
from mmsctl.errors import DownloadError
from mmsctl.tls import verify as shared_verify

if TYPE_CHECKING:
    import ssl

__all__ = ["MAX_URL_BYTES", "URL_TIMEOUT_S", "FetchError", "check_url", "fetch_url"]

#: ``mmsctl predict``'s limits for one URL input (the Lambda handler sets its own).
URL_TIMEOUT_S = 30.0
MAX_URL_BYTES = 64 * 1024 * 1024  # an image, not whatever the far end streams
_MAX_REDIRECTS = 3
_MAX_URL = 2048


class FetchError(DownloadError):
    """Why the input could not be fetched, also as an HTTP status and an MMS error type."""

    reference = "url-fetch"

    def __init__(self, status: int, type: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.type = type


def check_url(url: str) -> str:
    """The URL, if it is an absolute http(s) URL with a host; else :class:`FetchError` (400)."""
    if len(url) > _MAX_URL:
        raise FetchError(400, "BadRequestException", f"url is longer than {_MAX_URL} characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a bad port ("x:99999", "x:abc") raises here, not at the fetch
    except ValueError as exc:
        raise FetchError(400, "BadRequestException", f"url {url[:200]!r} is not valid: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FetchError(400, "BadRequestException", f"url must be an http(s) URL with a host, not {url[:200]!r}")
    return url


def fetch_url(url: str, *, max_bytes: int = MAX_URL_BYTES, timeout: float = URL_TIMEOUT_S,
              allow: Optional[AllowList] = None, resolver: Optional[Resolver] = None,
              allow_setting: str = ENV_ALLOW, tls: Optional[ssl.SSLContext] = None) -> bytes:
    """GET *url* within *timeout* seconds and *max_bytes* bytes, from public addresses only.

    Each hop (the URL, then up to three redirects) is resolved once with *resolver*
    (default: :data:`mmsctl.addresses.system_resolver`, looked up now so tests can
    replace it), judged (:func:`mmsctl.addresses.resolve`; *allow* defaults to
    ``MMSCTL_FETCH_ALLOW``; *allow_setting* is the name a refusal tells the user to set)
    and connected to at the judged address, so a name that answers differently on a
    second lookup cannot steer the connection. Later hops get what is left of *timeout*.
    TLS names and verifies the host, not the address (*tls*: the trust store, default httpx's).

    Raises:
        FetchError: 400 bad URL, 403 a destination that is not public, 413 too large,
            502 the server failed or answered an error, 504 too slow.
    """
    import httpx

    check_url(url)
    allow = AllowList.from_environ() if allow is None else allow
    resolver = addresses.system_resolver if resolver is None else resolver
    deadline = time.monotonic() + timeout
    current = url
    try:
        for _hop in range(_MAX_REDIRECTS + 1):
            left = deadline - time.monotonic()
            if left <= 0:
                raise httpx.TimeoutException("deadline")
            with _pinned_client(current, allow, resolver, left, allow_setting, tls) as client:
                with client.stream("GET", current) as response:
                    if response.is_redirect and response.next_request is not None:
                        current = check_url(str(response.next_request.url))
                        continue
                    return _read(response, url, max_bytes, deadline, timeout)
        raise FetchError(502, "BadGatewayException", f"{url[:200]}: more than {_MAX_REDIRECTS} redirects")
    except httpx.TimeoutException:
        raise FetchError(504, "GatewayTimeoutException", f"{url[:200]}: no answer within {timeout:g}s") from None
    except httpx.HTTPError as exc:
        from mmsctl.zoo.download import failure_reason

        reason = failure_reason(exc, urlsplit(url).netloc or url)
        raise FetchError(502, "BadGatewayException", f"{url[:200]}: {reason}") from None


def _pinned_client(url: str, allow: AllowList, resolver: Resolver, timeout: float, allow_setting: str,
                   tls: Optional[ssl.SSLContext]) -> Any:
    """An httpx client that connects only to the judged addresses of *url*'s host (SNI and Host stay the name).

    Like a resolving client, it tries the next answer when one cannot be reached (an
    IPv6 answer where the function has no IPv6 route)."""
    import httpcore
    import httpx

    parts = urlsplit(url)
    host = parts.hostname or ""
    checked_port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        judged = resolve(host, checked_port, allow=allow, resolver=resolver)
    except PermissionError as exc:
        how = "no allow-list opens it" if isinstance(exc, NeverAllowed) else f"set {allow_setting} to allow it"
        raise FetchError(403, "ForbiddenException", f"{url[:200]}: {exc}; only public addresses are fetched ({how})") \
            from None
    except (OSError, UnicodeError) as exc:
        raise FetchError(502, "BadGatewayException", f"{url[:200]}: cannot resolve {host}: {exc}") from None

    class Pinned(httpcore.SyncBackend):
        def connect_tcp(self, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
            for address in judged[:-1]:  # what was judged, whatever httpx parsed
                try:
                    return super().connect_tcp(str(address), checked_port, *args, **kwargs)
                except httpcore.ConnectError:
                    continue
            return super().connect_tcp(str(judged[-1]), checked_port, *args, **kwargs)

    transport = httpx.HTTPTransport(verify=shared_verify() if tls is None else tls, trust_env=False)
    pool = getattr(transport, "_pool", None)
    if not isinstance(pool, httpcore.ConnectionPool):  # fail closed if httpx changes its insides
        raise FetchError(500, "InternalServerException", "this httpx cannot pin a connection's address")
    pool._network_backend = Pinned()
    limits = httpx.Timeout(timeout, connect=min(5.0, timeout))
    return httpx.Client(transport=transport, timeout=limits, follow_redirects=False, trust_env=False,
                        headers={"user-agent": "mmsctl"})


def _read(response: Any, url: str, max_bytes: int, deadline: float, timeout: float) -> bytes:
    """The body of *response*, within the byte ceiling and the deadline."""
    if response.status_code >= 400:
        raise FetchError(502, "BadGatewayException",
                         f"{url[:200]}: HTTP {response.status_code} {response.reason_phrase}")
    announced = response.headers.get("content-length", "")
    if announced.isdigit() and int(announced) > max_bytes:
        raise FetchError(413, "PayloadTooLargeException",
                         f"{url[:200]}: {int(announced)} bytes is more than the {max_bytes} allowed")
    data = bytearray()
    for chunk in response.iter_bytes():  # as it arrives: a byte-a-second server meets the deadline
        data += chunk
        if len(data) > max_bytes:
            raise FetchError(413, "PayloadTooLargeException", f"{url[:200]}: more than the {max_bytes} bytes allowed")
        if time.monotonic() > deadline:
            raise FetchError(504, "GatewayTimeoutException", f"{url[:200]}: download took longer than {timeout:g}s")
    return bytes(data)
