"""Turn a server's raw answers (describe JSON, Prometheus samples) into :mod:`mmsctl.tui.snapshot` rows.

Three kinds of server speak the same management API but publish different metrics:

* **mmsctl** - ``/metrics`` with per-model request counters (by status code),
  latency histograms, queue depth, workers by state and host CPU/memory;
* **TorchServe** - with ``metrics_mode=prometheus``: ``ts_inference_requests_total``
  and microsecond *sums* (``ts_inference_latency_microseconds``,
  ``ts_queue_latency_microseconds``), so a mean latency but no percentiles, plus
  host ``CPUUtilization``/``MemoryUsed``/``MemoryAvailable``;
* **MMS 1.1** - no metrics endpoint at all: only what describe says.

Everything here is pure (no I/O) so it is tested with recorded text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Sequence

from mmsctl.tui.snapshot import (
    HostStats,
    Increase,
    ModelRow,
    ServerKind,
    WorkerRow,
    bucket_increase,
    mean_from_counters,
    quantile,
    rate,
)

if TYPE_CHECKING:  # pragma: no cover
    from mmsctl.client.metrics import Scrape

__all__ = [
    "MetricIndex",
    "ModelLoad",
    "detect_kind",
    "host_from_metrics",
    "load_from_metrics",
    "merge_row",
    "row_from_describe",
]

_MODEL_LABELS = ("model", "model_name", "ModelName")
_VERSION_LABELS = ("version", "model_version")


def _label(labels: Mapping[str, str], names: Sequence[str]) -> Optional[str]:
    for name in names:
        value = labels.get(name)
        if value:
            return value
    return None


@dataclass
class MetricIndex:
    """One scrape, indexed by sample name: ``{name: [(labels, value), ...]}``."""

    t: float
    samples: dict[str, list[tuple[dict[str, str], float]]] = field(default_factory=dict)
    families: set[str] = field(default_factory=set)  # declared names, even with no samples yet

    def names(self) -> Iterable[str]:
        return self.samples.keys()

    def get(self, name: str) -> list[tuple[dict[str, str], float]]:
        return self.samples.get(name, [])

    def first_present(self, names: Sequence[str]) -> Optional[str]:
        for name in names:
            if name in self.samples or name in self.families:
                return name
        return None

    @classmethod
    def from_scrape(cls, scrape: "Scrape", t: float) -> "MetricIndex":
        """Index one scrape (the client's parse of the Prometheus text) taken at *t*."""
        index = cls(t)
        for family, kind in scrape.families.items():
            index.families.add(family)
            if kind == "counter":
                index.families.add(family + "_total")
            elif kind == "histogram":
                index.families.add(family + "_bucket")
        for sample in scrape.samples:
            index.samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
        return index

    @classmethod
    def parse(cls, text: str, t: float) -> "MetricIndex":
        """Index Prometheus text taken at *t* (raises the client's ApiError for text that is not)."""
        from mmsctl.client.metrics import parse_scrape

        return cls.from_scrape(parse_scrape(text), t)


def detect_kind(index: Optional[MetricIndex], describe_is_list: Optional[bool] = None) -> ServerKind:
    """Which server this is, from its metric names (or, without metrics, describe's shape)."""
    if index is not None:
        for name in list(index.names()) + sorted(index.families):
            if name.startswith(("ts_", "Requests2XX")):
                return "torchserve"
            if name.startswith("mmsctl_"):
                return "mmsctl"
    if describe_is_list is True:
        return "torchserve"
    if describe_is_list is False:
        return "mms"
    return "unknown"


# --------------------------------------------------------------------------- metric names


@dataclass(frozen=True)
class _Names:
    """Where each number lives for one kind of server (first name present wins)."""

    requests: tuple[str, ...] = ()
    latency_hist: tuple[str, ...] = ()  # base name; _bucket/_sum/_count appended
    latency_scale_ms: float = 1000.0  # histogram unit -> milliseconds
    latency_sum_counter: tuple[str, ...] = ()  # TorchServe: cumulative microseconds
    latency_sum_scale_ms: float = 0.001
    queue_depth: tuple[str, ...] = ()
    workers: tuple[str, ...] = ()  # gauge with a state label
    code_labels: tuple[str, ...] = ("code", "status")
    #: Label values a request sample must have where the label exists (mmsctl counts every API).
    request_filter: tuple[tuple[str, str], ...] = ()


_MMSCTL = _Names(
    requests=("mmsctl_requests_total", "mmsctl_inference_requests_total"),
    latency_hist=(
        "mmsctl_inference_latency_seconds",
        "mmsctl_request_latency_seconds",
        "mmsctl_request_duration_seconds",
    ),
    queue_depth=("mmsctl_queue_depth", "mmsctl_queue_size", "mmsctl_pending_requests"),
    workers=("mmsctl_workers",),
    request_filter=(("api", "inference"),),
)

_TORCHSERVE = _Names(
    requests=("ts_inference_requests_total",),
    latency_sum_counter=("ts_inference_latency_microseconds_total", "ts_inference_latency_microseconds"),
)


def _names_for(kind: ServerKind) -> Optional[_Names]:
    return {"mmsctl": _MMSCTL, "torchserve": _TORCHSERVE}.get(kind)


@dataclass
class ModelLoad:
    """What the metrics say about one model between two scrapes (``None`` = unknown)."""

    requests_per_s: Optional[float] = None
    errors_per_s: Optional[float] = None
    p50_ms: Optional[float] = None
    p99_ms: Optional[float] = None
    mean_ms: Optional[float] = None
    queue_depth: Optional[float] = None
    workers_ready: Optional[int] = None
    workers_total: Optional[int] = None
    latency: Optional[Increase] = None  # the interval's latency histogram, in milliseconds


def _per_model_sum(index: MetricIndex, name: Optional[str], *, errors_only: bool = False,
                   code_labels: Sequence[str] = (),
                   where: Sequence[tuple[str, str]] = ()) -> dict[str, float]:
    out: dict[str, float] = {}
    if name is None:
        return out
    for labels, value in index.get(name):
        model = _label(labels, _MODEL_LABELS)
        if model is None or any(k in labels and labels[k] != v for k, v in where):
            continue
        if errors_only:
            code = _label(labels, code_labels)
            if code is None or code.startswith("2"):
                continue
        out[model] = out.get(model, 0.0) + value
    return out


def _per_model_buckets(index: MetricIndex, name: Optional[str]) -> dict[str, dict[float, float]]:
    out: dict[str, dict[float, float]] = {}
    if name is None:
        return out
    for labels, value in index.get(name + "_bucket"):
        model = _label(labels, _MODEL_LABELS)
        le = labels.get("le")
        if model is None or le is None:
            continue
        bound = math.inf if le in ("+Inf", "Inf", "inf") else float(le)
        buckets = out.setdefault(model, {})
        buckets[bound] = buckets.get(bound, 0.0) + value
    return out


class _Loads(dict[str, ModelLoad]):
    """Per-model loads, made on first mention."""

    def of(self, model: str) -> ModelLoad:
        return self.setdefault(model, ModelLoad())


@dataclass(frozen=True)
class _Scrapes:
    """Two scrapes of one server (``previous`` is None on the first poll) and its metric names."""

    names: _Names
    previous: Optional[MetricIndex]
    current: MetricIndex

    @property
    def seconds(self) -> float:
        return self.current.t - self.previous.t if self.previous is not None else 0.0

    def sums(self, name: Optional[str], **options: Any) -> tuple[dict[str, float], dict[str, float]]:
        """(previous, current) per-model sums of *name* (previous empty on the first poll)."""
        before = _per_model_sum(self.previous, name, **options) if self.previous is not None else {}
        return before, _per_model_sum(self.current, name, **options)


def load_from_metrics(
    kind: ServerKind,
    previous: Optional[MetricIndex],
    current: MetricIndex,
    models: Iterable[str] = (),
) -> dict[str, ModelLoad]:
    """Per-model rates, percentiles, queue depth and worker counts from two scrapes.

    *models* are the names the management API listed: a model the server counts
    requests for but that has no sample yet had no traffic, so its rate is 0.
    """
    names = _names_for(kind)
    if names is None:
        return {}
    scrapes = _Scrapes(names, previous, current)
    loads = _Loads()
    requests = _request_rates(loads, scrapes, models, errors=kind == "mmsctl")
    _latency_from_histogram(loads, scrapes)
    _latency_from_sums(loads, scrapes, requests)
    for model, value in _per_model_sum(current, current.first_present(names.queue_depth)).items():
        loads.of(model).queue_depth = value
    _worker_counts(loads, current, current.first_present(names.workers))
    return dict(loads)


def _request_rates(loads: _Loads, scrapes: _Scrapes, models: Iterable[str], *, errors: bool,
                   ) -> tuple[dict[str, float], dict[str, float]]:
    """Requests (and, on our server, errors) per second; the request counts, for mean latencies."""
    names, previous = scrapes.names, scrapes.previous
    req_name = scrapes.current.first_present(names.requests)
    if req_name is not None and previous is not None:
        for model in models:  # listed, counted, but no sample yet: no traffic
            loads.of(model).requests_per_s = 0.0
            if errors:
                loads.of(model).errors_per_s = 0.0
    where = names.request_filter
    prev_req, cur_req = scrapes.sums(req_name, where=where)
    prev_err, cur_err = scrapes.sums(req_name, errors_only=True, code_labels=names.code_labels, where=where)
    for model, value in cur_req.items():
        row = loads.of(model)
        row.requests_per_s = rate(prev_req.get(model, 0.0) if previous else None, value, scrapes.seconds)
        if errors and previous is not None:
            row.errors_per_s = rate(prev_err.get(model, 0.0), cur_err.get(model, 0.0), scrapes.seconds)
    return prev_req, cur_req


def _latency_from_histogram(loads: _Loads, scrapes: _Scrapes) -> None:
    """p50, p99 and mean from a latency histogram (our server)."""
    names, previous, current = scrapes.names, scrapes.previous, scrapes.current
    hist = current.first_present([n + "_bucket" for n in names.latency_hist])
    if hist is None:
        return
    base = hist[: -len("_bucket")]
    cur_b = _per_model_buckets(current, base)
    prev_b = _per_model_buckets(previous, base) if previous is not None else {}
    prev_sum, cur_sum = scrapes.sums(base + "_sum")
    prev_cnt, cur_cnt = scrapes.sums(base + "_count")
    for model, buckets in cur_b.items():
        row = loads.of(model)
        before = prev_b.get(model, {}) if previous is not None else None
        increase = bucket_increase(before, buckets)
        if increase is not None:
            row.latency = tuple((bound * names.latency_scale_ms, count) for bound, count in increase)
        row.p50_ms, row.p99_ms = quantile(0.5, row.latency), quantile(0.99, row.latency)
        mean = None
        if previous is not None:
            mean = mean_from_counters(prev_sum.get(model, 0.0), cur_sum.get(model),
                                      prev_cnt.get(model, 0.0), cur_cnt.get(model))
        row.mean_ms = None if mean is None else mean * names.latency_scale_ms


def _latency_from_sums(loads: _Loads, scrapes: _Scrapes, requests: tuple[dict[str, float], dict[str, float]]) -> None:
    """The mean from a cumulative latency counter divided by the request count (TorchServe)."""
    sum_name = scrapes.current.first_present(scrapes.names.latency_sum_counter)
    if sum_name is None or scrapes.previous is None:
        return
    prev_req, cur_req = requests
    prev_sum, cur_sum = scrapes.sums(sum_name)
    for model, total in cur_sum.items():
        mean = mean_from_counters(prev_sum.get(model, 0.0), total, prev_req.get(model, 0.0), cur_req.get(model))
        loads.of(model).mean_ms = None if mean is None else mean * scrapes.names.latency_sum_scale_ms


def _worker_counts(loads: _Loads, current: MetricIndex, name: Optional[str]) -> None:
    """Workers by state; a busy worker is up and serving, so it counts as ready."""
    if name is None:
        return
    for labels, value in current.get(name):
        model = _label(labels, _MODEL_LABELS)
        if model is None:
            continue
        row = loads.of(model)
        state = (labels.get("state") or labels.get("status") or "").upper()
        row.workers_total = (row.workers_total or 0) + int(value)
        if state in ("READY", "BUSY"):
            row.workers_ready = (row.workers_ready or 0) + int(value)
        elif row.workers_ready is None:
            row.workers_ready = 0


def host_from_metrics(kind: ServerKind, index: Optional[MetricIndex]) -> Optional[HostStats]:
    """Host CPU/memory from the server's own metrics, where it publishes them."""
    if index is None:
        return None

    def gauge(*names: str) -> Optional[float]:
        name = index.first_present(names)
        if name is None:
            return None
        values = index.get(name)
        return values[0][1] if values else None

    if kind == "torchserve":
        cpu = gauge("CPUUtilization")
        used_mb = gauge("MemoryUsed")
        avail_mb = gauge("MemoryAvailable")
        if cpu is None and used_mb is None:
            return None
        used = int(used_mb * 1024 * 1024) if used_mb is not None else None
        total = int((used_mb + avail_mb) * 1024 * 1024) if used_mb is not None and avail_mb is not None else None
        return HostStats(cpu, used, total, "server")
    if kind == "mmsctl":
        cpu = gauge("mmsctl_host_cpu_percent", "mmsctl_host_cpu_utilization_percent")
        used_b = gauge("mmsctl_host_memory_used_bytes")
        total_b = gauge("mmsctl_host_memory_total_bytes")
        available_b = gauge("mmsctl_host_memory_available_bytes")
        if total_b is None and used_b is not None and available_b is not None:
            total_b = used_b + available_b
        if cpu is None and used_b is None:
            return None
        return HostStats(cpu, int(used_b) if used_b is not None else None,
                         int(total_b) if total_b is not None else None, "server")
    return None


# --------------------------------------------------------------------------- describe


def _int(value: Any) -> Optional[int]:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _worker(data: Mapping[str, Any]) -> WorkerRow:
    gpu = data.get("gpu")
    pid = _int(data.get("pid"))
    return WorkerRow(
        id=str(data.get("id", "?")),
        pid=pid if pid is not None and pid > 0 else None,  # TorchServe says -1 before the process exists
        status=str(data.get("status", "UNKNOWN")),
        start_time=data.get("startTime"),
        memory=_int(data.get("memoryUsage")),
        gpu=bool(gpu) if gpu is not None else None,
    )


def row_from_describe(data: Mapping[str, Any]) -> ModelRow:
    """A model row from one describe entry (MMS, TorchServe and mmsctl share the shape)."""
    workers = tuple(_worker(w) for w in data.get("workers") or () if isinstance(w, Mapping))
    queue = data.get("jobQueueStatus") or data.get("queueStatus") or data.get("queue") or {}
    pending = queue.get("pendingRequests") if isinstance(queue, Mapping) else None
    return ModelRow(
        name=str(data.get("modelName", "?")),
        version=data.get("modelVersion"),
        workers_ready=sum(1 for w in workers if w.ready),
        workers_total=len(workers),
        min_workers=_int(data.get("minWorkers")),
        max_workers=_int(data.get("maxWorkers")),
        batch_size=_int(data.get("batchSize")),
        max_batch_delay=_int(data.get("maxBatchDelay")),
        queue_depth=float(pending) if pending is not None else None,
        status=data.get("status"),
        url=data.get("modelUrl"),
        workers=workers,
    )


def merge_row(base: ModelRow, load: Optional[ModelLoad], *, metrics: bool) -> ModelRow:
    """Describe data overlaid with live metrics; metrics win where they know more."""
    from dataclasses import replace

    if load is None:
        return replace(base, metrics=metrics)
    return replace(
        base,
        metrics=metrics,
        requests_per_s=load.requests_per_s,
        errors_per_s=load.errors_per_s,
        p50_ms=load.p50_ms,
        p99_ms=load.p99_ms,
        mean_ms=load.mean_ms,
        latency=load.latency,
        queue_depth=load.queue_depth if load.queue_depth is not None else base.queue_depth,
        workers_ready=load.workers_ready if load.workers_ready is not None else base.workers_ready,
        workers_total=load.workers_total if load.workers_total is not None else base.workers_total,
    )

