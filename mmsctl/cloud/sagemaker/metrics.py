"""An endpoint's load from CloudWatch (namespace ``AWS/SageMaker``, dimensions EndpointName and VariantName):
invocations, errors and latency over a window, in one GetMetricData call.

SageMaker publishes these once a minute ("Amazon SageMaker AI metrics in Amazon CloudWatch"): ``Invocations``,
``Invocation4XXErrors`` and ``Invocation5XXErrors`` are counts (Sum), ``ModelLatency`` and ``OverheadLatency``
are microseconds (Average from GetMetricData; the percentiles p50/p99, which CloudWatch computes from the
samples, from GetMetricStatistics' ExtendedStatistics). A window without traffic has no data points: its
rates are 0 and its latencies unknown (None), never 0.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from typing import Any, Optional

from mmsctl.cloud.sagemaker.spec import VARIANT

__all__ = ["Load", "load"]

NAMESPACE = "AWS/SageMaker"
#: (query id, metric, statistic)
_QUERIES = (("invocations", "Invocations", "Sum"), ("errors4xx", "Invocation4XXErrors", "Sum"),
            ("errors5xx", "Invocation5XXErrors", "Sum"), ("latency_avg", "ModelLatency", "Average"),
            ("overhead_avg", "OverheadLatency", "Average"))
_PERCENTILES = ("p50", "p99")


@dataclass(frozen=True)
class Load:
    """What the endpoint served in a window of *minutes*."""

    minutes: int
    invocations: float
    errors_4xx: float
    errors_5xx: float
    #: Milliseconds (CloudWatch has microseconds); None without data points.
    latency_avg_ms: Optional[float]
    latency_p50_ms: Optional[float]
    latency_p99_ms: Optional[float]
    overhead_avg_ms: Optional[float]

    @property
    def per_second(self) -> float:
        return self.invocations / (self.minutes * 60.0)

    @property
    def errors_per_second(self) -> float:
        return (self.errors_4xx + self.errors_5xx) / (self.minutes * 60.0)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["per_second"] = round(self.per_second, 4)
        return data


def _query(endpoint: str, qid: str, metric: str, stat: str, period: int) -> dict[str, Any]:
    dimensions = [{"Name": "EndpointName", "Value": endpoint}, {"Name": "VariantName", "Value": VARIANT}]
    return {"Id": qid, "ReturnData": True, "MetricStat": {
        "Metric": {"Namespace": NAMESPACE, "MetricName": metric, "Dimensions": dimensions},
        "Period": period, "Stat": stat}}


def load(aws: Any, endpoint: str, *, minutes: int = 60, now: Optional[dt.datetime] = None) -> Load:
    """The endpoint's load over the last *minutes* (1 to 1440): one period, the whole window, per statistic."""
    minutes = max(1, min(minutes, 1440))
    end = (now or dt.datetime.now(dt.timezone.utc)).replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    start = end - dt.timedelta(minutes=minutes)
    answer = aws.call("cloudwatch", "get_metric_data", StartTime=start, EndTime=end,
                      MetricDataQueries=[_query(endpoint, q, m, s, minutes * 60) for q, m, s in _QUERIES])
    series = {r["Id"]: [float(v) for v in r.get("Values") or [] if v is not None]
              for r in answer.get("MetricDataResults") or []}

    def ms(qid: str) -> Optional[float]:  # one period, the window: its one value, if any
        values = series.get(qid, [])
        return values[0] / 1000.0 if values else None

    percentiles = _percentiles(aws, endpoint, start, end, minutes * 60)
    return Load(minutes, sum(series.get("invocations", [])), sum(series.get("errors4xx", [])),
                sum(series.get("errors5xx", [])), ms("latency_avg"), percentiles.get("p50"), percentiles.get("p99"),
                ms("overhead_avg"))


def _percentiles(aws: Any, endpoint: str, start: dt.datetime, end: dt.datetime, period: int) -> dict[str, float]:
    """ModelLatency's p50 and p99 over the window, in milliseconds (those CloudWatch gives)."""
    dimensions = [{"Name": "EndpointName", "Value": endpoint}, {"Name": "VariantName", "Value": VARIANT}]
    points = aws.call("cloudwatch", "get_metric_statistics", Namespace=NAMESPACE, MetricName="ModelLatency",
                      Dimensions=dimensions, StartTime=start, EndTime=end, Period=period,
                      ExtendedStatistics=list(_PERCENTILES)).get("Datapoints") or []
    found = (points[-1].get("ExtendedStatistics") or {}) if points else {}
    return {k: float(v) / 1000.0 for k, v in found.items() if k in _PERCENTILES and v is not None}
