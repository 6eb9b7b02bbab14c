"""Fan-out management: one call on every member of a fleet at once, one result per member.

A fleet context names its members (``contexts.toml``: ``members = [...]``, or
``fleet = "NAME"`` whose members the CLI finds in the Auto Scaling group). Each
member is a server with its own management and inference URL; the calls are the
ordinary :class:`ManagementClient` / :class:`InferenceClient` ones, run in a
thread pool bounded by the ``fanout_concurrency`` setting
(``MMSCTL_FANOUT_CONCURRENCY``, default 16, at most 256).

A member spec is its management URL (``http://10.0.0.5:8081``; no port means
8081) with the inference API assumed on the same host at 8080, or both URLs as
``INFERENCE=MANAGEMENT`` (``http://10.0.0.5:9080=http://10.0.0.5:9081``).

Every member answers or fails on its own; :meth:`FanOut.check` then raises
:class:`MembersFailed` (exit 4) naming the members that failed.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Iterable, Optional, TypeVar
from urllib.parse import urlsplit

from mmsctl.client.contexts import Context, validate_url
from mmsctl.client.inference import InferenceClient, PingResult
from mmsctl.client.management import ManagementClient, ModelDetail, ModelSummary, OperationResult, ScaleResult
from mmsctl.errors import ApiError, ConfigError, MmsError, PartialFailure, UsageError

__all__ = [
    "DEFAULT_CONCURRENCY",
    "MAX_CONCURRENCY",
    "MAX_MEMBERS",
    "FanOut",
    "FleetClient",
    "Member",
    "MemberResult",
    "MembersFailed",
    "concurrency_limit",
    "fan_out",
    "member_from_address",
    "parse_member",
    "parse_members",
]

DEFAULT_CONCURRENCY = 16
MAX_CONCURRENCY = 256
MAX_MEMBERS = 1000
INFERENCE_PORT = 8080
MANAGEMENT_PORT = 8081

T = TypeVar("T")


@dataclass(frozen=True)
class Member:
    """One server of a fleet: a label for tables, and where its two APIs are."""

    name: str
    management_url: str
    inference_url: str

    def context(self, token_file: Optional[str] = None) -> Context:
        """The member as a one-server context (the fleet context's token file applies to each)."""
        return Context(self.name, self.inference_url, self.management_url, token_file=token_file, source="fleet")

    def to_dict(self) -> dict[str, str]:
        return {"member": self.name, "managementUrl": self.management_url, "inferenceUrl": self.inference_url}


def _host_url(scheme: str, host: str, port: int) -> str:
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


def parse_member(spec: str) -> Member:
    """A member from ``MANAGEMENT_URL`` or ``INFERENCE_URL=MANAGEMENT_URL``.

    Raises:
        UsageError: not an http(s) URL, or a management URL with a path (its inference
            URL cannot be guessed: give both).
    """
    text = spec.strip()
    if not text:
        raise UsageError("empty fleet member", hint="members are URLs separated by commas")
    inference, sep, management = text.partition("=")
    if sep:
        inference_url = validate_url(inference, "member inference")
        management_url = validate_url(management, "member management")
    else:
        management_url = validate_url(text, "member")
        parts = urlsplit(management_url)
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise UsageError(f"member {text!r} has a path; give both URLs as INFERENCE=MANAGEMENT")
        host = parts.hostname or ""
        management_url = _host_url(parts.scheme, host, parts.port or MANAGEMENT_PORT)
        inference_url = _host_url(parts.scheme, host, INFERENCE_PORT)
    return Member(urlsplit(management_url).netloc + urlsplit(management_url).path, management_url, inference_url)


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
    return Member(name, _host_url(scheme, address, MANAGEMENT_PORT), _host_url(scheme, address, INFERENCE_PORT))


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
        reasons = ", ".join(f"{r.member.name} ({_short(r.error.message if r.error else '')})" for r in failed)
        codes = {r.error.exit_code for r in failed if r.error is not None}
        total = len(self.results)
        if len(failed) == total:
            code = codes.pop() if len(codes) == 1 else None
            message = f"{what} failed on {'the only member' if total == 1 else f'all {total} members'}: {reasons}"
        else:
            code = None
            message = f"{what} failed on {len(failed)} of {total} members: {reasons}"
        raise MembersFailed(message, failed=[r.member.name for r in failed], exit_code=code)


def fan_out(members: list[Member], call: Callable[[Member], T], *,
            concurrency: Optional[int] = None) -> FanOut[T]:
    """Run *call* on every member, at most *concurrency* at a time; an :class:`MmsError` is that
    member's failure, anything else (a bug) is raised."""
    limit = concurrency if concurrency is not None else concurrency_limit()

    def one(member: Member) -> MemberResult[T]:
        try:
            return MemberResult(member, call(member))
        except MmsError as exc:
            return MemberResult(member, error=exc)

    if not members:
        return FanOut([])
    with ThreadPoolExecutor(max_workers=max(1, min(limit, len(members))), thread_name_prefix="fanout") as pool:
        return FanOut(list(pool.map(one, members)))


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
