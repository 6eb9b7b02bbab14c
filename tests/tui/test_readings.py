"""From raw server answers to model rows: our server's real /metrics, TorchServe's format, MMS's describe."""

from __future__ import annotations

import queue
from dataclasses import dataclass, field
from typing import Any

import pytest

from mmsctl.tui.readings import (
    MetricIndex,
    detect_kind,
    host_from_metrics,
    load_from_metrics,
    merge_row,
    row_from_describe,
)


# --------------------------------------------------------------------------- our server


@dataclass
class _State:
    value: str


@dataclass
class _Worker:
    id: str
    state: _State
    pid: int = 4242

    def memory(self) -> int:
        return 50 << 20


@dataclass
class _Model:
    workers: list[_Worker]
    queue: Any = field(default_factory=lambda: queue.Queue(maxsize=100))  # qsize/maxsize, as the server's

    def pending(self) -> int:  # the server's Model: queued plus sent ahead to a busy worker (none here)
        return int(self.queue.qsize())


@pytest.fixture
def server_metrics() -> Any:
    """The real metrics object of mmsctl's server, fed by hand instead of by traffic."""
    metrics_mod = pytest.importorskip("mmsctl.server.metrics")
    model = _Model([_Worker("w1", _State("READY")), _Worker("w2", _State("BUSY")),
                    _Worker("w3", _State("STARTING"))])
    for _ in range(3):
        model.queue.put_nowait(object())
    return metrics_mod.ServerMetrics(lambda: {"noop": model, "idle": _Model([])})


def test_mmsctl_server_metrics_become_rates_and_percentiles(server_metrics: Any) -> None:
    before = MetricIndex.parse(server_metrics.exposition().decode(), t=100.0)
    for _ in range(18):
        server_metrics.count_request("inference", "noop", 200)
        server_metrics.observe_inference("noop", 0.004, 1)
    for _ in range(2):
        server_metrics.count_request("inference", "noop", 503)
        server_metrics.observe_inference("noop", 0.2, 1)
    for _ in range(50):  # top's own describe calls must not count as traffic
        server_metrics.count_request("management", "noop", 200)
    after = MetricIndex.parse(server_metrics.exposition().decode(), t=102.0)

    assert detect_kind(after) == "mmsctl"
    loads = load_from_metrics("mmsctl", before, after, ["noop", "idle"])
    noop = loads["noop"]
    assert noop.requests_per_s == pytest.approx(10.0)
    assert noop.errors_per_s == pytest.approx(1.0)
    assert 0.0025 * 1000 < noop.p50_ms <= 0.005 * 1000
    assert 100 < noop.p99_ms <= 250
    assert noop.queue_depth == 3
    assert (noop.workers_ready, noop.workers_total) == (2, 3)
    # A model the server knows but nobody called: measured zero, not unknown.
    idle = loads["idle"]
    assert idle.requests_per_s == 0.0 and idle.errors_per_s == 0.0
    assert idle.p50_ms is None  # no requests, no latency

    host = host_from_metrics("mmsctl", after)
    assert host is not None and host.source == "server"
    assert host.memory_total and host.memory_used and host.memory_used <= host.memory_total


def test_first_scrape_has_no_rates(server_metrics: Any) -> None:
    server_metrics.count_request("inference", "noop", 200)
    only = MetricIndex.parse(server_metrics.exposition().decode(), t=1.0)
    loads = load_from_metrics("mmsctl", None, only, ["noop"])
    assert loads["noop"].requests_per_s is None
    assert loads["noop"].queue_depth == 3  # gauges need only one scrape


# --------------------------------------------------------------------------- TorchServe

TS_TEXT = """\
# HELP ts_inference_requests_total Total number of inference requests.
# TYPE ts_inference_requests_total counter
ts_inference_requests_total{model_name="noop",model_version="default",hostname="h",} {req}
# HELP ts_inference_latency_microseconds Cumulative inference duration in microseconds
# TYPE ts_inference_latency_microseconds counter
ts_inference_latency_microseconds{model_name="noop",model_version="default",hostname="h",} {lat}
# HELP ts_queue_latency_microseconds Cumulative queue duration in microseconds
# TYPE ts_queue_latency_microseconds counter
ts_queue_latency_microseconds{model_name="noop",model_version="default",hostname="h",} 10.0
# HELP CPUUtilization Torchserve prometheus gauge metric with unit: Percent
# TYPE CPUUtilization gauge
CPUUtilization{Level="Host",Hostname="h",} 25.0
# HELP MemoryUsed Torchserve prometheus gauge metric with unit: Megabytes
# TYPE MemoryUsed gauge
MemoryUsed{Level="Host",Hostname="h",} 1024.0
# HELP MemoryAvailable Torchserve prometheus gauge metric with unit: Megabytes
# TYPE MemoryAvailable gauge
MemoryAvailable{Level="Host",Hostname="h",} 3072.0
"""


def _ts(req: float, lat: float, t: float) -> Any:
    return MetricIndex.parse(TS_TEXT.replace("{req}", str(req)).replace("{lat}", str(lat)), t)


def test_torchserve_gives_rate_and_mean_but_no_percentiles() -> None:
    before, after = _ts(10.0, 50_000.0, 0.0), _ts(30.0, 90_000.0, 4.0)
    assert detect_kind(after) == "torchserve"
    noop = load_from_metrics("torchserve", before, after, ["noop"])["noop"]
    assert noop.requests_per_s == pytest.approx(5.0)
    assert noop.mean_ms == pytest.approx(2.0)  # 40 000 us over 20 requests
    assert noop.p50_ms is None and noop.p99_ms is None  # TorchServe has no histograms
    assert noop.errors_per_s is None  # per-model errors are not published
    assert noop.queue_depth is None
    host = host_from_metrics("torchserve", after)
    assert host is not None and host.cpu_percent == 25.0
    assert host.memory_percent == pytest.approx(25.0)


# --------------------------------------------------------------------------- describe (MMS 1.1 / TorchServe)

MMS_DESCRIBE = {
    "modelName": "squeezenet",
    "modelVersion": "1.0",
    "modelUrl": "squeezenet.mar",
    "runtime": "python",
    "minWorkers": 2,
    "maxWorkers": 2,
    "batchSize": 1,
    "maxBatchDelay": 100,
    "loadedAtStartup": False,
    "workers": [
        {"id": "9000", "startTime": "2024-05-01T10:00:00.000Z", "status": "READY", "gpu": False,
         "memoryUsage": 212992000},
        {"id": "9001", "startTime": "2024-05-01T10:00:01.000Z", "status": "UNLOADING", "gpu": False,
         "memoryUsage": 0},
    ],
}


def test_mms_describe_without_metrics_is_unavailable_not_zero() -> None:
    row = merge_row(row_from_describe(MMS_DESCRIBE), None, metrics=False)
    assert (row.workers_ready, row.workers_total) == (1, 2)
    assert (row.min_workers, row.max_workers, row.batch_size) == (2, 2, 1)
    assert row.requests_per_s is None and row.p99_ms is None and row.queue_depth is None
    assert row.metrics is False
    assert row.workers[0].memory == 212992000 and row.workers[0].pid is None
    assert detect_kind(None, describe_is_list=False) == "mms"


def test_describe_queue_status_of_our_server_is_used() -> None:
    data = dict(MMS_DESCRIBE, jobQueueStatus={"remainingCapacity": 90, "pendingRequests": 10})
    assert row_from_describe(data).queue_depth == 10.0
