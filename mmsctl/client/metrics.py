"""Fetch a server's Prometheus metrics (``/metrics`` on port 8082) and parse them into samples.

Parsing is prometheus_client's own text parser, called here only; this module adds the
HTTP call (written once, run by :class:`MetricsClient` and :class:`AsyncMetricsClient`),
the token and the mmsctl errors. MMS 1.1 has no metrics endpoint (it logs metrics), so a
context without a metrics URL is a clear :class:`NoMetricsUrl`.

The metrics port takes the management key (TorchServe's ``key_file.json`` has no metrics key).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from mmsctl.client._base import Call, Operation
from mmsctl.client._http import AsyncHttpApi, HttpApi
from mmsctl.client.auth import read_token
from mmsctl.client.contexts import Context
from mmsctl.errors import ApiError, ConfigError

if TYPE_CHECKING:  # pragma: no cover
    import httpx

__all__ = [
    "AsyncMetricsClient",
    "MetricsClient",
    "NoMetricsUrl",
    "Sample",
    "Scrape",
    "parse_metrics",
    "parse_scrape",
]


class NoMetricsUrl(ConfigError):
    """The context names no metrics endpoint (MMS 1.1 has none)."""

    reference = "no-metrics-url"

    def __init__(self, message: str, *, context: str) -> None:
        super().__init__(message)
        self.context = context


@dataclass(frozen=True)
class Sample:
    """One sample line: ``name{labels} value``."""

    name: str
    value: float
    labels: dict[str, str] = field(default_factory=dict)
    kind: str = "untyped"


@dataclass(frozen=True)
class Scrape:
    """One read of ``/metrics``: its samples, and the type of every family it declares.

    A family can be declared (``# TYPE``) before it has a sample: a counter of requests
    that no request has touched yet still says the server counts them.
    """

    samples: list[Sample]
    families: dict[str, str] = field(default_factory=dict)


def parse_scrape(text: str) -> Scrape:
    """Samples and families from Prometheus text exposition format.

    Raises:
        ApiError: the text is not Prometheus format.
    """
    from prometheus_client.parser import text_string_to_metric_families

    samples: list[Sample] = []
    families: dict[str, str] = {}
    try:
        for family in text_string_to_metric_families(text):
            families[family.name] = family.type
            for s in family.samples:
                samples.append(Sample(s.name, float(s.value), dict(s.labels), family.type))
    except (ValueError, TypeError, IndexError) as exc:
        raise ApiError(f"the metrics endpoint did not answer in Prometheus format: {exc}") from None
    return Scrape(samples, families)


def parse_metrics(text: str) -> list[Sample]:
    """Samples from Prometheus text exposition format.

    Raises:
        ApiError: the text is not Prometheus format.
    """
    return parse_scrape(text).samples


class _MetricsOps:
    """The metrics operation, written once as data (see :mod:`mmsctl.client._base`)."""

    context: Context

    def _setup(self, context: Context) -> tuple[str, Optional[str]]:
        """The metrics URL and token (the management key); NoMetricsUrl without a URL."""
        if not context.metrics_url:
            raise NoMetricsUrl(f"context {context.name!r} has no metrics URL", context=context.name)
        self.context = context
        return context.metrics_url, read_token(context.token_file, "metrics")

    def _scrape(self) -> Operation[Scrape]:
        response = yield Call("GET", "/metrics", operation="metrics", headers={"Accept": "text/plain"})
        return parse_scrape(response.text)


class MetricsClient(_MetricsOps):
    """GET ``/metrics`` from the context's metrics URL."""

    def __init__(
        self,
        context: Context,
        *,
        timeout: float = 5.0,
        retries: int = 1,
        transport: Optional["httpx.BaseTransport"] = None,
        max_response_bytes: Optional[int] = None,
    ) -> None:
        url, token = self._setup(context)
        self._api = HttpApi(url, token, timeout, retries, transport=transport,
                            max_response_bytes=max_response_bytes)

    def fetch(self) -> list[Sample]:
        """The samples of one scrape."""
        return self.scrape().samples

    def scrape(self) -> Scrape:
        """One scrape: samples and declared families."""
        return self._api.run(self._scrape())

    def close(self) -> None:
        self._api.close()

    def __enter__(self) -> "MetricsClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncMetricsClient(_MetricsOps):
    """:class:`MetricsClient` for asyncio."""

    def __init__(
        self,
        context: Context,
        *,
        timeout: float = 5.0,
        retries: int = 1,
        transport: Optional["httpx.AsyncBaseTransport"] = None,
        max_response_bytes: Optional[int] = None,
    ) -> None:
        url, token = self._setup(context)
        self._api = AsyncHttpApi(url, token, timeout, retries, transport=transport,
                                 max_response_bytes=max_response_bytes)

    async def fetch(self) -> list[Sample]:
        """The samples of one scrape."""
        return (await self.scrape()).samples

    async def scrape(self) -> Scrape:
        """One scrape: samples and declared families."""
        return await self._api.run(self._scrape())

    async def aclose(self) -> None:
        await self._api.aclose()

    async def __aenter__(self) -> "AsyncMetricsClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
