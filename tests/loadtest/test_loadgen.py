"""The load generator against a real loopback server: every request is counted once, and every failure by cause."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from mmsctl.loadtest.loadgen import LoadSpec, build_requests, run_load
from mmsctl.errors import UsageError
from tests.loadtest.conftest import Answers
from tests.support._proc import any_free_port


def _run(url: str, model: str, spec: LoadSpec, stop: threading.Event | None = None):
    endpoint = build_requests(url, model, [(b"body", "text/plain")])
    return asyncio.run(run_load(endpoint, spec, stop=stop))


def _consistent(result) -> None:
    assert result.sent == result.ok + sum(result.errors.values())
    assert result.latency.total == result.ok


def test_closed_loop_sends_exactly_the_requested_count(answers: Answers) -> None:
    before = answers.seen.get("ok", 0)
    result = _run(answers.url, "ok", LoadSpec(concurrency=4, requests=200))
    _consistent(result)
    assert (result.sent, result.ok, result.errors) == (200, 200, {})
    assert answers.seen["ok"] - before == 200  # none lost, none sent twice
    lat = result.latency.summary_ms()
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p99.9"] <= lat["max"]


def test_status_codes_are_counted_by_code(answers: Answers) -> None:
    result = _run(answers.url, "flaky", LoadSpec(concurrency=3, requests=90))
    _consistent(result)
    assert result.sent == 90
    assert result.errors == {"503": 30}
    missing = _run(answers.url, "nope", LoadSpec(concurrency=1, requests=5))
    assert (missing.ok, missing.errors) == (0, {"404": 5})


def test_a_dropped_connection_is_a_reset_and_the_client_reconnects(answers: Answers) -> None:
    result = _run(answers.url, "reset", LoadSpec(concurrency=2, requests=10))
    _consistent(result)
    assert result.sent == 10 and result.errors == {"reset": 10}


def test_connection_close_answers_are_ok_and_reconnect(answers: Answers) -> None:
    result = _run(answers.url, "close", LoadSpec(concurrency=2, requests=20))
    assert (result.sent, result.ok) == (20, 20)


def test_late_answers_are_timeouts(answers: Answers) -> None:
    result = _run(answers.url, "slow", LoadSpec(concurrency=2, requests=4, timeout_s=0.1))
    _consistent(result)
    assert result.errors == {"timeout": 4}


def test_nothing_listening_is_refused() -> None:
    result = _run(f"http://127.0.0.1:{any_free_port()}", "ok", LoadSpec(concurrency=2, requests=6))
    _consistent(result)
    assert result.errors == {"refused": 6}


def test_duration_level_stops_on_time_and_reports_its_window(answers: Answers) -> None:
    result = _run(answers.url, "ok", LoadSpec(concurrency=2, duration_s=0.5, warmup_s=0.2))
    _consistent(result)
    assert result.duration_s == 0.5 and result.ok > 0 and not result.interrupted


def test_stop_flag_ends_a_level_early_and_keeps_what_it_measured(answers: Answers) -> None:
    stop = threading.Event()
    timer = threading.Timer(0.5, stop.set)
    timer.start()
    started = time.monotonic()
    result = _run(answers.url, "ok", LoadSpec(concurrency=2, duration_s=60), stop)
    timer.join()
    assert time.monotonic() - started < 30  # far from the 60 s asked for
    assert result.interrupted and result.ok > 0 and 0 < result.duration_s < 60
    _consistent(result)


def test_open_loop_measures_from_the_scheduled_time(answers: Answers) -> None:
    # One connection, 0.3 s per answer, 10 scheduled per second: the server keeps up with a third of
    # them, so the n-th request cannot finish before 0.3*(n+1) s and waits ~0.2*n s in the backlog.
    result = _run(answers.url, "slow", LoadSpec(rate=10, requests=10, max_connections=1, timeout_s=30))
    _consistent(result)
    assert result.ok == 10
    # the last one was scheduled at 0.9 s and finished no earlier than 3.0 s
    assert result.latency.summary_ms()["max"] >= 2000
    assert result.latency.quantile_ms(0.5) > 600  # a closed loop would say ~300 ms for every request


@pytest.mark.parametrize("kwargs, message", [
    ({"concurrency": 0, "requests": 1}, "concurrency must be"),
    ({"rate": 0.0, "requests": 1}, "rate must be"),
    ({"concurrency": 1}, "duration or a request count"),
    ({"concurrency": 1, "rate": 1.0, "requests": 1}, "either a concurrency or a rate"),
    ({"concurrency": 1, "requests": 1, "timeout_s": 0}, "timeout"),
])
def test_bad_levels_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        LoadSpec(**kwargs)


def test_requests_carry_the_token_and_content_type() -> None:
    endpoint = build_requests("https://models.example:8443/", "my model", [(b"abc", "image/jpeg")],
                              token="t0k", version="2.0")
    assert endpoint.tls and endpoint.port == 8443 and endpoint.host == "models.example"
    head, body = endpoint.requests[0].split(b"\r\n\r\n")
    assert head.startswith(b"POST /predictions/my%20model/2.0 HTTP/1.1\r\nHost: models.example:8443")
    assert b"Authorization: Bearer t0k" in head and b"Content-Type: image/jpeg" in head
    assert b"Content-Length: 3" in head and body == b"abc"


def test_open_loop_goodput_is_what_the_server_served_not_what_it_was_offered(answers: Answers) -> None:
    # 10 requests offered in 1 s to a server that serves one per 0.3 s on one connection: the last
    # answer cannot come before 3.0 s, so the level's window stretches to it and OK/s stays <= 3.4
    result = _run(answers.url, "slow", LoadSpec(rate=10, duration_s=1.0, max_connections=1, timeout_s=30))
    assert result.ok == 10
    assert result.duration_s >= 3.0
    assert result.ok / result.duration_s <= 10 / 3.0
