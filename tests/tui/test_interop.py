"""`mmsctl top`'s data source against real MMS 1.1.11 (describe only) and TorchServe 0.12 (metrics)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from mmsctl.client.contexts import Context
from mmsctl.tui.source import HttpSource
from tests.support.fixtures_mms import mms_server  # noqa: F401 - a fixture
from tests.support.fixtures_mms import torchserve_server  # noqa: F401 - a fixture
from tests.support.mms import register_model, unregister_model, wait_for_prediction

pytestmark = [pytest.mark.interop, pytest.mark.xdist_group("mms")]


def _two_polls(source: Any, between: Any) -> Any:
    async def run() -> Any:
        try:
            await source.fetch()
            await asyncio.to_thread(between)
            await asyncio.sleep(0.2)
            return await source.fetch()
        finally:
            await source.aclose()

    return asyncio.run(run())


def test_real_mms_shows_describe_and_no_metrics(mms_server: Any) -> None:  # noqa: F811
    register_model(mms_server, "noop.mar")
    try:
        wait_for_prediction(mms_server, "noop")
        # MMS has no metrics endpoint: the metrics URL points at a closed port, as it would by default.
        source = HttpSource(Context("mms", mms_server.inference_url, mms_server.management_url,
                                      "http://127.0.0.1:9"), timeout=5)
        snapshot = _two_polls(source, lambda: httpx.post(f"{mms_server.inference_url}/predictions/noop",
                                                          content=b"x", timeout=30))
    finally:
        unregister_model(mms_server, "noop")
    assert snapshot.server.reachable and snapshot.server.healthy
    assert snapshot.server.kind == "mms" and snapshot.server.metrics is False
    row = snapshot.model("noop")
    assert row is not None and row.workers_total == 1 and row.workers_ready == 1
    assert row.min_workers == 1 and row.batch_size == 1
    # Unavailable, never zero.
    assert row.requests_per_s is None and row.p50_ms is None and row.errors_per_s is None
    assert row.metrics is False


@pytest.fixture(scope="module")
def torchserve_metrics(torchserve_server: Any) -> Any:  # noqa: F811
    """The process's one TorchServe (token auth, Prometheus metrics, ``noop``)."""
    return torchserve_server


@pytest.mark.slow
def test_torchserve_metrics_with_token_auth(torchserve_metrics: Any) -> None:
    ts = torchserve_metrics
    assert ts.key_file is not None and Path(ts.key_file).exists()
    source = HttpSource(Context("ts", ts.inference_url, ts.management_url, ts.metrics_url,
                                  str(ts.key_file)), timeout=5, describe_every=0)

    def traffic() -> None:
        for _ in range(10):
            r = httpx.post(f"{ts.inference_url}/predictions/noop", content=b"x",
                           headers=ts.inference_headers(), timeout=30)
            assert r.status_code == 200, r.text

    snapshot = _two_polls(source, traffic)
    assert snapshot.server.reachable and snapshot.server.kind == "torchserve", snapshot.server
    row = snapshot.model("noop")
    assert row is not None and row.workers_ready == 1
    assert row.requests_per_s is not None and row.requests_per_s > 0
    assert row.mean_ms is not None
    assert row.p50_ms is None and row.p99_ms is None  # TorchServe publishes no histograms


def test_a_mixed_fleet_of_mmsctl_real_mms_and_a_member_down(mms_server: Any, tmp_path: Path) -> None:  # noqa: F811
    """One model on our server and on MMS 1.1.11, and a closed port: the fleet view combines what each
    publishes - our rates count, MMS's are unknown (not zero), the down member is named."""
    from mmsctl.client.fanout import parse_members
    from mmsctl.tui.fleet_source import FleetSource
    from tests.support.mmsctl_server import free_port, make_noop_archive, running_mmsctl_server

    register_model(mms_server, "noop.mar")
    try:
        wait_for_prediction(mms_server, "noop")
        noop = make_noop_archive(tmp_path / "noop")
        with running_mmsctl_server(tmp_path / "ours", models={"noop": str(noop)}, workers=1) as ours:
            dead = f"http://127.0.0.1:{free_port()}"
            members = parse_members([f"{ours.inference_url}={ours.management_url}={ours.metrics_url}",
                                     f"{mms_server.inference_url}={mms_server.management_url}", dead])
            fleet = FleetSource.over_http("mixed", members, timeout=5, describe_every=0)

            def traffic() -> None:
                for url in (ours.inference_url, mms_server.inference_url):
                    for _ in range(5):
                        assert httpx.post(f"{url}/predictions/noop", content=b"x", timeout=30).status_code == 200

            snapshot = _two_polls(fleet, traffic)
    finally:
        unregister_model(mms_server, "noop")
    assert [(m.state, m.server.kind) for m in snapshot.members] == [("up", "mmsctl"), ("up", "mms"),
                                                                      ("down", "unknown")]
    assert snapshot.server.kind == "unknown" and snapshot.server.metrics  # mixed kinds; ours has metrics
    row = snapshot.model("noop")
    assert row is not None and (row.members_present, row.members_healthy) == (2, 2)
    ours_part, mms_part = row.parts
    assert ours_part.requests_per_s is not None and ours_part.requests_per_s > 0
    assert mms_part.requests_per_s is None and not mms_part.metrics  # unavailable, never zero
    assert row.requests_per_s == ours_part.requests_per_s  # the fleet's sum counts what is known
    assert (row.workers_ready, row.workers_total) == (2, 2)
    assert snapshot.members[1].requests_per_s is None and snapshot.members[0].requests_per_s is not None
