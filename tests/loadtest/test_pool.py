"""Several load-generator processes: the level is split exactly and the results merge exactly."""

from __future__ import annotations

import threading

import pytest

from mmsctl.loadtest.loadgen import LoadSpec, build_requests
from mmsctl.loadtest.pool import LoadPool, auto_processes, split
from tests.loadtest.conftest import Answers


def test_split_shares_clients_requests_and_rate() -> None:
    parts = split(LoadSpec(concurrency=7, requests=10, max_connections=5), 3)
    assert [p.concurrency for p in parts] == [3, 2, 2]
    assert [p.requests for p in parts] == [4, 3, 3]
    assert split(LoadSpec(concurrency=2, requests=10), 4) == split(LoadSpec(concurrency=2, requests=10), 2)
    open_parts = split(LoadSpec(rate=300.0, duration_s=1.0), 3)
    assert [p.rate for p in open_parts] == [100.0, 100.0, 100.0]


@pytest.mark.parametrize("spec, cpus, expected", [
    (LoadSpec(concurrency=10, requests=1), 8, 1),
    (LoadSpec(concurrency=100, requests=1), 8, 2),
    (LoadSpec(concurrency=500, requests=1), 2, 2),
    (LoadSpec(concurrency=5000, requests=1), 64, 4),
    (LoadSpec(rate=5000.0, requests=1), 8, 3),
])
def test_auto_processes(spec: LoadSpec, cpus: int, expected: int) -> None:
    assert auto_processes(spec, cpus) == expected


def test_two_processes_send_the_count_once_and_merge_every_figure(answers: Answers) -> None:
    endpoint = build_requests(answers.url, "flaky", [(b"x", None)])
    before = answers.seen.get("flaky", 0)
    pool = LoadPool(2)
    try:
        seen: list[int] = []
        result = pool.run(endpoint, LoadSpec(concurrency=4, requests=90), 2, stop=threading.Event(),
                          on_progress=lambda r, _e: seen.append(r.sent))
    finally:
        pool.close()
    assert answers.seen["flaky"] - before == 90
    assert result.sent == 90 and result.ok + result.errors.get("503", 0) == 90
    assert result.errors["503"] == 30 and result.latency.total == result.ok
    assert seen and seen == sorted(seen)
