"""Prometheus metrics of one server, plus MMS-style metric lines for the log.

Counters and histograms are updated as requests pass; queue depth, workers by
state, worker memory and host CPU/memory are read when ``/metrics`` is scraped,
so they are never stale. Each server has its own registry (tests run several).
"""

from __future__ import annotations

import socket
import time
from typing import Any, Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import GaugeMetricFamily

__all__ = ["ServerMetrics"]

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class _LiveCollector:
    """Reads queue depth, workers and memory from the model manager at scrape time."""

    def __init__(self, models: Callable[[], dict[str, Any]]) -> None:
        self._models = models

    def collect(self) -> Iterator[GaugeMetricFamily]:
        import psutil

        depth = GaugeMetricFamily("mmsctl_queue_depth", "Requests waiting for a worker", labels=["model"])
        capacity = GaugeMetricFamily("mmsctl_queue_capacity", "Queue size limit", labels=["model"])
        workers = GaugeMetricFamily("mmsctl_workers", "Workers by state", labels=["model", "state"])
        memory = GaugeMetricFamily("mmsctl_worker_memory_bytes", "Worker resident memory",
                                   labels=["model", "worker"])
        for name, model in sorted(self._models().items()):
            depth.add_metric([name], model.queue.qsize())
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


class ServerMetrics:
    """The metrics of one server process."""

    def __init__(self, models: Callable[[], dict[str, Any]]) -> None:
        disable_created_metrics()  # the *_created series only double the scrape size
        self.registry = CollectorRegistry()
        self.requests = Counter("mmsctl_requests", "HTTP requests by API, model and status code",
                                ["api", "model", "code"], registry=self.registry)
        self.inference_latency = Histogram("mmsctl_inference_latency_seconds",
                                           "Time a worker took for a batch", ["model"],
                                           buckets=_LATENCY_BUCKETS, registry=self.registry)
        self.queue_latency = Histogram("mmsctl_queue_latency_seconds",
                                       "Time a request waited for a worker", ["model"],
                                       buckets=_LATENCY_BUCKETS, registry=self.registry)
        self.batch_size = Histogram("mmsctl_batch_size", "Requests per batch", ["model"],
                                    buckets=(1, 2, 4, 8, 16, 32, 64), registry=self.registry)
        self.registry.register(_LiveCollector(models))
        self._status_counts = {"2XX": 0, "4XX": 0, "5XX": 0}
        self._hostname = socket.gethostname()

    def count_request(self, api: str, model: str, code: int) -> None:
        self.requests.labels(api, model, str(code)).inc()
        bucket = "2XX" if code < 300 else "4XX" if code < 500 else "5XX"
        self._status_counts[bucket] += 1

    def observe_queue(self, model: str, seconds: float) -> None:
        self.queue_latency.labels(model).observe(max(seconds, 0.0))

    def observe_inference(self, model: str, seconds: float, size: int) -> None:
        self.inference_latency.labels(model).observe(seconds)
        self.batch_size.labels(model).observe(size)

    def exposition(self) -> bytes:
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
            ("DiskAvailable", "Gigabytes", disk.free / 2**30),
            ("DiskUtilization", "Percent", disk.percent),
        ]
        for bucket, count in self._status_counts.items():
            values.append((f"Requests{bucket}", "Count", count))
            self._status_counts[bucket] = 0
        return [f"{name}.{unit}:{value:.1f}|#Level:Host|#hostname:{self._hostname},timestamp:{ts}"
                for name, unit, value in values]
