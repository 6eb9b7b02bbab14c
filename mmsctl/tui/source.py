"""Where `mmsctl top` gets its data: a :class:`DataSource`, and the real one that polls a server.

The app only knows the :class:`DataSource` protocol (``fetch`` a :class:`Snapshot`,
``scale``/``register``/``unregister``), so tests inject a scripted source and the
snapshot tests need no server. :class:`HttpSource` polls one server context with
one reused ``httpx.AsyncClient`` and short timeouts:

* every poll: ``/ping``, the model list (following pages) and ``/metrics``;
* describe: the model on screen every poll, the others round-robin so each is
  described every ``describe_every`` seconds (50 models do not cost 50 requests a second);
* no metrics endpoint (real MMS): tried again every 30 s; meanwhile the numbers
  only metrics give are ``None`` (unavailable), never 0.

It never raises from ``fetch``: a dead server is a snapshot with ``reachable=False``
and the reason, so the screen keeps its last data and reconnects by itself.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional, Protocol, runtime_checkable
from urllib.parse import urlsplit

from mmsctl.client._errors import error_from_transport
from mmsctl.errors import ApiError, AuthenticationFailed, ClientError
from mmsctl.tui.model import HostStats, ModelRow, ServerStatus, Snapshot
from mmsctl.tui.readings import (
    MetricIndex,
    detect_kind,
    host_from_metrics,
    load_from_metrics,
    merge_row,
    parse_metrics,
    row_from_describe,
)

__all__ = ["DataSource", "Endpoints", "HttpSource", "endpoints_for"]

_LOOPBACK = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}
_METRICS_RETRY_S = 30.0


@runtime_checkable
class DataSource(Protocol):
    """What the app polls and acts through."""

    #: A short description for the header, e.g. "local (http://127.0.0.1:8081)".
    title: str

    async def fetch(self) -> Snapshot: ...

    async def scale(self, model: str, min_workers: int, max_workers: Optional[int] = None,
                    *, version: Optional[str] = None) -> str: ...

    async def register(self, url: str, *, model_name: Optional[str] = None,
                       initial_workers: int = 1) -> str: ...

    async def unregister(self, model: str, *, version: Optional[str] = None) -> str: ...

    def set_focus(self, key: Optional[str]) -> None: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class Endpoints:
    """The URLs of one server (what a client context gives us)."""

    name: str
    inference_url: str
    management_url: str
    metrics_url: Optional[str] = None
    token_file: Optional[str] = None


def endpoints_for(context_name: Optional[str]) -> Endpoints:
    """The server a context names, resolved by the client's contexts (flags > env > file > local)."""
    from mmsctl.client.contexts import resolve_context

    ctx = resolve_context(context_name)
    return Endpoints(
        name=ctx.name,
        inference_url=ctx.inference_url,
        management_url=ctx.management_url,
        metrics_url=ctx.metrics_url,
        token_file=str(ctx.token_file) if ctx.token_file else None,
    )


def _tokens(token_file: Optional[str]) -> tuple[Optional[str], Optional[str]]:
    """(inference, management) bearer tokens, read the way the client reads them."""
    from mmsctl.client.auth import read_token

    return read_token(token_file, "inference"), read_token(token_file, "management")


def _is_loopback(url: str) -> bool:
    return (urlsplit(url).hostname or "") in _LOOPBACK


class HttpSource:
    """Polls a real server (mmsctl, TorchServe or MMS) through its REST APIs and metrics."""

    def __init__(
        self,
        endpoints: Endpoints,
        *,
        timeout: float = 2.0,
        describe_every: float = 5.0,
        transport: Any = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        import httpx

        self.endpoints = endpoints
        self.title = f"{endpoints.name} ({endpoints.management_url})"
        self.describe_every = describe_every
        self._clock = clock
        self._httpx = httpx
        self._timeout = timeout
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, connect=min(timeout, 1.0)),
            transport=transport,
            limits=httpx.Limits(max_connections=8, max_keepalive_connections=8),
            trust_env=False,
        )
        inference_token, management_token = _tokens(endpoints.token_file)
        self._inference_headers = {"Authorization": f"Bearer {inference_token}"} if inference_token else {}
        self._management_headers = {"Authorization": f"Bearer {management_token}"} if management_token else {}
        self._previous_metrics: Optional[MetricIndex] = None
        self._metrics_retry_at = 0.0
        self._described: dict[str, tuple[float, ModelRow]] = {}
        self._describe_is_list: Optional[bool] = None
        self._cursor = 0
        self._focus: Optional[str] = None
        self._manager: Any = None
        self._local_host = _is_loopback(endpoints.management_url)
        if self._local_host:
            import psutil

            self._psutil = psutil
            psutil.cpu_percent(interval=None)  # prime: the first call has nothing to compare with

    # ------------------------------------------------------------------ HTTP

    async def _get(self, url: str, headers: dict[str, str]) -> Any:
        response = await self._request("GET", url, headers)
        return response

    async def _request(self, method: str, url: str, headers: dict[str, str], params: Any = None) -> Any:
        httpx = self._httpx
        try:
            response = await self._client.request(method, url, headers=headers, params=params)
        except httpx.HTTPError as exc:
            # The same words as every other remote command ("cannot connect to HOST:PORT: connection
            # refused", "cannot resolve …", "… did not answer after 2 s").
            raise error_from_transport(exc, url, self._timeout) from exc
        if response.status_code >= 400:
            raise _api_error(response)
        return response

    async def _json(self, url: str, headers: dict[str, str]) -> Any:
        response = await self._get(url, headers)
        try:
            return response.json()
        except ValueError as exc:
            raise ApiError(f"GET {url}: answer is not JSON", status=response.status_code) from exc

    # ------------------------------------------------------------------ polling

    def set_focus(self, key: Optional[str]) -> None:
        """The model the user is looking at: described on every poll."""
        self._focus = key

    async def _ping(self) -> str:
        data = await self._json(_join(self.endpoints.inference_url, "/ping"), self._inference_headers)
        return str(data.get("status", "unknown")) if isinstance(data, dict) else "unknown"

    async def _list(self) -> list[str]:
        names: list[str] = []
        token: Optional[str] = None
        for _ in range(1000):  # bounded: a server that loops on its token cannot hang us
            url = _join(self.endpoints.management_url, "/models?limit=100")
            if token:
                url += f"&next_page_token={token}"
            data = await self._json(url, self._management_headers)
            page = data.get("models", []) if isinstance(data, dict) else []
            new = [str(m.get("modelName")) for m in page if isinstance(m, dict)]
            names.extend(n for n in new if n not in names)
            token = data.get("nextPageToken") if isinstance(data, dict) else None
            if not token or not new:
                break
        return names

    async def _metrics(self, now: float) -> Optional[MetricIndex]:
        url = self.endpoints.metrics_url
        if not url or now < self._metrics_retry_at:
            return None
        try:
            response = await self._get(_join(url, "/metrics"), self._inference_headers)
            return parse_metrics(response.text, self._clock())
        except (ClientError, ValueError):
            self._metrics_retry_at = now + _METRICS_RETRY_S
            return None

    async def _describe(self, name: str) -> list[ModelRow]:
        data = await self._json(_join(self.endpoints.management_url, f"/models/{name}"), self._management_headers)
        entries = data if isinstance(data, list) else [data]
        self._describe_is_list = isinstance(data, list)
        return [row_from_describe(e) for e in entries if isinstance(e, dict)]

    def _due(self, names: list[str], now: float) -> list[str]:
        """Which models to describe this poll: the focused one, new ones, and a round-robin share."""
        if not names:
            return []
        due = [n for n in names if n not in self._described]
        if self._focus:
            focus = self._focus.split("@", 1)[0]
            if focus in names and focus not in due:
                due.append(focus)
        share = max(1, -(-len(names) // max(1, int(self.describe_every))))
        for _ in range(min(share, len(names))):
            self._cursor %= len(names)
            name = names[self._cursor]
            self._cursor += 1
            if name not in due and now - self._described.get(name, (0.0, None))[0] >= self.describe_every * 0.5:
                due.append(name)
        return due

    async def fetch(self) -> Snapshot:
        started = time.perf_counter()
        now = self._clock()
        status = ServerStatus(url=self.endpoints.management_url)
        try:
            health, names, metrics = await asyncio.gather(self._ping_safe(), self._list(), self._metrics(now))
        except ClientError as exc:
            self._previous_metrics = None
            return Snapshot(now, replace(status, error=str(exc)), self._host(None, "unknown"),
                            poll_ms=_ms(started))
        due = self._due(names, now)
        semaphore = asyncio.Semaphore(8)

        async def describe(name: str) -> None:
            async with semaphore:
                try:
                    rows = await self._describe(name)
                except ApiError as exc:
                    if exc.status == 404:  # unregistered between list and describe
                        self._described.pop(name, None)
                        return
                    raise
                self._described[name] = (now, rows[0] if rows else ModelRow(name))
                for row in rows[1:]:
                    self._described[row.key] = (now, row)

        error: Optional[str] = None
        try:
            await asyncio.gather(*(describe(n) for n in due))
        except ClientError as exc:
            error = str(exc)
        for stale in set(self._described) - set(names):
            if stale.split("@", 1)[0] not in names:
                del self._described[stale]

        kind = detect_kind(metrics, self._describe_is_list)
        loads = load_from_metrics(kind, self._previous_metrics, metrics, names) if metrics else {}
        self._previous_metrics = metrics
        rows = []
        for name in names:
            base = self._described.get(name, (0.0, ModelRow(name)))[1]
            rows.append(merge_row(base, loads.get(name), metrics=metrics is not None))
        status = replace(status, kind=kind, reachable=True, health=health, metrics=metrics is not None, error=error)
        return Snapshot(now, status, self._host(metrics, kind), tuple(rows), poll_ms=_ms(started))

    async def _ping_safe(self) -> str:
        try:
            return await self._ping()
        except ApiError as exc:  # a server that answers but is unhealthy (503) is still up
            if isinstance(exc, AuthenticationFailed):
                raise
            return "Unhealthy"

    def _host(self, metrics: Optional[MetricIndex], kind: Any) -> HostStats:
        host = host_from_metrics(kind, metrics)
        if host is not None:
            return host
        if self._local_host:
            memory = self._psutil.virtual_memory()
            return HostStats(self._psutil.cpu_percent(interval=None), int(memory.total - memory.available),
                             int(memory.total), "local")
        return HostStats()

    # ------------------------------------------------------------------ actions

    # Actions go through the client's ManagementClient (its retries, TorchServe 405 hints and
    # error messages), in a thread so the screen keeps drawing while the server works.

    def _management(self) -> Any:
        if self._manager is None:
            from mmsctl.client.contexts import Context
            from mmsctl.client.management import ManagementClient

            e = self.endpoints
            self._manager = ManagementClient(
                Context(e.name, e.inference_url, e.management_url, e.metrics_url, e.token_file, source="top"),
                timeout=30.0,
            )
        return self._manager

    async def scale(self, model: str, min_workers: int, max_workers: Optional[int] = None,
                    *, version: Optional[str] = None) -> str:
        upper = max(max_workers or min_workers, min_workers)
        result = await asyncio.to_thread(
            lambda: self._management().scale(model, min_workers, upper, version=version))
        self._described.pop(model, None)  # describe it again on the next poll
        return f"{model}: scaling to {min_workers} worker(s) - {result.message}".rstrip(" -")

    async def register(self, url: str, *, model_name: Optional[str] = None, initial_workers: int = 1) -> str:
        result = await asyncio.to_thread(
            lambda: self._management().register(url, model_name=model_name, initial_workers=initial_workers,
                                                synchronous=False))
        return f"register {model_name or url}: {result.message}"

    async def unregister(self, model: str, *, version: Optional[str] = None) -> str:
        result = await asyncio.to_thread(lambda: self._management().unregister(model, version))
        self._described.pop(model, None)
        return f"unregister {model}: {result.message}"

    async def aclose(self) -> None:
        await self._client.aclose()
        if self._manager is not None:
            self._manager.close()


def _join(base: str, path: str) -> str:
    return base.rstrip("/") + path


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 1)


def _api_error(response: Any) -> ClientError:
    """An MMS error body ``{"code", "type", "message"}`` (or whatever came) as an mmsctl error."""
    message, kind = response.reason_phrase or f"HTTP {response.status_code}", ""
    try:
        body = response.json()
        if isinstance(body, dict):
            message = str(body.get("message") or message)
            kind = str(body.get("type") or "")
    except ValueError:
        text = response.text.strip()
        if text:
            message = text.splitlines()[0][:200]
    if kind == "InvalidKeyException" or response.status_code == 401:
        return AuthenticationFailed(f"{message} ({response.request.url.netloc.decode()})",
                                    hint="set the context's token file (mmsctl context add --token-file)")
    return ApiError(f"{message} (HTTP {response.status_code})", status=response.status_code, type=kind)
