"""Prometheus metrics of one server, plus MMS-style metric lines for the log.

Counters and histograms are plain ints and lists updated as requests pass (no prometheus_client call
per request) and turned into metric families when ``/metrics`` is scraped; queue depth, workers by
state, worker memory and host CPU/memory are read then too, so they are never stale. Each server has
its own registry (tests run several). prometheus_client is imported at the first scrape, not at
start (a ``serve start`` that nobody scrapes never pays for it; docs/performance.md).
"""

from __future__ import annotations

import bisect
import socket
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric

__all__ = ["ServerMetrics"]

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64)


class _Histogram:
    """One labelled histogram as plain lists: a count per bucket (the last one is +Inf) and the sum."""

    __slots__ = ("bounds", "series")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.series: dict[str, list[float]] = {}  # label -> [count per bucket..., sum]

    def observe(self, label: str, value: float) -> None:
        counts = self.series.get(label)
        if counts is None:
            counts = self.series[label] = [0.0] * (len(self.bounds) + 2)
        counts[bisect.bisect_left(self.bounds, value)] += 1
        counts[-1] += value

    def family(self, name: str, documentation: str, label: str) -> HistogramMetricFamily:
        from prometheus_client.core import HistogramMetricFamily

        family = HistogramMetricFamily(name, documentation, labels=[label])
        for value, counts in sorted(self.series.items()):
            cumulative, buckets = 0.0, []
            for bound, count in zip((*self.bounds, float("inf")), counts):
                cumulative += count
                buckets.append((_le(bound), cumulative))
            family.add_metric([value], buckets, counts[-1])
        return family


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(bound))


class _LiveCollector:
    """Reads queue depth, workers and memory from the model manager at scrape time."""

    def __init__(self, models: Callable[[], dict[str, Any]]) -> None:
        self._models = models

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from prometheus_client.core import GaugeMetricFamily

        import psutil

        depth = GaugeMetricFamily("mmsctl_queue_depth", "Requests waiting for a worker", labels=["model"])
        capacity = GaugeMetricFamily("mmsctl_queue_capacity", "Queue size limit", labels=["model"])
        workers = GaugeMetricFamily("mmsctl_workers", "Workers by state", labels=["model", "state"])
        memory = GaugeMetricFamily("mmsctl_worker_memory_bytes", "Worker resident memory",
                                   labels=["model", "worker"])
        for name, model in sorted(self._models().items()):
            depth.add_metric([name], model.pending())
            capacity.add_metric([name], model.queue.maxsize)
            counts: dict[str, int] = {"STARTING": 0, "READY": 0, "BUSY": 0}
            for worker in model.workers:
                counts[worker.state.value] = counts.get(worker.state.value, 0) + 1
                if worker.pid:
                    memory.add_metric([name, worker.id], worker.memory())
            for state, count in counts.items():
                workers.add_metric([name, state], count)
        yield depth
        yield capacity
        yield workers
        yield memory
        vm = psutil.virtual_memory()
        host = GaugeMetricFamily("mmsctl_host_cpu_percent", "Host CPU utilisation")
        host.add_metric([], psutil.cpu_percent(interval=None))
        yield host
        used = GaugeMetricFamily("mmsctl_host_memory_used_bytes", "Host memory in use")
        used.add_metric([], vm.total - vm.available)
        yield used
        avail = GaugeMetricFamily("mmsctl_host_memory_available_bytes", "Host memory available")
        avail.add_metric([], vm.available)
        yield avail
        proc = GaugeMetricFamily("mmsctl_frontend_memory_bytes", "Front-end process resident memory")
        proc.add_metric([], psutil.Process().memory_info().rss)
        yield proc


class _CountsCollector:
    """The request counter and the histograms, as metric families at scrape time."""

    def __init__(self, metrics: "ServerMetrics") -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily

        m = self._metrics
        requests = CounterMetricFamily("mmsctl_requests", "HTTP requests by API, model and status code",
                                       labels=["api", "model", "code"])
        for (api, model, code), count in sorted(m.requests.items()):
            requests.add_metric([api, model, str(code)], count)
        yield requests
        yield m.inference_latency.family("mmsctl_inference_latency_seconds", "Time a worker took for a batch",
                                         "model")
        yield m.queue_latency.family("mmsctl_queue_latency_seconds", "Time a request waited for a worker", "model")
        yield m.batch_size.family("mmsctl_batch_size", "Requests per batch", "model")


class ServerMetrics:
    """The metrics of one server process."""

    def __init__(self, models: Callable[[], dict[str, Any]]) -> None:
        self._models = models
        self._registry: Optional[CollectorRegistry] = None
        self.requests: dict[tuple[str, str, int], int] = {}  # (api, model, code) -> count
        self.inference_latency = _Histogram(_LATENCY_BUCKETS)
        self.queue_latency = _Histogram(_LATENCY_BUCKETS)
        self.batch_size = _Histogram(_BATCH_BUCKETS)
        self._status_counts = {"2XX": 0, "4XX": 0, "5XX": 0}
        self._hostname = socket.gethostname()

    def count_request(self, api: str, model: str, code: int) -> None:
        key = (api, model, code)
        self.requests[key] = self.requests.get(key, 0) + 1
        bucket = "2XX" if code < 300 else "4XX" if code < 500 else "5XX"
        self._status_counts[bucket] += 1

    def observe_queue(self, model: str, seconds: float) -> None:
        self.queue_latency.observe(model, max(seconds, 0.0))

    def observe_inference(self, model: str, seconds: float, size: int) -> None:
        self.inference_latency.observe(model, seconds)
        self.batch_size.observe(model, size)

    @property
    def registry(self) -> CollectorRegistry:
        """This server's registry, made (and prometheus_client imported) on first use."""
        if self._registry is None:
            from prometheus_client import CollectorRegistry, disable_created_metrics

            disable_created_metrics()  # the *_created series only double the scrape size
            registry = CollectorRegistry()
            registry.register(_CountsCollector(self))
            registry.register(_LiveCollector(self._models))
            self._registry = registry
        return self._registry

    def exposition(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)

    def log_lines(self) -> list[str]:
        """MMS-style metric lines (``Name.Unit:value|#Level:Host|#hostname:h,timestamp:t``)."""
        import psutil

        ts = int(time.time())
        vm = psutil.virtual_memory()
        disk = psutil.disk_usage("/")
        values = [
            ("CPUUtilization", "Percent", psutil.cpu_percent(interval=None)),
            ("MemoryUsed", "Megabytes", (vm.total - vm.available) / 2**20),
            ("MemoryAvailable", "Megabytes", vm.available / 2**20),
            ("MemoryUtilization", "Percent", vm.percent),
            ("DiskUsage", "Gigabytes", disk.used / 2**30),
            ("DiskAvailable", "Gigabytes", disk.free / 2**30),
            ("DiskUtilization", "Percent", disk.percent),
        ]
        for bucket, count in self._status_counts.items():
            values.append((f"Requests{bucket}", "Count", count))
            self._status_counts[bucket] = 0
        return [f"{name}.{unit}:{value:.1f}|#Level:Host|#hostname:{self._hostname},timestamp:{ts}"
                for name, unit, value in values]
