"""The fan-out core: member specs, the concurrency setting and its bound, and failure reporting.

The end-to-end fan-out against real servers (mmsctl and MMS 1.1.11, one member down)
is tests/cli/test_fanout_cli.py.
"""

from __future__ import annotations

import threading

import pytest

from mmsctl.client.fanout import (
    MAX_MEMBERS,
    FanOut,
    Member,
    MemberResult,
    MembersFailed,
    async_fan_out,
    concurrency_limit,
    fan_out,
    member_from_address,
    parse_member,
    parse_members,
)
from mmsctl.errors import ConfigError, ConnectionFailed, RequestTimeout, UsageError


def test_a_member_is_its_management_url_or_its_urls_in_full() -> None:
    """One URL: the other APIs on the same host at the standard ports; else INFERENCE=MANAGEMENT[=METRICS]."""
    assert parse_member("http://10.0.0.5:9081") == Member(
        "10.0.0.5:9081", "http://10.0.0.5:9081", "http://10.0.0.5:8080", "http://10.0.0.5:8082")
    assert parse_member(" http://gpu1 ") == Member("gpu1:8081", "http://gpu1:8081", "http://gpu1:8080",
                                                   "http://gpu1:8082")
    assert parse_member("https://[fd00::5]:9081") == Member(
        "[fd00::5]:9081", "https://[fd00::5]:9081", "https://[fd00::5]:8080", "https://[fd00::5]:8082")
    assert parse_member("http://127.0.0.1:18080=http://127.0.0.1:18081/") == Member(
        "127.0.0.1:18081", "http://127.0.0.1:18081", "http://127.0.0.1:18080")  # no metrics URL: none
    assert parse_member("http://h:1=http://h:2=http://h:3") == Member("h:2", "http://h:2", "http://h:1", "http://h:3")
    assert member_from_address("i-0abc", "172.31.0.4") == Member(
        "i-0abc", "http://172.31.0.4:8081", "http://172.31.0.4:8080", "http://172.31.0.4:8082")
    assert parse_member("http://h:1=http://h:2=http://h:3").context("/t").metrics_url == "http://h:3"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("10.0.0.5:8081", "bad member URL '10.0.0.5:8081': expected http(s)://HOST:PORT"),
        ("http://h/mgmt", "member 'http://h/mgmt' has a path; give both URLs as INFERENCE=MANAGEMENT"),
        ("http://h:1=ftp://h:2", "bad member management URL 'ftp://h:2'"),
        ("http://h:1=http://h:2=h:3", "bad member metrics URL 'h:3'"),
        ("http://h:1=http://h:2=http://h:3=http://h:4", "has 4 URLs; give INFERENCE=MANAGEMENT[=METRICS]"),
        ("http://h:99999", "the port must be a number from 1 to 65535"),
        ("  ", "empty fleet member"),
    ],
)
def test_bad_member_specs(spec: str, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_member(spec)
    assert message in caught.value.message and caught.value.exit_code == 2


def test_members_split_on_commas_and_repeats_are_dropped() -> None:
    members = parse_members(["http://a:8081,http://b:8081", "http://a:8081", "http://c"])
    assert [m.name for m in members] == ["a:8081", "b:8081", "c:8081"]
    with pytest.raises(UsageError, match="at least one member"):
        parse_members([" , "])
    with pytest.raises(UsageError, match=f"at most {MAX_MEMBERS}"):
        parse_members([",".join(f"http://10.0.{i // 250}.{i % 250}:8081" for i in range(MAX_MEMBERS + 1))])


def test_concurrency_is_a_setting_with_a_ceiling(monkeypatch: pytest.MonkeyPatch) -> None:
    assert concurrency_limit() == 16
    monkeypatch.setenv("MMSCTL_FANOUT_CONCURRENCY", "3")
    assert concurrency_limit() == 3
    for bad, message in (("many", "must be a whole number"), ("0", "must be 1 to 256"), ("1000", "must be 1 to 256")):
        monkeypatch.setenv("MMSCTL_FANOUT_CONCURRENCY", bad)
        with pytest.raises(ConfigError, match=message):
            concurrency_limit()


def test_fan_out_runs_exactly_the_bound_at_once_and_keeps_member_order() -> None:
    """Nine members, a bound of three: every call waits at a three-party barrier, so the run
    only finishes if three calls are in flight together, and never more than three are."""
    members = parse_members([f"http://m{i}:8081" for i in range(9)])
    barrier = threading.Barrier(3, timeout=30)
    lock = threading.Lock()
    active = [0, 0]  # now, most

    def call(member: Member) -> str:
        with lock:
            active[0] += 1
            active[1] = max(active[1], active[0])
        barrier.wait()
        with lock:
            active[0] -= 1
        return member.name.upper()

    answers = fan_out(members, call, concurrency=3)
    assert [r.value for r in answers.results] == [f"M{i}:8081" for i in range(9)]
    assert active[1] == 3 and answers.failed == []
    answers.check("nothing")  # no failure: no error


def test_a_members_error_is_its_row_and_a_bug_is_raised() -> None:
    members = parse_members(["http://a:8081,http://b:8081"])

    def call(member: Member) -> int:
        if member.name.startswith("b"):
            raise ConnectionFailed("cannot connect to b:8081: connection refused")
        return 1

    answers = fan_out(members, call, concurrency=2)
    assert [(r.member.name, r.value, r.ok) for r in answers.results] == [("a:8081", 1, True), ("b:8081", None, False)]

    def buggy(member: Member) -> int:
        raise KeyError("a bug, not a member's failure")

    with pytest.raises(KeyError):
        fan_out(members, buggy, concurrency=2)


def test_the_async_fan_out_has_the_same_bound_order_and_failures() -> None:
    """The asyncio face (mmsctl top): nine members, a bound of three; each call waits until three are in
    flight together, so the run ends only if the bound is reached, and the count shows it is never passed."""
    import asyncio

    members = parse_members([f"http://m{i}:8081" for i in range(9)])

    async def run() -> tuple[FanOut[str], int]:
        active, most = [0], [0]
        three = asyncio.Event()

        async def call(member: Member) -> str:
            active[0] += 1
            most[0] = max(most[0], active[0])
            if active[0] == 3:
                three.set()
            await asyncio.wait_for(three.wait(), 30)
            await asyncio.sleep(0)
            active[0] -= 1
            if active[0] == 0:
                three.clear()
            if member.name.startswith("m4"):
                raise ConnectionFailed("cannot connect to m4:8081: connection refused")
            return member.name.upper()

        return await async_fan_out(members, call, concurrency=3), most[0]

    answers, most = asyncio.run(run())
    assert most == 3
    assert [r.value for r in answers.results] == [None if i == 4 else f"M{i}:8081" for i in range(9)]
    assert [r.member.name for r in answers.failed] == ["m4:8081"]


def test_the_async_fan_out_bounds_each_member_in_time_and_raises_bugs() -> None:
    import asyncio

    members = parse_members(["http://fast:8081,http://stuck:8081"])

    async def call(member: Member) -> int:
        if member.name.startswith("stuck"):
            await asyncio.sleep(60)
        return 1

    answers = asyncio.run(async_fan_out(members, call, timeout=0.2))
    assert answers.results[0].value == 1
    error = answers.results[1].error
    assert isinstance(error, RequestTimeout) and error.message == "stuck:8081 did not answer in 0.2 s"

    async def buggy(member: Member) -> int:
        raise KeyError("a bug, not a member's failure")

    with pytest.raises(KeyError):
        asyncio.run(async_fan_out(members, buggy))


def _results(*errors: object) -> FanOut[int]:
    return FanOut([MemberResult(Member(f"m{i}", f"http://m{i}:8081", f"http://m{i}:8080"),
                                None if e else 1, e)  # type: ignore[arg-type]
                   for i, e in enumerate(errors)])


def test_failures_name_the_members_with_a_documented_exit_code() -> None:
    refused = ConnectionFailed("cannot connect: connection refused")
    slow = RequestTimeout("no answer within 5 s")
    with pytest.raises(MembersFailed) as caught:
        _results(None, refused, None).check("models list")
    assert caught.value.exit_code == 4 and caught.value.failed == ["m1"]
    assert caught.value.message == "models list failed on 1 of 3 members: m1 (cannot connect: connection refused)"
    with pytest.raises(MembersFailed) as caught:  # every member down the same way: that way's code
        _results(refused, refused).check("ping")
    assert caught.value.exit_code == 5 and caught.value.message.startswith("ping failed on all 2 members: m0 (")
    with pytest.raises(MembersFailed) as caught:
        _results(refused, slow).check("ping")
    assert caught.value.exit_code == 4
    with pytest.raises(MembersFailed) as caught:
        _results(slow).check("scale noop")
    assert caught.value.exit_code == 7 and "failed on the only member: m0 (no answer within 5 s)" in caught.value.message
