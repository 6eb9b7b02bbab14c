"""Fan-out management: one call on every member of a fleet at once, one result per member.

A fleet context names its members (``contexts.toml``: ``members = [...]``, or
``fleet = "NAME"`` whose members the CLI finds in the Auto Scaling group). Each
member is a server with its own management and inference URL; the calls are the
ordinary :class:`ManagementClient` / :class:`InferenceClient` ones, run at most
``fanout_concurrency`` at a time (``MMSCTL_FANOUT_CONCURRENCY``, default 16, at
most 256): in a thread pool (:func:`fan_out`, the CLI) or as asyncio tasks
(:func:`async_fan_out`, ``mmsctl top``). Both share one core: the bound, one
:class:`MemberResult` per member in member order, an :class:`MmsError` as that
member's failure and anything else raised as the bug it is.

A member spec is its management URL (``http://10.0.0.5:8081``; no port means
8081) with the inference and metrics APIs assumed on the same host at the
standard ports 8080 and 8082, or the URLs as ``INFERENCE=MANAGEMENT[=METRICS]``
(``http://10.0.0.5:9080=http://10.0.0.5:9081``; no metrics URL there means none).

Every member answers or fails on its own; :meth:`FanOut.check` then raises
:class:`MembersFailed` (exit 4) naming the members that failed.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Generic, Iterable, Optional, Sequence, TypeVar
from urllib.parse import urlsplit

from mmsctl.client.contexts import Context, validate_url
from mmsctl.client.inference import InferenceClient, PingResult
from mmsctl.client.management import ManagementClient, ModelDetail, ModelSummary, OperationResult, ScaleResult
from mmsctl.errors import ApiError, ConfigError, MmsError, PartialFailure, UsageError

if TYPE_CHECKING:  # pragma: no cover
    import asyncio

__all__ = [
    "DEFAULT_CONCURRENCY",
    "MAX_CONCURRENCY",
    "MAX_MEMBERS",
    "FanOut",
    "FleetClient",
    "Member",
    "MemberResult",
    "MembersFailed",
    "async_fan_out",
    "concurrency_limit",
    "fan_out",
    "failure_message",
    "member_from_address",
    "parse_member",
    "pool_size",
    "parse_members",
]

DEFAULT_CONCURRENCY = 16
MAX_CONCURRENCY = 256
MAX_MEMBERS = 1000
INFERENCE_PORT = 8080
MANAGEMENT_PORT = 8081
METRICS_PORT = 8082

T = TypeVar("T")


@dataclass(frozen=True)
class Member:
    """One server of a fleet: a label for tables, and where its two APIs are."""

    name: str
    management_url: str
    inference_url: str
    metrics_url: Optional[str] = None

    def context(self, token_file: Optional[str] = None) -> Context:
        """The member as a one-server context (the fleet context's token file applies to each)."""
        return Context(self.name, self.inference_url, self.management_url, self.metrics_url,
                       token_file=token_file, source="fleet")

    def to_dict(self) -> dict[str, Optional[str]]:
        return {"member": self.name, "managementUrl": self.management_url, "inferenceUrl": self.inference_url,
                "metricsUrl": self.metrics_url}


def _host_url(scheme: str, host: str, port: int) -> str:
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


def parse_member(spec: str) -> Member:
    """A member from ``MANAGEMENT_URL`` or ``INFERENCE_URL=MANAGEMENT_URL[=METRICS_URL]``.

    Raises:
        UsageError: not an http(s) URL, more than three URLs, or a management URL with a
            path (its other URLs cannot be guessed: give them).
    """
    text = spec.strip()
    if not text:
        raise UsageError("empty fleet member", hint="members are URLs separated by commas")
    urls = text.split("=")
    metrics_url: Optional[str] = None
    if len(urls) > 3:
        raise UsageError(f"member {text!r} has {len(urls)} URLs; give INFERENCE=MANAGEMENT[=METRICS]")
    if len(urls) > 1:
        inference_url = validate_url(urls[0], "member inference")
        management_url = validate_url(urls[1], "member management")
        if len(urls) == 3:
            metrics_url = validate_url(urls[2], "member metrics")
    else:
        management_url = validate_url(text, "member")
        parts = urlsplit(management_url)
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise UsageError(f"member {text!r} has a path; give both URLs as INFERENCE=MANAGEMENT")
        host = parts.hostname or ""
        management_url = _host_url(parts.scheme, host, parts.port or MANAGEMENT_PORT)
        inference_url = _host_url(parts.scheme, host, INFERENCE_PORT)
        metrics_url = _host_url(parts.scheme, host, METRICS_PORT)
    name = urlsplit(management_url).netloc + urlsplit(management_url).path
    return Member(name, management_url, inference_url, metrics_url)


def parse_members(specs: Iterable[str]) -> list[Member]:
    """Members from specs (each may hold several, comma-separated); repeats dropped, order kept.

    Raises:
        UsageError: no members, a bad one, or more than :data:`MAX_MEMBERS`.
    """
    members: dict[str, Member] = {}
    for spec in specs:
        for item in spec.split(","):
            if item.strip():
                member = parse_member(item)
                members.setdefault(member.management_url, member)
    if not members:
        raise UsageError("a fleet needs at least one member URL")
    if len(members) > MAX_MEMBERS:
        raise UsageError(f"{len(members)} members; a fleet context holds at most {MAX_MEMBERS}")
    return list(members.values())


def member_from_address(name: str, address: str, *, scheme: str = "http") -> Member:
    """A fleet instance reached at *address* (a private IP) on the standard ports."""
    return Member(name, _host_url(scheme, address, MANAGEMENT_PORT), _host_url(scheme, address, INFERENCE_PORT),
                  _host_url(scheme, address, METRICS_PORT))


def concurrency_limit() -> int:
    """How many members are called at once: the ``fanout_concurrency`` setting (1 to 256, default 16)."""
    from mmsctl.config import setting

    raw = setting("fanout_concurrency", str(DEFAULT_CONCURRENCY)) or str(DEFAULT_CONCURRENCY)
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"fanout_concurrency must be a whole number, not {raw!r}",
                          hint="set MMSCTL_FANOUT_CONCURRENCY or fanout_concurrency in config.toml") from None
    if not 1 <= value <= MAX_CONCURRENCY:
        raise ConfigError(f"fanout_concurrency must be 1 to {MAX_CONCURRENCY}, not {value}")
    return value


@dataclass
class MemberResult(Generic[T]):
    """What one member answered (*value*) or why it failed (*error*); a ping can have both."""

    member: Member
    value: Optional[T] = None
    error: Optional[MmsError] = None

    @property
    def ok(self) -> bool:
        return self.error is None


class MembersFailed(PartialFailure):
    """Some members of a fleet failed (exit 4). When every member failed for the same kind of
    reason, the exit code is that reason's (5 unreachable, 6 auth, 7 timeout, 8 server error)."""

    reference = "fleet-members-failed"

    def __init__(self, message: str, *, failed: list[str], exit_code: Optional[int] = None,
                 hint: Optional[str] = None) -> None:
        super().__init__(message, hint=hint)
        self.failed = failed
        if exit_code is not None:
            self.exit_code = exit_code


def _short(text: str, width: int = 100) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def failure_message(what: str, failed: Sequence[tuple[str, str]], total: int) -> str:
    """"WHAT failed on 1 of 3 members: NAME (REASON), …" - the one wording of a partial failure."""
    reasons = ", ".join(f"{name} ({_short(reason)})" for name, reason in failed)
    if len(failed) == total:
        return f"{what} failed on {'the only member' if total == 1 else f'all {total} members'}: {reasons}"
    return f"{what} failed on {len(failed)} of {total} members: {reasons}"


@dataclass
class FanOut(Generic[T]):
    """Every member's result, in member order."""

    results: list[MemberResult[T]] = field(default_factory=list)

    @property
    def failed(self) -> list[MemberResult[T]]:
        return [r for r in self.results if not r.ok]

    def check(self, what: str) -> None:
        """Raise :class:`MembersFailed` naming each failed member and why; nothing when all succeeded."""
        failed = self.failed
        if not failed:
            return
        codes = {r.error.exit_code for r in failed if r.error is not None}
        total = len(self.results)
        code = codes.pop() if len(failed) == total and len(codes) == 1 else None
        message = failure_message(what, [(r.member.name, r.error.message if r.error else "") for r in failed], total)
        raise MembersFailed(message, failed=[r.member.name for r in failed], exit_code=code)


# --------------------------------------------------------------------------- the core, two ways to run it


def pool_size(members: Sequence[Member], concurrency: Optional[int] = None) -> int:
    """How many of *members* are called at once: the bound (the ``fanout_concurrency`` setting unless
    given), never more than there are."""
    limit = concurrency if concurrency is not None else concurrency_limit()
    return max(1, min(limit, len(members)))


def fan_out(members: Sequence[Member], call: Callable[[Member], T], *,
            concurrency: Optional[int] = None) -> FanOut[T]:
    """Run *call* on every member in a thread pool, at most *concurrency* at a time; an
    :class:`MmsError` is that member's failure, anything else (a bug) is raised."""
    def one(member: Member) -> MemberResult[T]:
        try:
            return MemberResult(member, call(member))
        except MmsError as exc:
            return MemberResult(member, error=exc)

    if not members:
        return FanOut([])
    with ThreadPoolExecutor(max_workers=pool_size(members, concurrency), thread_name_prefix="fanout") as pool:
        return FanOut(list(pool.map(one, members)))


async def async_fan_out(members: Sequence[Member], call: Callable[[Member], Awaitable[T]], *,
                        concurrency: Optional[int] = None, timeout: Optional[float] = None,
                        limit: Optional["asyncio.Semaphore"] = None) -> FanOut[T]:
    """:func:`fan_out` for asyncio programs: *call* on every member as tasks, at most *concurrency*
    at a time; *timeout* bounds each member's whole call (then it fails with :class:`RequestTimeout`).

    *limit* replaces the bound with a semaphore the caller shares between fan-outs (``mmsctl top``
    polls each member on its own schedule, all under one bound).
    """
    import asyncio

    from mmsctl.errors import RequestTimeout

    semaphore = limit if limit is not None else asyncio.Semaphore(pool_size(members, concurrency))

    async def one(member: Member) -> MemberResult[T]:
        async with semaphore:
            try:
                return MemberResult(member, await asyncio.wait_for(call(member), timeout))
            except asyncio.TimeoutError:
                return MemberResult(member, error=RequestTimeout(f"{member.name} did not answer in {timeout:g} s"))
            except MmsError as exc:
                return MemberResult(member, error=exc)

    return FanOut(list(await asyncio.gather(*(one(m) for m in members))))


class FleetClient:
    """The management and inference calls of :mod:`mmsctl.client`, on every member at once.

    Example::

        fleet = FleetClient(parse_members(["http://10.0.0.5:8081,http://10.0.0.6:8081"]))
        answers = fleet.list_models()
        answers.check("models list")     # MembersFailed names the members that failed
    """

    def __init__(self, members: list[Member], *, token_file: Optional[str] = None, timeout: float = 30.0,
                 concurrency: Optional[int] = None) -> None:
        self.members = members
        self.token_file = token_file
        self.timeout = timeout
        self.concurrency = concurrency if concurrency is not None else concurrency_limit()

    def management(self, call: Callable[[ManagementClient], T], *, timeout: Optional[float] = None) -> FanOut[T]:
        """*call* with each member's management client."""
        def one(member: Member) -> T:
            with ManagementClient(member.context(self.token_file), timeout=timeout or self.timeout) as client:
                return call(client)

        return fan_out(self.members, one, concurrency=self.concurrency)

    def inference(self, call: Callable[[InferenceClient], T], *, timeout: Optional[float] = None) -> FanOut[T]:
        """*call* with each member's inference client."""
        def one(member: Member) -> T:
            with InferenceClient(member.context(self.token_file), timeout=timeout or self.timeout) as client:
                return call(client)

        return fan_out(self.members, one, concurrency=self.concurrency)

    def list_models(self, *, limit: int = 100) -> FanOut[list[ModelSummary]]:
        return self.management(lambda c: c.list_models(limit=limit))

    def describe(self, model: str, version: Optional[str] = None) -> FanOut[list[ModelDetail]]:
        return self.management(lambda c: c.describe_all(model, version))

    def register(self, url: str, *, timeout: Optional[float] = None, **options: Any) -> FanOut[OperationResult]:
        return self.management(lambda c: c.register(url, timeout=timeout, **options), timeout=timeout)

    def unregister(self, model: str, version: Optional[str] = None, *,
                   timeout: Optional[float] = None) -> FanOut[OperationResult]:
        return self.management(lambda c: c.unregister(model, version), timeout=timeout)

    def scale(self, model: str, min_workers: int, max_workers: Optional[int] = None, *,
              version: Optional[str] = None, wait: bool = False, timeout: Optional[float] = None) -> FanOut[ScaleResult]:
        return self.management(lambda c: c.scale(model, min_workers, max_workers, version=version, wait=wait,
                                                 timeout=timeout), timeout=min(timeout or self.timeout, 30.0))

    def ping(self) -> FanOut[PingResult]:
        """Each member's ``/ping``; a member that is unreachable or not healthy counts as failed."""
        answers = self.inference(lambda c: c.ping())
        for result in answers.results:
            ping = result.value
            if ping is not None and not ping.healthy and result.error is None:
                result.error = ping.error or ApiError(f"not healthy: {ping.status}")
        return answers
