"""Fetch a server's Prometheus metrics (``/metrics`` on port 8082) and parse them into samples.

Parsing is prometheus_client's own text parser; this module only adds the HTTP
call, the token and the mmsctl errors. MMS 1.1 has no metrics endpoint (it logs
metrics), so a context without a metrics URL is a clear :class:`ConfigError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Optional

from mmsctl.client._http import HttpApi
from mmsctl.client.auth import read_token
from mmsctl.client.contexts import Context
from mmsctl.errors import ApiError, ConfigError

if TYPE_CHECKING:  # pragma: no cover
    import httpx

__all__ = ["MetricsClient", "Sample", "parse_metrics", "sum_samples"]


@dataclass(frozen=True)
class Sample:
    """One sample line: ``name{labels} value``."""

    name: str
    value: float
    labels: dict[str, str] = field(default_factory=dict)
    kind: str = "untyped"


def parse_metrics(text: str) -> list[Sample]:
    """Samples from Prometheus text exposition format.

    Raises:
        ApiError: the text is not Prometheus format.
    """
    from prometheus_client.parser import text_string_to_metric_families

    samples: list[Sample] = []
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                samples.append(Sample(s.name, float(s.value), dict(s.labels), family.type))
    except (ValueError, TypeError, IndexError) as exc:
        raise ApiError(f"the metrics endpoint did not answer in Prometheus format: {exc}") from None
    return samples


def sum_samples(samples: Iterable[Sample], name: str, **labels: str) -> Optional[float]:
    """The sum of every sample called *name* whose labels include *labels*; None if none match."""
    values = [s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    return sum(values) if values else None


class MetricsClient:
    """GET ``/metrics`` from the context's metrics URL."""

    def __init__(
        self,
        context: Context,
        *,
        timeout: float = 5.0,
        retries: int = 1,
        transport: Optional["httpx.BaseTransport"] = None,
    ) -> None:
        if not context.metrics_url:
            raise ConfigError(
                f"context {context.name!r} has no metrics URL",
                hint="add one with `mmsctl context add NAME … --metrics URL` (MMS 1.1 has no metrics API)",
            )
        self.context = context
        self._api = HttpApi(
            context.metrics_url,
            token=read_token(context.token_file, "metrics"),
            timeout=timeout,
            retries=retries,
            transport=transport,
        )

    def fetch(self) -> list[Sample]:
        response = self._api.request("GET", "/metrics", operation="metrics", headers={"Accept": "text/plain"})
        return parse_metrics(response.text)

    def close(self) -> None:
        self._api.close()

    def __enter__(self) -> "MetricsClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
