"""Streamed downloads into the cache: atomic, retried, with a progress bar on a terminal.

Every failure becomes one :class:`~mmsctl.errors.DownloadError` line (HTTP status,
refused connection, timeout, cut connection). A network that cannot be reached at
all (DNS failure, no route, connect timeout) raises :class:`Unreachable`, so the
resolver can say "offline" and point at a mirror instead.
"""

from __future__ import annotations

import errno
import hashlib
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional
from urllib.parse import urlsplit

from mmsctl.errors import DownloadError, causes
from mmsctl.tls import verify as shared_verify
from mmsctl.zoo import cache

__all__ = ["DownloadOptions", "DownloadStatusError", "Unreachable", "download", "failure_reason"]

#: HTTP statuses worth another try (like pip's retry list).
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_UNREACHABLE_ERRNOS = frozenset({errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN})


class Unreachable(DownloadError):
    """The host cannot be reached at all: no DNS, no route, connect timeout."""

    reference = "download-unreachable"


class DownloadStatusError(DownloadError):
    """The server answered with an HTTP error status (``status``)."""

    reference = "download-status"

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class DownloadOptions:
    """How patient a download is, and what it may fetch."""

    timeout: float = 30.0
    connect_timeout: float = 10.0
    retries: int = 2
    backoff: float = 0.5
    progress: bool = True
    #: Every URL fetched, redirects included, must pass this check (the server's ``allowed_urls``).
    allow: Optional[Callable[[str], bool]] = None
    #: Refuse a body larger than this many bytes (None: no cap).
    max_bytes: Optional[int] = None


class _Transient(Exception):
    """An attempt that failed in a way another attempt may fix."""

    def __init__(self, error: DownloadError) -> None:
        super().__init__(error.message)
        self.error = error


def download(
    url: str,
    target: Path,
    *,
    options: Optional[DownloadOptions] = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Path:
    """Fetch *url* into *target* atomically (a ``.part`` file renamed into place).

    Args:
        url: an http(s) URL.
        target: the final path in the cache; it only ever holds a complete file.
        options: timeouts, retries and whether to show a progress bar.
        sleep: the backoff clock (tests pass a no-op).

    Returns:
        *target*.

    Raises:
        DownloadError: HTTP error status, refused connection, timeout or cut connection.
        Unreachable: the host cannot be reached (DNS, routing, connect timeout).
    """
    import httpx
    from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

    opts = options or DownloadOptions()
    _check_allowed(url, opts)
    attempts = max(0, opts.retries) + 1

    def attempt() -> Path:
        part = cache.new_part_file(target)
        try:
            digest = _fetch_once(httpx, url, part, opts)
            return cache.publish(part, target, url=url, sha256=digest)
        finally:
            part.unlink(missing_ok=True)

    retrying = Retrying(
        stop=stop_after_attempt(attempts),
        wait=wait_exponential(multiplier=opts.backoff, exp_base=2),  # 0.5 s, 1 s, 2 s, …
        retry=retry_if_exception_type(_Transient),
        sleep=sleep,
        reraise=True,
    )
    try:
        return retrying(attempt)
    except _Transient as exc:
        error = exc.error
    if attempts > 1:
        error.message += f" (after {attempts} attempts)"
    raise error


def _check_allowed(url: str, opts: DownloadOptions, redirected: bool = False) -> None:
    if opts.allow is not None and not opts.allow(url):
        how = "redirected to" if redirected else "download of"
        raise DownloadError(f"{how} {url} is not allowed (allowed_urls)")


def _too_big(url: str, size: int, limit: int) -> DownloadError:
    return DownloadError(f"{url} is larger than the {limit}-byte limit (max_archive_size): got {size} bytes")


def _is_loopback(host: str) -> bool:
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


def _fetch_once(httpx: Any, url: str, part: Path, opts: DownloadOptions) -> str:
    """One GET into *part*; returns the sha256. Raises DownloadError or _Transient."""
    parts = urlsplit(url)
    where = parts.netloc or url
    timeout = httpx.Timeout(opts.timeout, connect=opts.connect_timeout)
    received = 0
    expected: Optional[int] = None
    hooks = {"request": [lambda request: _check_allowed(str(request.url), opts, redirected=True)]} \
        if opts.allow is not None else {}
    try:
        trust_env = not _is_loopback(parts.hostname or "")
        with httpx.Client(
            timeout=timeout,
            follow_redirects=True,
            trust_env=trust_env,
            verify=shared_verify(trust_env=trust_env),
            headers={"User-Agent": _user_agent()},
            event_hooks=hooks,
        ) as client:
            with client.stream("GET", url) as response:
                status = response.status_code
                if status >= 400:
                    reason = response.reason_phrase or ""
                    error = DownloadStatusError(f"download failed: HTTP {status} {reason} for {url}".rstrip(), status)
                    if status in RETRY_STATUSES:
                        raise _Transient(error)
                    raise error
                expected = _content_length(response)
                if opts.max_bytes is not None and expected is not None and expected > opts.max_bytes:
                    raise _too_big(url, expected, opts.max_bytes)
                hasher = hashlib.sha256()
                with open(part, "wb") as fh, _progress_bar(opts.progress, url, expected) as advance:
                    for chunk in response.iter_bytes():
                        if opts.max_bytes is not None and received + len(chunk) > opts.max_bytes:
                            raise _too_big(url, received + len(chunk), opts.max_bytes)
                        fh.write(chunk)
                        hasher.update(chunk)
                        received += len(chunk)
                        advance(len(chunk))
                    fh.flush()
                if expected is not None and received != expected:
                    raise _Transient(_cut(url, received, expected))
                _check_magic(part, url, response.headers.get("content-type"))
                return hasher.hexdigest()
    except (DownloadError, _Transient):
        raise
    except httpx.ConnectTimeout as exc:
        raise Unreachable(f"timed out connecting to {where}") from exc
    except httpx.ConnectError as exc:
        if _unreachable(exc):
            raise Unreachable(f"cannot reach {where}: {_reason(exc)}") from exc
        raise _Transient(DownloadError(f"cannot connect to {where}: {_reason(exc)}")) from exc
    except httpx.TimeoutException as exc:
        raise _Transient(DownloadError(f"timed out downloading {url}")) from exc
    except httpx.RemoteProtocolError as exc:
        raise _Transient(_cut(url, received, expected)) from exc
    except httpx.HTTPError as exc:
        raise _Transient(DownloadError(f"download of {url} failed: {_reason(exc)}")) from exc
    except OSError as exc:
        raise DownloadError(f"cannot write {part.parent}: {exc.strerror or exc}") from exc


_MAGIC = {
    (".mar", ".model", ".zip"): (b"PK\x03\x04", b"PK\x05\x06"),
    (".tar.gz", ".tgz"): (b"\x1f\x8b",),
}


def _check_magic(part: Path, url: str, content_type: Optional[str]) -> None:
    """Refuse a body that is not the archive its name promises (a login page, an error page)."""
    name = urlsplit(url).path.lower()
    for suffixes, magics in _MAGIC.items():
        if name.endswith(suffixes):
            with open(part, "rb") as fh:
                head = fh.read(4)
            if not head.startswith(magics):
                got = f" (got {content_type.split(';')[0]})" if content_type else ""
                raise DownloadError(f"{url} did not return a model archive{got}")
            return


def _cut(url: str, received: int, expected: Optional[int]) -> DownloadError:
    of = f" of {expected}" if expected is not None else ""
    return DownloadError(f"connection closed early: got {received}{of} bytes of {url}")


def _content_length(response: Any) -> Optional[int]:
    if response.headers.get("content-encoding", "identity") not in ("", "identity"):
        return None  # the header counts compressed bytes; iter_bytes yields decoded ones
    try:
        return int(response.headers["content-length"])
    except (KeyError, ValueError):
        return None


def failure_reason(exc: BaseException, where: str) -> str:
    """Why a GET to *where* (a host) failed, in a few words: ``cannot reach h: Name or service not known``,
    ``timed out connecting to h``, ``cannot connect to h: connection refused``, not httpx's class name."""
    import httpx

    if isinstance(exc, httpx.ConnectTimeout):
        return f"timed out connecting to {where}"
    if isinstance(exc, httpx.ConnectError):
        verb = "cannot reach" if _unreachable(exc) else "cannot connect to"
        return f"{verb} {where}: {_reason(exc)}"
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out reading from {where}"
    return _reason(exc)


def _unreachable(exc: BaseException) -> bool:
    for cause in causes(exc):
        if isinstance(cause, socket.gaierror):
            return True
        if isinstance(cause, OSError) and cause.errno in _UNREACHABLE_ERRNOS:
            return True
    text = str(exc).lower()
    return any(
        s in text
        for s in ("name or service not known", "temporary failure in name resolution",
                  "network is unreachable", "no route to host", "nodename nor servname")
    )


def _reason(exc: BaseException) -> str:
    text = str(exc).lower()
    if "connection refused" in text or any(
        isinstance(c, ConnectionRefusedError) for c in causes(exc)
    ):
        return "connection refused"
    detail = str(exc).strip()
    return detail.split("] ", 1)[-1] if detail else type(exc).__name__


def _user_agent() -> str:
    from mmsctl import __version__

    return f"mmsctl/{__version__}"


class _progress_bar:
    """A rich download bar on stderr when it is a terminal; a no-op otherwise."""

    def __init__(self, enabled: bool, url: str, total: Optional[int]) -> None:
        self._progress: Any = None
        if not enabled:
            return
        from rich.console import Console

        console = Console(stderr=True)
        if not console.is_terminal:
            return
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=True,
        )
        name = url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        self._task = self._progress.add_task(f"downloading {name}", total=total)

    def __enter__(self) -> Callable[[int], None]:
        if self._progress is None:
            return lambda n: None
        self._progress.start()
        return lambda n: self._progress.advance(self._task, n)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
