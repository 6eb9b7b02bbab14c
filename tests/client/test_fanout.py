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
    concurrency_limit,
    fan_out,
    member_from_address,
    parse_member,
    parse_members,
)
from mmsctl.errors import ConfigError, ConnectionFailed, RequestTimeout, UsageError


def test_a_member_is_its_management_url_or_an_inference_management_pair() -> None:
    assert parse_member("http://10.0.0.5:9081") == Member(
        "10.0.0.5:9081", "http://10.0.0.5:9081", "http://10.0.0.5:8080")
    assert parse_member(" http://gpu1 ") == Member("gpu1:8081", "http://gpu1:8081", "http://gpu1:8080")
    assert parse_member("https://[fd00::5]:9081") == Member(
        "[fd00::5]:9081", "https://[fd00::5]:9081", "https://[fd00::5]:8080")
    assert parse_member("http://127.0.0.1:18080=http://127.0.0.1:18081/") == Member(
        "127.0.0.1:18081", "http://127.0.0.1:18081", "http://127.0.0.1:18080")
    assert member_from_address("i-0abc", "172.31.0.4") == Member(
        "i-0abc", "http://172.31.0.4:8081", "http://172.31.0.4:8080")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("10.0.0.5:8081", "bad member URL '10.0.0.5:8081': expected http(s)://HOST:PORT"),
        ("http://h/mgmt", "member 'http://h/mgmt' has a path; give both URLs as INFERENCE=MANAGEMENT"),
        ("http://h:1=ftp://h:2", "bad member management URL 'ftp://h:2'"),
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
