"""Where the time went on the server: queue and inference time from its metrics, per level.

The metrics are scraped just before and just after each level; the difference of
the cumulative figures is what that level cost the server:

* **mmsctl** (``/metrics`` on the metrics port): the ``mmsctl_queue_latency_seconds``
  and ``mmsctl_inference_latency_seconds`` histograms (per request and per batch) and
  ``mmsctl_batch_size``;
* **TorchServe** (``metrics_mode=prometheus``): the cumulative microsecond counters
  ``ts_queue_latency_microseconds`` and ``ts_inference_latency_microseconds`` divided by
  ``ts_inference_requests_total`` (TorchServe's "inference" is the whole time it spent
  on a request, queue included);
* **MMS 1.1** has no metrics endpoint: no server-side figures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence

from mmsctl.errors import MmsError

if TYPE_CHECKING:  # pragma: no cover
    from mmsctl.client.contexts import Context
    from mmsctl.client.metrics import MetricsClient, Sample

__all__ = ["ServerProbe", "server_figures"]

_MODEL_LABELS = ("model", "model_name", "ModelName")


def _total(samples: Sequence["Sample"], names: Sequence[str], model: str) -> Optional[float]:
    values = [s.value for s in samples if s.name in names
              and any(s.labels.get(label) == model for label in _MODEL_LABELS)]
    return sum(values) if values else None


def _delta(before: Sequence["Sample"], after: Sequence["Sample"], names: Sequence[str], model: str) -> Optional[float]:
    a, b = _total(before, names, model), _total(after, names, model)
    if a is None and b is None:
        return None
    return (b or 0.0) - (a or 0.0)


def _mean(before: Sequence["Sample"], after: Sequence["Sample"], model: str, sums: Sequence[str],
          counts: Sequence[str], scale: float) -> Optional[float]:
    total, count = _delta(before, after, sums, model), _delta(before, after, counts, model)
    if total is None or not count or count <= 0:
        return None
    return round(total / count * scale, 3)


def server_figures(kind: str, model: str, before: Sequence["Sample"], after: Sequence["Sample"]) -> dict[str, float]:
    """``{"queue_ms", "inference_ms"[, "batch_size"]}`` for *model* between two scrapes (what is known)."""
    out: dict[str, Optional[float]] = {}
    if kind == "torchserve":
        requests = ("ts_inference_requests_total", "ts_inference_requests")
        out["queue_ms"] = _mean(before, after, model,
                                ("ts_queue_latency_microseconds", "ts_queue_latency_microseconds_total"),
                                requests, 0.001)
        out["inference_ms"] = _mean(before, after, model,
                                    ("ts_inference_latency_microseconds",
                                     "ts_inference_latency_microseconds_total"), requests, 0.001)
    else:  # mmsctl, or a server that publishes the same names
        out["queue_ms"] = _mean(before, after, model, ("mmsctl_queue_latency_seconds_sum",),
                                ("mmsctl_queue_latency_seconds_count",), 1000.0)
        out["inference_ms"] = _mean(before, after, model, ("mmsctl_inference_latency_seconds_sum",),
                                    ("mmsctl_inference_latency_seconds_count",), 1000.0)
        out["batch_size"] = _mean(before, after, model, ("mmsctl_batch_size_sum",),
                                  ("mmsctl_batch_size_count",), 1.0)
    return {k: v for k, v in out.items() if v is not None}


class ServerProbe:
    """Scrapes one server's metrics; a scrape that fails gives None (the sweep goes on without them)."""

    def __init__(self, context: "Context", kind: str, model: str) -> None:
        self.kind = kind
        self.model = model
        self.unavailable: Optional[str] = None
        self._client: Optional["MetricsClient"] = None
        if kind == "mms":
            self.unavailable = "MMS 1.1 publishes no metrics endpoint"
            return
        if not context.metrics_url:
            self.unavailable = f"context {context.name!r} has no metrics URL"
            return
        from mmsctl.client.metrics import MetricsClient

        self._client = MetricsClient(context, timeout=5.0, retries=0)

    def scrape(self) -> Optional[list["Sample"]]:
        if self._client is None:
            return None
        try:
            return self._client.fetch()
        except MmsError as exc:
            self.unavailable = f"metrics not available: {exc.message}"
            self.close()
            return None

    def figures(self, before: Optional[list["Sample"]], after: Optional[list["Sample"]]) -> dict[str, float]:
        if before is None or after is None:
            return {}
        return server_figures(self.kind, self.model, before, after)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
