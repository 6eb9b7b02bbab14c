"""`mmsctl top` on a fleet: one data source per member, polled through the client's async fan-out.

Each member has its own source (an :class:`~mmsctl.tui.source.HttpSource` for a real
server), so its rates come from its own two scrapes and one slow member never
delays the others: every ``fetch`` starts a poll of each member that is not still
polling, waits for them at most ``patience`` seconds, and combines the latest
answer of every member (:mod:`mmsctl.tui.fleet`). A member still polling shows its
previous answer; one that fails, or takes longer than ``deadline`` seconds in all,
shows as down with the reason, and the rest of the view goes on.

All polls share one bound: at most ``fanout_concurrency`` members at once (the
setting of :mod:`mmsctl.client.fanout`), each call through
:func:`~mmsctl.client.fanout.async_fan_out` - the CLI's fan-out core, on asyncio.
Actions (scale, register, unregister) run on every member that has the model
through the same fan-out; a member that fails makes the action fail with
:class:`~mmsctl.client.fanout.MembersFailed`, naming it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable, Mapping, Optional, Sequence

from mmsctl.client.fanout import Member, async_fan_out, pool_size
from mmsctl.tui.fleet import fleet_snapshot, member_status
from mmsctl.tui.snapshot import ServerStatus, Snapshot
from mmsctl.tui.source import DataSource, HttpSource

__all__ = ["FleetSource", "member_deadline"]


#: A fleet describes each member's models this many times less often (at most) than one server's.
_DESCRIBE_SPREAD = 8


def member_deadline(timeout: float) -> float:
    """The longest one member's whole poll may take: a few requests' worth, at least 10 s."""
    return max(10.0, 4 * timeout + 2)


class _Slot:
    """One member: its source, the poll in flight, and what it last said."""

    def __init__(self, member: Member, source: DataSource) -> None:
        self.member = member
        self.source = source
        self.task: Optional["asyncio.Task[None]"] = None
        self.latest: Optional[Snapshot] = None
        self.last_error: Optional[str] = None
        self.last_error_at: Optional[float] = None

    def has_model(self, name: str) -> bool:
        return self.latest is not None and any(r.name == name for r in self.latest.models)


class FleetSource:
    """A :class:`~mmsctl.tui.source.FleetDataSource` over one data source per member."""

    def __init__(
        self,
        name: str,
        members: Sequence[tuple[Member, DataSource]],
        *,
        deadline: float = 10.0,
        patience: Optional[float] = None,
        concurrency: Optional[int] = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name = name
        self.title = f"{name} (fleet, {len(members)} member{'s' if len(members) != 1 else ''})"
        self.deadline = deadline
        self.patience = patience
        self._slots = [_Slot(m, s) for m, s in members]
        self._members = [m for m, _ in members]
        self._concurrency = pool_size(self._members, concurrency)
        self._limit: Optional[asyncio.Semaphore] = None  # made in the running loop (Python 3.9)
        self._clock = clock

    @classmethod
    def over_http(cls, name: str, members: Sequence[Member], *, token_file: Optional[str] = None,
                  timeout: float = 2.0, describe_every: float = 5.0, patience: Optional[float] = None,
                  transport: Any = None) -> "FleetSource":
        """Every member polled by its own :class:`HttpSource` (the fleet context's token file for each).

        A member whose metrics count each model's workers (mmsctl) has its models described
        round-robin every ``describe_every`` times twice the number of members (at most 8 times) -
        a model is described at once when it is on screen, new, just scaled, or when its worker
        count changed - and every member's ``/ping`` is asked every ``describe_every`` seconds (the
        model list and metrics answer every poll): a fleet of a few members costs about what one
        server does. A member without such metrics (MMS) is described as one server is.
        """
        spread = min(2 * max(1, len(members)), _DESCRIBE_SPREAD)
        sources: list[tuple[Member, DataSource]] = [
            (m, HttpSource(m.context(token_file), timeout=timeout, describe_every=describe_every,
                           describe_spread=spread, health_every=describe_every, transport=transport))
            for m in members
        ]
        return cls(name, sources, deadline=member_deadline(timeout), patience=patience)

    @property
    def members(self) -> list[Member]:
        return list(self._members)

    def set_focus(self, key: Optional[str]) -> None:
        for slot in self._slots:
            slot.source.set_focus(key)

    # ------------------------------------------------------------------ polling

    async def fetch(self) -> Snapshot:
        started = time.perf_counter()
        if self._limit is None:
            self._limit = asyncio.Semaphore(self._concurrency)
        for slot in self._slots:
            if slot.task is None or slot.task.done():
                slot.task = asyncio.create_task(self._poll(slot))
        pending = {s.task for s in self._slots if s.task is not None and not s.task.done()}
        if pending:
            await asyncio.wait(pending, timeout=self.patience)
        statuses = [
            (member_status(s.member.name, s.member.management_url, s.latest, last_error=s.last_error,
                           last_error_at=s.last_error_at), s.latest)
            for s in self._slots
        ]
        return fleet_snapshot(self.name, self._clock(), statuses, poll_ms=round((time.perf_counter() - started) * 1e3, 1))

    async def _poll(self, slot: _Slot) -> None:
        """One poll of one member, under the shared bound and the deadline; never raises."""
        try:
            answers = await async_fan_out([slot.member], lambda _m: slot.source.fetch(), timeout=self.deadline,
                                          limit=self._limit)
            result = answers.results[0]
            error = result.error.message if result.error is not None else None
        except Exception as exc:  # noqa: BLE001 - a source's bug shows on its member, the view goes on
            result, error = None, f"{type(exc).__name__}: {exc}"
        if result is not None and result.value is not None:
            snapshot = result.value
        else:
            snapshot = Snapshot(self._clock(), ServerStatus(slot.member.management_url, error=error))
        slot.latest = snapshot
        if snapshot.server.error:
            slot.last_error, slot.last_error_at = snapshot.server.error, snapshot.taken_at

    # ------------------------------------------------------------------ actions

    async def _each(self, what: str, slots: Sequence[_Slot], call: Callable[[_Slot], Awaitable[str]]) -> str:
        """*call* on each slot's source through the fan-out; raises MembersFailed naming the failures."""
        by_name = {s.member.name: s for s in slots}
        answers = await async_fan_out([s.member for s in slots], lambda m: call(by_name[m.name]),
                                      concurrency=self._concurrency)
        answers.check(what)
        return f"{what}: done on {len(slots)} member{'s' if len(slots) != 1 else ''}"

    def _holding(self, model: str) -> list[_Slot]:
        """The members that listed *model* last time (all of them when none did)."""
        return [s for s in self._slots if s.has_model(model)] or list(self._slots)

    async def scale_members(self, model: str, targets: Mapping[str, tuple[int, int]],
                            *, version: Optional[str] = None) -> str:
        slots = [s for s in self._slots if s.member.name in targets]

        async def one(slot: _Slot) -> str:
            low, high = targets[slot.member.name]
            return await slot.source.scale(model, low, high, version=version)

        return await self._each(f"scale {model}", slots, one)

    async def scale(self, model: str, min_workers: int, max_workers: Optional[int] = None,
                    *, version: Optional[str] = None) -> str:
        """Every member that has *model* to the same numbers."""
        upper = max(max_workers or min_workers, min_workers)
        return await self.scale_members(model, {s.member.name: (min_workers, upper) for s in self._holding(model)},
                                        version=version)

    async def register(self, url: str, *, model_name: Optional[str] = None, initial_workers: int = 1) -> str:
        return await self._each(f"register {model_name or url}", self._slots,
                                lambda s: s.source.register(url, model_name=model_name,
                                                            initial_workers=initial_workers))

    async def unregister(self, model: str, *, version: Optional[str] = None) -> str:
        return await self._each(f"unregister {model}", self._holding(model),
                                lambda s: s.source.unregister(model, version=version))

    async def aclose(self) -> None:
        tasks = [s.task for s in self._slots if s.task is not None and not s.task.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(*(s.source.aclose() for s in self._slots), return_exceptions=True)
