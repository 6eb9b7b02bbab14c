"""`--timeout` bounds each whole request, and answers are capped, for every command that calls a server.

Each test points a context at a loopback server that misbehaves on purpose (tests/support/
misbehaving.py): it trickles its answer a byte every 0.2 s (100,000 bytes announced), never
answers, or sends more than the ``max_response_bytes`` setting. Without the limits these
commands ran for minutes or filled the memory; with them each fails within its timeout with
one line naming the server (exit 7 timeout, 8 an answer over the limit, 4 some fleet members).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.cli import CliResult, one_error_line, run_mmsctl
from tests.support.misbehaving import ENDLESS, SILENT, TRICKLE, Misbehaving, answer, healthy, misbehaving_server

DETAIL = [{"modelName": "m", "modelVersion": "1.0", "modelUrl": "m.mar", "runtime": "python", "minWorkers": 1,
           "maxWorkers": 1, "batchSize": 1, "maxBatchDelay": 100, "workers": []}]
GOOD_ROUTES = {
    "GET /ping": healthy(),
    "OPTIONS /": answer(b"{}"),
    "GET /models/m": answer(json.dumps(DETAIL).encode()),
    "GET /models": answer(b'{"models": [{"modelName": "m", "modelUrl": "m.mar"}]}'),
    "PUT /models/m": answer(b'{"status": "Processing worker updates..."}', status=202),
}


@pytest.fixture
def trickling() -> Iterator[Misbehaving]:
    with misbehaving_server(default=TRICKLE) as srv:
        yield srv


def _use(capsys: pytest.CaptureFixture[str], srv: Misbehaving) -> None:
    r = run_mmsctl(capsys, "context", "add", "bad", "--inference", srv.url, "--management", srv.url, "--use")
    assert r.code == 0, r.stderr


def _timed_out(r: CliResult, srv: Misbehaving) -> str:
    line = one_error_line(r)
    assert r.code == 7, r.stderr
    assert srv.host in line and " 1 s" in line, line
    return line


@pytest.mark.parametrize("command", [
    ["models", "list"],
    ["models", "describe", "m"],
    ["scale", "m", "--min-workers", "2"],
    ["ping"],
], ids=["list", "describe", "scale", "ping"])
def test_a_trickling_server_fails_at_the_timeout(command: list[str], trickling: Misbehaving,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    _use(capsys, trickling)
    _timed_out(run_mmsctl(capsys, *command, "--timeout", "1"), trickling)


def test_predict_on_a_server_that_trickles_or_never_answers(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    body = tmp_path / "in.json"
    body.write_text("{}")
    for behaviour, said in ((TRICKLE, "did not finish its answer in 1 s"), (SILENT, "did not answer after 1 s")):
        with misbehaving_server(default=behaviour) as srv:
            _use(capsys, srv)
            line = _timed_out(run_mmsctl(capsys, "predict", "m", str(body), "--context", "bad", "--timeout", "1"),
                              srv)
            assert said in line


def test_an_answer_over_the_limit_names_the_server(capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MMSCTL_MAX_RESPONSE_BYTES", "100000")
    with misbehaving_server(default=ENDLESS) as srv:
        _use(capsys, srv)
        r = run_mmsctl(capsys, "models", "list")
        line = one_error_line(r)
        assert r.code == 8 and srv.host in line and "100,000 bytes" in line and "max_response_bytes" in line
        assert "MMSCTL_MAX_RESPONSE_BYTES" in r.stderr  # the hint says how to allow more
        assert srv.body_bytes < 100 * 100000  # read no further than the limit (and socket buffers)


@pytest.fixture
def fleet(capsys: pytest.CaptureFixture[str], trickling: Misbehaving) -> Iterator[tuple[Misbehaving, Misbehaving]]:
    """Context `lab`, in use: a member that answers well and one that trickles."""
    with misbehaving_server(GOOD_ROUTES) as good:
        members = ",".join(f"{s.url}={s.url}" for s in (good, trickling))
        r = run_mmsctl(capsys, "context", "add", "lab", "--members", members, "--use")
        assert r.code == 0, r.stderr
        yield good, trickling


@pytest.mark.parametrize("command, what", [
    (["models", "list"], "models list"),
    (["models", "describe", "m"], "models describe m"),
    (["scale", "m", "--min-workers", "2"], "scale m"),
    (["ping"], "ping"),
], ids=["list", "describe", "scale", "ping"])
def test_a_fleet_with_a_trickling_member_fails_it_at_the_timeout(
        command: list[str], what: str, fleet: tuple[Misbehaving, Misbehaving],
        capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = fleet
    r = run_mmsctl(capsys, *command, "--timeout", "1", "-o", "json")
    line = one_error_line(r)
    assert r.code == 4, r.stderr
    assert line.startswith(f"error: {what} failed on 1 of 2 members: {bad.host} ({bad.host} ") and " 1 s)" in line
    ok = {row["member"]: row["ok"] for row in json.loads(r.stdout)}
    assert ok == {good.host: True, bad.host: False}


def test_a_fleet_member_with_an_endless_model_list_fails_alone(capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MMSCTL_MAX_RESPONSE_BYTES", "100000")
    with misbehaving_server(GOOD_ROUTES) as good, misbehaving_server(default=ENDLESS) as bad:
        members = ",".join(f"{s.url}={s.url}" for s in (good, bad))
        assert run_mmsctl(capsys, "context", "add", "lab", "--members", members, "--use").code == 0
        r = run_mmsctl(capsys, "models", "list", "-o", "json")
        assert r.code == 4 and bad.host in one_error_line(r) and "max_response_bytes" in one_error_line(r)
        rows = {row["member"]: row for row in json.loads(r.stdout)}
        assert rows[good.host]["models"] == [{"modelName": "m", "modelUrl": "m.mar"}]
        assert not rows[bad.host]["ok"] and "100,000 bytes" in rows[bad.host]["error"]
