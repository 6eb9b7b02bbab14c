"""``mms.metrics.metrics_store``: the store behind ``context.metrics`` (mmsctl's own)."""

from mmsctl.engine.context import MetricsStore

__all__ = ["MetricsStore"]
