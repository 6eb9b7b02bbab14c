"""`mmsctl bench` and its load generator against servers that misbehave on purpose.

* ``--timeout`` holds for the checks before the first level too: a server that never answers
  or trickles its answer ends the command at the timeout (exit 7, naming the server), not after
  the client's own 60 s;
* an answer over the size limit is an error, never "ok": the check prediction fails (exit 8),
  and in a level each such answer is counted as ``too-large`` and read no further.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Iterator

import pytest

from mmsctl.loadtest.loadgen import LoadSpec, build_requests, run_load
from tests.support.cli import CliResult, run_mmsctl
from tests.support.misbehaving import (
    ENDLESS,
    HUGE,
    SILENT,
    TRICKLE,
    Behaviour,
    Misbehaving,
    answer,
    healthy,
    misbehaving_server,
)

LIMIT = 100_000
CHECKS = {"GET /ping": healthy(), "OPTIONS /": answer(b"{}")}


def first_then(first: Behaviour, then: Behaviour) -> Behaviour:
    """*first* for the first request, *then* for every later one."""
    calls: list[int] = []

    async def run(state: Misbehaving, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        calls.append(1)
        return await (first if len(calls) == 1 else then)(state, reader, writer)

    return run


@pytest.fixture
def body(tmp_path: Path) -> Path:
    path = tmp_path / "hello.txt"
    path.write_text("hello")
    return path


def _bench(capsys: pytest.CaptureFixture[str], srv: Misbehaving, *args: str) -> CliResult:
    r = run_mmsctl(capsys, "context", "add", "bad", "--inference", srv.url, "--management", srv.url)
    assert r.code == 0, r.stderr
    return run_mmsctl(capsys, "--context", "bad", "bench", *args)


def _error_line(r: CliResult) -> str:
    """The one ``error:`` line (bench's status lines may come before it; no traceback)."""
    assert "Traceback" not in r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, r.stderr
    return errors[0]


@pytest.mark.parametrize("routes, said", [
    ({}, "did not answer after 1 s"),  # the ping gets no answer
    ({**CHECKS, "POST /predictions": SILENT}, "did not answer after 1 s"),
    ({**CHECKS, "POST /predictions": TRICKLE}, "did not finish its answer in 1 s"),
], ids=["silent-ping", "silent-prediction", "trickling-prediction"])
def test_the_checks_before_the_first_level_keep_the_timeout(routes: dict[str, Behaviour], said: str, body: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    with misbehaving_server(routes, default=SILENT) as srv:
        r = _bench(capsys, srv, "m", str(body), "--requests", "2", "--timeout", "1")
    line = _error_line(r)
    assert r.code == 7 and srv.host in line and said in line, r.stderr


def test_a_check_prediction_over_the_limit_is_an_error(body: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with misbehaving_server({**CHECKS, "POST /predictions": HUGE}) as srv:
        r = _bench(capsys, srv, "m", str(body), "--requests", "2", "--max-response-bytes", str(LIMIT))
        line = _error_line(r)
        assert r.code == 8 and srv.host in line and f"{LIMIT:,} bytes" in line
        assert srv.body_bytes < 100 * LIMIT


def test_answers_over_the_limit_count_as_errors_not_ok(body: Path, capsys: pytest.CaptureFixture[str]) -> None:
    predictions = first_then(answer(b"ok"), HUGE)  # the check passes; the level gets 1 GiB answers
    with misbehaving_server({**CHECKS, "POST /predictions": predictions}) as srv:
        r = _bench(capsys, srv, "m", str(body), "-c", "1", "--requests", "3", "--warmup", "0",
                   "--max-response-bytes", str(LIMIT), "-o", "json")
        assert r.code == 4, r.stderr  # the level failed completely
        assert "3 sent, 0 ok (too-large: 3)" in _error_line(r)
        level = json.loads(r.stdout)["sweeps"][0]["levels"][0]
        assert (level["sent"], level["ok"], level["errors"]) == (3, 0, {"too-large": 3})
        assert srv.body_bytes < 3 * 100 * LIMIT  # each answer was dropped at the limit, not read to its GiB


def test_a_level_that_fails_completely_is_exit_4_with_results_saved(body: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "failed.json"
    predictions = first_then(answer(b"ok"), SILENT)  # the check passes; the level's requests go unanswered
    with misbehaving_server({**CHECKS, "POST /predictions": predictions}) as srv:
        r = _bench(capsys, srv, "m", str(body), "-c", "1,2", "--requests", "2", "--warmup", "0",
                   "--timeout", "0.2s", "--save", str(saved))
    assert r.code == 4
    assert "level 1 failed completely on bad: 2 sent, 0 ok (timeout: 2)" in _error_line(r)
    assert "timeout:2" in r.stdout  # the partial table was printed
    from mmsctl.loadtest.results import load_run

    run = load_run(saved)
    assert not run.complete and [lvl.concurrency for lvl in run.sweeps[0].levels] == [1]


@pytest.fixture
def endless() -> Iterator[Misbehaving]:
    with misbehaving_server(default=ENDLESS) as srv:
        yield srv


def test_the_load_generator_drops_an_endless_answer_at_the_limit(endless: Misbehaving) -> None:
    endpoint = build_requests(endless.url, "m", [(b"x", "text/plain")])
    result = asyncio.run(run_load(endpoint, LoadSpec(concurrency=2, requests=4, max_response_bytes=LIMIT)))
    assert (result.sent, result.ok, result.errors) == (4, 0, {"too-large": 4})
    assert result.latency.total == 0
    assert endless.body_bytes < 4 * 100 * LIMIT


def test_the_load_generator_times_out_a_trickling_answer() -> None:
    with misbehaving_server(default=TRICKLE) as srv:
        endpoint = build_requests(srv.url, "m", [(b"x", "text/plain")])
        result = asyncio.run(run_load(endpoint, LoadSpec(concurrency=1, requests=2, timeout_s=0.5)))
    assert (result.sent, result.ok, result.errors) == (2, 0, {"timeout": 2})
