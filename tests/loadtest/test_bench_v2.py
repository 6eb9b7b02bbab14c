"""`mmsctl bench` on a ``--protocol v2`` context: v2 infer requests (binary tensor extension) and the same
columns as on the MMS API, against a v2-only stand-in (tests/support/v2_standin.py: it has no
``/predictions``, so a request in the wrong dialect fails) and against ``mmsctl serve`` (server-side
figures from its metrics; ``--noop`` through its MMS management API; refused without one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from tests.support.cli import CliResult, run_mmsctl
from tests.support.mmsctl_server import ServerInfo, make_noop_archive, running_mmsctl_server
from tests.support.v2_standin import V2StandIn, running_v2_standin

pytestmark = [pytest.mark.xdist_group("bench-v2")]


@pytest.fixture(scope="module")
def standin() -> Iterator[V2StandIn]:
    with running_v2_standin() as state:
        yield state


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    store = tmp_path_factory.mktemp("bench-v2-store")
    make_noop_archive(store / "noop")
    with running_mmsctl_server(tmp_path_factory.mktemp("bench-v2-srv"), model_store=store, models={"noop": "noop"},
                               workers=1) as srv:
        yield srv


@pytest.fixture
def body(tmp_path: Path) -> Path:
    path = tmp_path / "hello.bin"
    path.write_bytes(b"hello \x00\xff v2")
    return path


def _add(capsys: pytest.CaptureFixture[str], name: str, *args: str) -> None:
    r = run_mmsctl(capsys, "context", "add", name, "--protocol", "v2", *args)
    assert r.code == 0, r.stderr


def _json(r: CliResult) -> dict[str, Any]:
    assert r.code == 0, r.stderr
    return json.loads(r.stdout)


def test_bench_sends_v2_binary_infer_requests(standin: V2StandIn, body: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    _add(capsys, "tri", "--inference", standin.url)
    before = dict(standin.seen)
    binary_before = standin.binary_infers
    run = _json(run_mmsctl(capsys, "--context", "tri", "bench", "echo", str(body), "-c", "1,2", "--requests", "25",
                           "--warmup", "0", "-o", "json"))
    (sweep,) = run["sweeps"]
    assert (sweep["model"], sweep["server_kind"]) == ("echo", "v2:standin")
    for level in sweep["levels"]:
        assert (level["sent"], level["ok"], level["errors"]) == (25, 25, {})
    infers = standin.seen.get("POST /v2/models/echo/infer", 0) - before.get("POST /v2/models/echo/infer", 0)
    assert infers == 50 + 1  # the sweep, and the one check prediction before it
    assert standin.binary_infers - binary_before == infers  # every one in the binary tensor extension
    assert standin.last_elements == [body.read_bytes()]  # the file, as one BYTES element
    assert not any("/predictions" in key for key in standin.seen)


def test_bench_table_has_the_same_columns_as_on_the_mms_api(standin: V2StandIn, body: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    _add(capsys, "tri", "--inference", standin.url)
    r = run_mmsctl(capsys, "--context", "tri", "bench", "echo", str(body), "-c", "1", "--requests", "5",
                   "--warmup", "0", "-o", "csv")
    assert r.code == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith("target,model,level,concurrency,rate,duration_s,sent,ok,success_pct")
    assert "Open Inference Protocol" in r.stderr


def test_bench_unknown_v2_model_exits_3(standin: V2StandIn, body: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _add(capsys, "tri", "--inference", standin.url)
    r = run_mmsctl(capsys, "--context", "tri", "bench", "nosuch", str(body), "-c", "1", "--requests", "3")
    assert r.code == 3, r.stderr
    assert "Traceback" not in r.stderr


def test_noop_on_a_v2_context_without_management_is_refused_before_any_request(
        standin: V2StandIn, capsys: pytest.CaptureFixture[str]) -> None:
    _add(capsys, "tri", "--inference", standin.url)
    before = dict(standin.seen)
    r = run_mmsctl(capsys, "--context", "tri", "bench", "--noop", "-c", "1", "--requests", "3")
    assert r.code == 2, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "the no-op model needs a management API" in errors[0], r.stderr
    assert errors[0].endswith("(--noop)"), r.stderr  # the CLI names the flag, the core does not
    assert "--management" in r.stderr
    assert standin.seen == before


def test_bench_on_mmsctl_serve_v2_has_server_side_figures(server: ServerInfo, body: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    _add(capsys, "srv-v2", "--inference", server.inference_url, "--metrics", server.metrics_url)
    run = _json(run_mmsctl(capsys, "--context", "srv-v2", "bench", "noop", str(body), "-c", "2", "--requests", "30",
                           "--warmup", "0", "-o", "json"))
    (sweep,) = run["sweeps"]
    (level,) = sweep["levels"]
    assert (sweep["server_kind"], level["ok"], level["errors"]) == ("mmsctl", 30, {})
    assert level["server"]["inference_ms"] > 0 and level["server"]["queue_ms"] >= 0


def test_noop_on_a_v2_context_with_management_registers_and_removes(
        server: ServerInfo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MMSCTL_STATE_DIR", str(server.state_dir))  # the local server's store takes the archive
    _add(capsys, "srv-v2m", "--inference", server.inference_url, "--management", server.management_url)
    run = _json(run_mmsctl(capsys, "--context", "srv-v2m", "bench", "--noop", "-c", "2", "--requests", "20",
                           "--warmup", "0", "-o", "json"))
    (name,) = run["settings"]["noop_models"].values()
    (level,) = run["sweeps"][0]["levels"]
    assert (level["ok"], level["errors"]) == (20, {})
    models = httpx.get(server.management_url + "/models", timeout=10).json()["models"]
    assert name not in [m["modelName"] for m in models]
