"""The CloudWatch alarms that guard an update with a canary: SageMaker rolls the endpoint back when one of them
is in ALARM during a baking period ("Auto-Rollback Configuration and Monitoring", SageMaker developer guide).

* ``mmsctl-sagemaker-NAME-errors``: any ``Invocation5XXErrors`` of the variant in a minute (the container
  answered 5xx, or did not answer);
* ``mmsctl-sagemaker-NAME-latency`` (``--max-latency MS``): ``ModelLatency`` p99 over the ceiling for two
  minutes in a row (the metric is in microseconds).

Both watch the endpoint's variant across the old and the new fleet; missing data (no traffic) is not a breach.
"""

from __future__ import annotations

from typing import Any, Optional

from mmsctl.cloud.aws.session import AwsSession
from mmsctl.cloud.sagemaker.resources import sagemaker_tags
from mmsctl.cloud.sagemaker.spec import VARIANT

__all__ = ["alarm_names", "alarms_of", "delete_alarms", "ensure_alarms"]

NAMESPACE = "AWS/SageMaker"


def alarm_names(endpoint: str, latency: bool) -> tuple[str, ...]:
    names = [f"mmsctl-sagemaker-{endpoint}-errors"]
    if latency:
        names.append(f"mmsctl-sagemaker-{endpoint}-latency")
    return tuple(names)


def _alarms(endpoint: str, max_latency_ms: Optional[float]) -> list[dict[str, Any]]:
    dimensions = [{"Name": "EndpointName", "Value": endpoint}, {"Name": "VariantName", "Value": VARIANT}]
    common = {"Namespace": NAMESPACE, "Dimensions": dimensions, "Period": 60, "TreatMissingData": "notBreaching",
              "ComparisonOperator": "GreaterThanThreshold"}
    found = [{"AlarmName": alarm_names(endpoint, False)[0], "MetricName": "Invocation5XXErrors", "Statistic": "Sum",
              "Threshold": 0.0, "EvaluationPeriods": 1, "DatapointsToAlarm": 1,
              "AlarmDescription": f"mmsctl sagemaker {endpoint}: the model answered 5xx (rolls an update back)",
              **common}]
    if max_latency_ms is not None:
        found.append({"AlarmName": alarm_names(endpoint, True)[1], "MetricName": "ModelLatency",
                      "ExtendedStatistic": "p99", "Threshold": max_latency_ms * 1000.0, "EvaluationPeriods": 2,
                      "DatapointsToAlarm": 2, "Unit": "Microseconds",
                      "AlarmDescription": f"mmsctl sagemaker {endpoint}: p99 model latency over {max_latency_ms:g} ms",
                      **common})
    return found


def ensure_alarms(aws: AwsSession, endpoint: str, max_latency_ms: Optional[float]) -> tuple[str, ...]:
    """The alarms (PutMetricAlarm creates or replaces one); the names an update's rollback watches."""
    tags = [{"Key": k, "Value": v} for k, v in sagemaker_tags(endpoint, "rollback-alarm").items()]
    wanted = _alarms(endpoint, max_latency_ms)
    for alarm in wanted:
        aws.call("cloudwatch", "put_metric_alarm", Tags=tags, **alarm)
    stale = set(alarm_names(endpoint, True)) - {a["AlarmName"] for a in wanted}
    if stale & set(alarms_of(aws, endpoint)):
        aws.call("cloudwatch", "delete_alarms", AlarmNames=sorted(stale))
    return tuple(a["AlarmName"] for a in wanted)


def alarms_of(aws: AwsSession, endpoint: str) -> list[str]:
    """The names of the endpoint's alarms that exist."""
    found = aws.paginate("cloudwatch", "describe_alarms", "MetricAlarms",
                         AlarmNamePrefix=f"mmsctl-sagemaker-{endpoint}-")
    return [str(a["AlarmName"]) for a in found if a.get("AlarmName") in alarm_names(endpoint, True)]


def delete_alarms(aws: AwsSession, endpoint: str) -> list[str]:
    names = alarms_of(aws, endpoint)
    if names:
        aws.call("cloudwatch", "delete_alarms", AlarmNames=names)
    return names
