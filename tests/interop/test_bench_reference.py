"""`mmsctl bench` against real MMS 1.1.11 and TorchServe 0.12: consistent figures, the no-op model
registered from an archive the bench serves on loopback and removed again, --compare with mmsctl's
own server, and TorchServe's token and Prometheus metrics.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import CliResult, run_mmsctl
from tests.support.fixtures_mms import mms_server, torchserve_server  # noqa: F401 - fixtures
from tests.support.mms import MmsInstance, describe, register_model, unregister_model, wait_for_prediction
from tests.support.mmsctl_server import make_noop_archive, running_mmsctl_server
from tests.support.refserver import http_request
from tests.support.torchserve import TorchServeInstance

pytestmark = [pytest.mark.interop, pytest.mark.xdist_group("mms")]


@pytest.fixture
def mms(mms_server: MmsInstance, capsys: pytest.CaptureFixture[str]) -> MmsInstance:
    r = run_mmsctl(capsys, "context", "add", "mms", "--inference", mms_server.inference_url,
                   "--management", mms_server.management_url)
    assert r.code == 0, r.stderr
    return mms_server


@pytest.fixture(scope="module")
def torchserve(torchserve_server: TorchServeInstance) -> TorchServeInstance:  # noqa: F811
    """The process's one TorchServe (token auth, the model API, Prometheus metrics, ``noop``)."""
    return torchserve_server


def _models(instance: Any, headers: dict[str, str] | None = None) -> list[str]:
    reply = http_request("GET", instance.management_url + "/models", headers=headers, timeout=10)
    return sorted(m["modelName"] for m in reply.json()["models"])


def _run(r: CliResult) -> dict[str, Any]:
    assert r.code == 0, r.stderr
    return json.loads(r.stdout)


def _consistent(level: dict[str, Any]) -> None:
    assert level["sent"] == level["ok"] + sum(level["errors"].values())
    lat = level["latency_ms"]
    assert [lat[k] for k in ("p50", "p90", "p99", "p99.9", "max")] == sorted(lat.values())


def test_noop_on_mms_is_registered_from_loopback_and_removed(mms: MmsInstance,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    before = _models(mms)
    r = run_mmsctl(capsys, "--context", "mms", "bench", "--noop", "-c", "1,4", "--requests", "40", "--warmup", "0",
                   "-o", "json")
    run = _run(r)
    assert "MMS 1.1 publishes no metrics endpoint" in r.stderr
    (sweep,) = run["sweeps"]
    assert sweep["server_kind"] == "mms" and sweep["model"].startswith("bench-noop-")
    for level in sweep["levels"]:
        _consistent(level)
        assert (level["sent"], level["ok"]) == (40, 40) and level["server"] == {}
    assert _models(mms) == before


def test_a_registered_model_on_mms(mms: MmsInstance, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    register_model(mms, "noop.mar", "noop")
    try:
        wait_for_prediction(mms, "noop")
        body = tmp_path / "b.txt"
        body.write_text("hello")
        run = _run(run_mmsctl(capsys, "--context", "mms", "bench", "noop", str(body), "-c", "2", "--requests", "30",
                              "--warmup", "0", "-o", "json"))
        (level,) = run["sweeps"][0]["levels"]
        _consistent(level)
        assert level["ok"] == 30
        assert describe(mms, "noop")["modelName"] == "noop"  # a model bench did not register stays
    finally:
        unregister_model(mms, "noop")


def test_compare_mms_with_mmsctl_aligns_levels(mms: MmsInstance, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    make_noop_archive(store / "noop")
    with running_mmsctl_server(tmp_path / "srv", model_store=store) as ours, pytest.MonkeyPatch.context() as mp:
        mp.setenv("MMSCTL_STATE_DIR", str(ours.state_dir))  # the CLI finds the server's model store there
        r = run_mmsctl(capsys, "context", "add", "ours", "--inference", ours.inference_url,
                       "--management", ours.management_url, "--metrics", ours.metrics_url)
        assert r.code == 0, r.stderr
        run = _run(run_mmsctl(capsys, "--context", "mms", "bench", "--noop", "--compare", "ours", "-c", "1,2,4",
                              "--requests", "20", "--warmup", "0", "-o", "json"))
        a, b = run["sweeps"]
        assert (a["server_kind"], b["server_kind"]) == ("mms", "mmsctl")
        assert [lvl["concurrency"] for lvl in a["levels"]] == [lvl["concurrency"] for lvl in b["levels"]] == [1, 2, 4]
        for level in a["levels"] + b["levels"]:
            _consistent(level)
        assert all(level["server"].get("inference_ms", 0) > 0 for level in b["levels"])
        assert _models(ours) == []
    assert not [m for m in _models(mms) if m.startswith("bench-noop-")]


@pytest.mark.slow
def test_noop_on_torchserve_with_token_and_prometheus_metrics(torchserve: TorchServeInstance,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    r = run_mmsctl(capsys, "context", "add", "ts", "--inference", torchserve.inference_url, "--management",
                   torchserve.management_url, "--metrics", torchserve.metrics_url,
                   "--token-file", str(torchserve.key_file))
    assert r.code == 0, r.stderr
    before = _models(torchserve, torchserve.management_headers())
    store_before = sorted(p.name for p in torchserve.model_store.iterdir())
    run = _run(run_mmsctl(capsys, "--context", "ts", "bench", "--noop", "-c", "1,2", "--requests", "30", "--warmup", "0",
                          "-o", "json"))
    (sweep,) = run["sweeps"]
    assert sweep["server_kind"] == "torchserve"
    for level in sweep["levels"]:
        _consistent(level)
        assert level["ok"] == 30
        assert level["server"]["inference_ms"] > 0 and level["server"]["queue_ms"] >= 0
    assert _models(torchserve, torchserve.management_headers()) == before
    # TorchServe downloaded the archive into its model store; unregister removed it again
    assert sorted(p.name for p in torchserve.model_store.iterdir()) == store_before

