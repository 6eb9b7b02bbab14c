"""Where `mmsctl top` gets its data: a :class:`DataSource`, and the real one that polls a server.

The app only knows the :class:`DataSource` protocol (``fetch`` a :class:`Snapshot`,
``scale``/``register``/``unregister``), so tests inject a scripted source and the
snapshot tests need no server. :class:`HttpSource` polls one server context through
the client's async face (``AsyncInferenceClient``, ``AsyncManagementClient``,
``AsyncMetricsClient``: the same requests, tokens, URL encoding and errors as every other
remote command) with short timeouts and no retries (the next poll is the retry):

* every poll: ``/ping``, the model list (following pages) and ``/metrics`` (``/ping`` only
  every ``health_every`` seconds where that is set - a fleet's members - and after a failure);
* describe: the model on screen every poll, one whose worker count in the metrics
  changed since the last poll at once, the others round-robin so each is described
  every ``describe_every`` seconds (50 models do not cost 50 requests a second;
  ``describe_spread`` times that where the metrics count workers - a fleet's members);
* no metrics endpoint (real MMS): tried again every 30 s; meanwhile the numbers
  only metrics give are ``None`` (unavailable), never 0.

It never raises from ``fetch``: a dead server is a snapshot with ``reachable=False``
and the reason, so the screen keeps its last data and reconnects by itself.

A fleet is a :class:`FleetDataSource` (:mod:`mmsctl.tui.fleet_source`: one
``HttpSource`` per member), whose actions can also scale each member its own way.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any, Callable, Iterable, Mapping, Optional, Protocol, runtime_checkable
from urllib.parse import urlsplit

from mmsctl.client._errors import RemoteModelNotFound
from mmsctl.client.contexts import Context
from mmsctl.client.inference import AsyncInferenceClient
from mmsctl.client.management import AsyncManagementClient
from mmsctl.client.metrics import AsyncMetricsClient
from mmsctl.errors import ApiError, AuthenticationFailed, ClientError, MmsError
from mmsctl.tui.snapshot import HostStats, ModelRow, ServerKind, ServerStatus, Snapshot
from mmsctl.tui.readings import (
    MetricIndex,
    detect_kind,
    host_from_metrics,
    load_from_metrics,
    merge_row,
    row_from_describe,
)

__all__ = ["DataSource", "FleetDataSource", "HttpSource"]

_LOOPBACK = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}
_METRICS_RETRY_S = 30.0
#: Describes in flight at once.
_DESCRIBE_CONCURRENCY = 8
#: Actions (scale, register, unregister) may take longer than a poll.
_ACTION_TIMEOUT_S = 30.0


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


@runtime_checkable
class FleetDataSource(DataSource, Protocol):
    """A source over a fleet: its snapshots carry ``members``; actions apply to every member."""

    async def scale_members(self, model: str, targets: Mapping[str, tuple[int, int]],
                            *, version: Optional[str] = None) -> str:
        """Scale *model* on each named member to its own ``(min_workers, max_workers)``."""
        ...


def _is_loopback(url: str) -> bool:
    return (urlsplit(url).hostname or "") in _LOOPBACK


class _DescribeSchedule:
    """Which models to describe on a poll, and the last description of each."""

    def __init__(self, every: float) -> None:
        self.every = every
        self.rows: dict[str, tuple[float, ModelRow]] = {}  # key (name or name@version) -> (when, row)
        self.focus: Optional[str] = None
        self._cursor = 0

    def due(self, names: list[str], now: float, changed: Iterable[str] = ()) -> list[str]:
        """The focused model, new and *changed* ones, and a round-robin share of the rest."""
        if not names:
            return []
        due = [n for n in names if n not in self.rows]
        due += [n for n in changed if n in names and n not in due]
        if self.focus:
            focus = self.focus.split("@", 1)[0]
            if focus in names and focus not in due:
                due.append(focus)
        share = max(1, -(-len(names) // max(1, int(self.every))))
        for _ in range(min(share, len(names))):
            self._cursor %= len(names)
            name = names[self._cursor]
            self._cursor += 1
            if name not in due and now - self.rows.get(name, (0.0, None))[0] >= self.every * 0.5:
                due.append(name)
        return due

    def store(self, name: str, rows: list[ModelRow], now: float) -> None:
        """One describe: the first row under the model's name, other versions under name@version."""
        self.rows[name] = (now, rows[0] if rows else ModelRow(name))
        for row in rows[1:]:
            self.rows[row.key] = (now, row)

    def forget(self, name: str) -> None:
        self.rows.pop(name, None)

    def keep_only(self, names: list[str]) -> None:
        for stale in set(self.rows) - set(names):
            if stale.split("@", 1)[0] not in names:
                del self.rows[stale]

    def row(self, name: str) -> ModelRow:
        return self.rows.get(name, (0.0, ModelRow(name)))[1]


class HttpSource:
    """Polls a real server (mmsctl, TorchServe or MMS) through the client's async face."""

    def __init__(
        self,
        context: Context,
        *,
        timeout: float = 2.0,
        describe_every: float = 5.0,
        describe_spread: float = 1.0,
        health_every: float = 0.0,
        transport: Any = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.context = context
        self.title = f"{context.name} ({context.management_url})"
        self._clock = clock
        self._transport = transport
        polling = {"timeout": timeout, "retries": 0, "transport": transport}
        self._inference = AsyncInferenceClient(context, **polling)
        self._management = AsyncManagementClient(context, **polling)
        self._metrics = AsyncMetricsClient(context, **polling) if context.metrics_url else None
        self._actions: Optional[AsyncManagementClient] = None
        self._schedule = _DescribeSchedule(describe_every)
        self._describe_every, self._describe_spread = describe_every, describe_spread
        self._health_every = health_every
        self._worker_totals: dict[str, int] = {}  # workers per model in the last metrics
        self._last_health: Optional[tuple[float, str]] = None  # (when, the /ping word)
        self._previous_metrics: Optional[MetricIndex] = None
        self._metrics_retry_at = 0.0
        self._describe_is_list: Optional[bool] = None
        self._local_host = _is_loopback(context.management_url)
        if self._local_host:
            import psutil

            self._psutil = psutil
            psutil.cpu_percent(interval=None)  # prime: the first call has nothing to compare with

    def set_focus(self, key: Optional[str]) -> None:
        """The model the user is looking at: described on every poll."""
        self._schedule.focus = key

    # ------------------------------------------------------------------ one poll

    async def fetch(self) -> Snapshot:
        started = time.perf_counter()
        now = self._clock()
        status = ServerStatus(url=self.context.management_url)
        try:
            health, names, metrics = await asyncio.gather(self._health(), self._names(), self._scrape(now))
        except MmsError as exc:
            self._previous_metrics = None
            self._last_health = None
            return Snapshot(now, replace(status, error=str(exc)), self._host(None, "unknown"), poll_ms=_ms(started))
        loads = load_from_metrics(detect_kind(metrics), self._previous_metrics, metrics, names) if metrics else {}
        totals = {n: load.workers_total for n, load in loads.items() if load.workers_total is not None}
        changed = [n for n, total in totals.items() if self._worker_totals.get(n, total) != total]
        self._worker_totals = totals
        # Where the metrics count each model's workers, a change is described at once: the
        # round-robin may then be slower (``describe_spread``), as on a fleet's members.
        self._schedule.every = self._describe_every * (self._describe_spread if totals else 1.0)
        error = await self._describe_due(names, now, changed)
        kind = detect_kind(metrics, self._describe_is_list)
        self._previous_metrics = metrics
        rows = tuple(merge_row(self._schedule.row(n), loads.get(n), metrics=metrics is not None) for n in names)
        status = replace(status, kind=kind, reachable=True, health=health, metrics=metrics is not None, error=error)
        return Snapshot(now, status, self._host(metrics, kind), rows, poll_ms=_ms(started))

    async def _health(self) -> str:
        """The server's /ping word; a server that answers but is unhealthy (503) is still up."""
        now = self._clock()
        if self._last_health is not None and now - self._last_health[0] < self._health_every:
            return self._last_health[1]
        word = await self._ping()
        self._last_health = (now, word)
        return word

    async def _ping(self) -> str:
        result = await self._inference.ping(detect=False)
        if result.error is None:
            return result.status
        if isinstance(result.error, ApiError) and not isinstance(result.error, AuthenticationFailed):
            return "Unhealthy"
        raise result.error

    async def _names(self) -> list[str]:
        names: list[str] = []
        for model in await self._management.list_models():
            if model.name not in names:
                names.append(model.name)
        return names

    async def _scrape(self, now: float) -> Optional[MetricIndex]:
        if self._metrics is None or now < self._metrics_retry_at:
            return None
        try:
            return MetricIndex.from_scrape(await self._metrics.scrape(), self._clock())
        except ClientError:
            self._metrics_retry_at = now + _METRICS_RETRY_S
            return None

    async def _describe_due(self, names: list[str], now: float, changed: Iterable[str] = ()) -> Optional[str]:
        """Describe the models due this poll; the error that stopped it, if any."""
        semaphore = asyncio.Semaphore(_DESCRIBE_CONCURRENCY)

        async def describe(name: str) -> None:
            async with semaphore:
                try:
                    details = await self._management.describe_all(name)
                except RemoteModelNotFound:  # unregistered between list and describe
                    self._schedule.forget(name)
                    return
            self._describe_is_list = details[0].listed
            self._schedule.store(name, [row_from_describe(d.raw) for d in details], now)

        try:
            await asyncio.gather(*(describe(n) for n in self._schedule.due(names, now, changed)))
        except MmsError as exc:
            return str(exc)
        finally:
            self._schedule.keep_only(names)
        return None

    def _host(self, metrics: Optional[MetricIndex], kind: ServerKind) -> HostStats:
        host = host_from_metrics(kind, metrics)
        if host is not None:
            return host
        if self._local_host:
            memory = self._psutil.virtual_memory()
            return HostStats(self._psutil.cpu_percent(interval=None), int(memory.total - memory.available),
                             int(memory.total), "local")
        return HostStats()

    # ------------------------------------------------------------------ actions

    # Actions get their own client: a longer timeout, and the client's safe retries.

    def _manager(self) -> AsyncManagementClient:
        if self._actions is None:
            self._actions = AsyncManagementClient(self.context, timeout=_ACTION_TIMEOUT_S, transport=self._transport)
        return self._actions

    async def scale(self, model: str, min_workers: int, max_workers: Optional[int] = None,
                    *, version: Optional[str] = None) -> str:
        upper = max(max_workers or min_workers, min_workers)
        result = await self._manager().scale(model, min_workers, upper, version=version)
        self._schedule.forget(model)  # describe it again on the next poll
        return f"{model}: scaling to {min_workers} worker(s) - {result.message}".rstrip(" -")

    async def register(self, url: str, *, model_name: Optional[str] = None, initial_workers: int = 1) -> str:
        result = await self._manager().register(url, model_name=model_name, initial_workers=initial_workers,
                                                synchronous=False)
        return f"register {model_name or url}: {result.message}"

    async def unregister(self, model: str, *, version: Optional[str] = None) -> str:
        result = await self._manager().unregister(model, version)
        self._schedule.forget(model)
        return f"unregister {model}: {result.message}"

    async def aclose(self) -> None:
        clients: list[Any] = [self._inference, self._management, self._metrics, self._actions]
        await asyncio.gather(*(c.aclose() for c in clients if c is not None))


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 1)
