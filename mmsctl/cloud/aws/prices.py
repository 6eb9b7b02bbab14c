"""Cost per 100,000 requests from an hourly price and a throughput: pure functions plus a price table.

    cost per 100k = hourly price / (requests per second * 3600) * 100,000
    Lambda:         (memory GB * billed seconds * GB-second price + request price) * 100,000

A fleet of N instances behind a load balancer (:func:`fleet_estimate`) costs
N × the instance price + the balancer's fixed hourly price, and serves N × one
instance's throughput.

Prices come from the bundled ``prices.json`` (us-east-1, on-demand, Linux), or
live from the AWS Pricing API (:func:`live_price`), which needs credentials.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from mmsctl.errors import CloudError, UsageError

__all__ = [
    "HOURS_PER_MONTH",
    "CostRow",
    "FleetCostRow",
    "balancer_price",
    "LambdaCost",
    "NoBundledPrice",
    "lambda_estimate",
    "bundled_prices",
    "cost_per_100k",
    "estimate",
    "fleet_estimate",
    "live_price",
    "parse_price_list",
    "table",
]


class NoBundledPrice(UsageError):
    """An instance or accelerator the bundled price table does not know: the price has to come from elsewhere."""

    reference = "cloud-no-bundled-price"


_PRICES = Path(__file__).with_name("prices.json")
REQUESTS = 100_000
HOURS_PER_MONTH = 730  # AWS's pricing pages use 730 hours a month
MAX_FLEET_SIZE = 1000


@lru_cache(maxsize=1)
def bundled_prices() -> dict[str, Any]:
    """The bundled price table (read once)."""
    return dict(json.loads(_PRICES.read_text(encoding="utf-8")))


def cost_per_100k(hourly_price: float, throughput: float) -> float:
    """Dollars per 100,000 requests at *throughput* requests per second, fully loaded."""
    if throughput <= 0:
        raise UsageError("throughput must be a positive number of requests per second", param="throughput")
    if hourly_price < 0:
        raise UsageError("an hourly price cannot be negative")
    return hourly_price / (throughput * 3600.0) * REQUESTS


@dataclass(frozen=True)
class CostRow:
    """One line of a cost table."""

    instance_type: str
    accelerator: Optional[str]
    hourly_price: float
    throughput: float
    cost_per_100k: float
    price_source: str

    @property
    def label(self) -> str:
        return f"{self.instance_type} + {self.accelerator}" if self.accelerator else self.instance_type

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["cost_per_100k"] = round(self.cost_per_100k, 4)
        data["hourly_price"] = round(self.hourly_price, 6)
        return data


def _bundled(kind: str, name: str) -> float:
    prices = bundled_prices()[kind]
    if name not in prices:
        raise NoBundledPrice(f"no bundled price for {name}; known: {', '.join(sorted(prices))}",
                             hint="give the hourly price, or ask the AWS Pricing API")
    return float(prices[name])


def estimate(instance_type: str, throughput: float, *, accelerator: Optional[str] = None,
             price: Optional[float] = None, instance_price: Optional[float] = None,
             region: Optional[str] = None) -> CostRow:
    """One cost row. *price* overrides the whole hourly price; *instance_price* only the instance's part.

    Args:
        instance_type: e.g. ``m5.large``.
        throughput: measured requests per second.
        accelerator: an EI type (``eia1.medium``) whose hourly price is added.
        price: the total hourly price, if the user knows it.
        instance_price: the instance's hourly price (e.g. from :func:`live_price`).
        region: only for the source note.
    """
    if price is not None:
        return CostRow(instance_type, accelerator, price, throughput, cost_per_100k(price, throughput), "given price")
    source = "bundled us-east-1"
    if instance_price is None:
        instance_price = _bundled("instances", instance_type)
    else:
        source = f"AWS Pricing API ({region or 'us-east-1'})"
    total = instance_price + (_bundled("accelerators", accelerator) if accelerator else 0.0)
    if accelerator and "Pricing API" in source:
        source += " + bundled EI price"
    return CostRow(instance_type, accelerator, total, throughput, cost_per_100k(total, throughput), source)


def table(name: str) -> tuple[str, list[CostRow]]:
    """A published table from ``prices.json`` (``resnet152``), recomputed from its prices and throughputs."""
    tables = bundled_prices()["tables"]
    if name not in tables:
        raise UsageError(f"unknown table {name!r}; known: {', '.join(sorted(tables))}")
    spec = tables[name]
    rows = [estimate(r["instance_type"], float(r["throughput"]), accelerator=r.get("accelerator"))
            for r in spec["rows"]]
    return str(spec["title"]), rows


def balancer_price() -> float:
    """An Application Load Balancer's fixed hourly price (bundled, us-east-1; LCU charges are extra)."""
    return float(bundled_prices()["load_balancers"]["application"])


@dataclass(frozen=True)
class FleetCostRow:
    """A fleet of *instances* instances behind one load balancer, fully loaded."""

    instances: int
    per_instance: CostRow
    balancer_hourly: float

    @property
    def hourly_price(self) -> float:
        return self.instances * self.per_instance.hourly_price + self.balancer_hourly

    @property
    def throughput(self) -> float:
        return self.instances * self.per_instance.throughput

    @property
    def cost_per_100k(self) -> float:
        return cost_per_100k(self.hourly_price, self.throughput)

    @property
    def monthly_price(self) -> float:
        return self.hourly_price * HOURS_PER_MONTH

    def to_dict(self) -> dict[str, Any]:
        return {
            "instances": self.instances,
            "instance_type": self.per_instance.instance_type,
            "accelerator": self.per_instance.accelerator,
            "instance_hourly_price": round(self.per_instance.hourly_price, 6),
            "balancer_hourly_price": round(self.balancer_hourly, 6),
            "hourly_price": round(self.hourly_price, 6),
            "monthly_price": round(self.monthly_price, 2),
            "throughput_per_instance": round(self.per_instance.throughput, 3),
            "throughput": round(self.throughput, 3),
            "cost_per_100k": round(self.cost_per_100k, 4),
            "price_source": self.per_instance.price_source,
        }


def fleet_estimate(instance_type: str, throughput_per_instance: float, counts: list[int], *,
                   accelerator: Optional[str] = None, price: Optional[float] = None,
                   instance_price: Optional[float] = None, region: Optional[str] = None,
                   balancer_hourly: Optional[float] = None) -> list[FleetCostRow]:
    """One row per fleet size in *counts* (sorted, without repeats); prices as :func:`estimate`.

    Throughput scales with the instance count: the balancer spreads requests evenly
    and a model server's throughput does not depend on its neighbours.
    """
    if not counts:
        raise UsageError("a fleet cost needs at least one instance count")
    for count in counts:
        if not 1 <= count <= MAX_FLEET_SIZE:
            raise UsageError(f"instance counts must be 1 to {MAX_FLEET_SIZE}, not {count}")
    one = estimate(instance_type, throughput_per_instance, accelerator=accelerator, price=price,
                   instance_price=instance_price, region=region)
    lb = balancer_price() if balancer_hourly is None else balancer_hourly
    if lb < 0:
        raise UsageError("a load balancer price cannot be negative")
    return [FleetCostRow(n, one, lb) for n in sorted(set(counts))]


# --- AWS Lambda -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LambdaCost:
    """What *requests* invocations of *memory_mb* lasting *duration_ms* each cost on Lambda.

    Lambda bills GB-seconds (memory × billed duration, rounded up to the millisecond) plus a
    price per request; there is no idle cost, so the figure does not depend on throughput.
    """

    memory_mb: int
    duration_ms: float
    requests: int
    per_gb_second: float
    per_million_requests: float
    price_source: str

    @property
    def gb_seconds_per_request(self) -> float:
        return self.memory_mb / 1024.0 * math.ceil(self.duration_ms) / 1000.0

    @property
    def cost_per_request(self) -> float:
        return self.gb_seconds_per_request * self.per_gb_second + self.per_million_requests / 1_000_000

    @property
    def total(self) -> float:
        return self.cost_per_request * self.requests

    @property
    def cost_per_100k(self) -> float:
        return self.cost_per_request * REQUESTS

    @property
    def label(self) -> str:
        return f"lambda {self.memory_mb} MB, {self.duration_ms:g} ms"

    def to_dict(self) -> dict[str, Any]:
        return {"setup": self.label, "memory_mb": self.memory_mb, "duration_ms": self.duration_ms,
                "requests": self.requests, "gb_seconds_per_request": round(self.gb_seconds_per_request, 6),
                "per_gb_second": self.per_gb_second, "per_million_requests": self.per_million_requests,
                "total": round(self.total, 4), "cost_per_100k": round(self.cost_per_100k, 4),
                "price_source": self.price_source}


def lambda_estimate(memory_mb: int, duration_ms: float, requests: int = REQUESTS) -> LambdaCost:
    """Lambda's cost from the bundled us-east-1 x86 prices.

    Raises:
        UsageError: memory outside 128–10240 MB, a duration outside (0, 900000] ms, requests < 1.
    """
    if not 128 <= memory_mb <= 10240:
        raise UsageError(f"memory {memory_mb}: Lambda allows 128-10240 MB", param="memory_mb")
    if not 0 < duration_ms <= 900_000:  # also refuses nan
        raise UsageError(f"duration {duration_ms:g} ms: a Lambda call lasts more than 0 and at most 900000 ms",
                         param="duration_ms")
    if not 1 <= requests <= 10**12:
        raise UsageError(f"requests {requests}: use 1 to 10^12", param="requests")
    table = bundled_prices()["lambda"]
    x86 = table["x86_64"]
    return LambdaCost(memory_mb, float(duration_ms), int(requests), float(x86["per_gb_second"]),
                      float(x86["per_million_requests"]), f"bundled us-east-1 x86 ({table['as_of']})")


# --- the AWS Pricing API ---------------------------------------------------------------------------


def _location(aws: Any, region: str) -> str:
    """The Pricing API's ``location`` for a region: botocore's region description (``US East (N. Virginia)``)."""
    from mmsctl.cloud.aws.session import region_description

    described = region_description(region)
    if described is None:
        raise CloudError(f"the Pricing API has no location name for {region}")
    return described.replace("Europe", "EU")


def parse_price_list(price_list: list[str]) -> float:
    """The on-demand hourly USD price in a Pricing API ``PriceList`` (a list of JSON strings)."""
    prices: list[float] = []
    for item in price_list:
        product = json.loads(item) if isinstance(item, str) else item
        for term in product.get("terms", {}).get("OnDemand", {}).values():
            for dim in term.get("priceDimensions", {}).values():
                if dim.get("unit") not in ("Hrs", "Hours", None):
                    continue
                usd = dim.get("pricePerUnit", {}).get("USD")
                if usd is not None and float(usd) > 0:
                    prices.append(float(usd))
    if not prices:
        raise CloudError("the AWS Pricing API returned no on-demand hourly price for this instance type")
    return min(prices)


def live_price(aws: Any, instance_type: str, region: str) -> float:
    """The on-demand Linux price of *instance_type* in *region*, asked of the Pricing API (in us-east-1)."""
    filters = [
        {"Type": "TERM_MATCH", "Field": "instanceType", "Value": instance_type},
        {"Type": "TERM_MATCH", "Field": "location", "Value": _location(aws, region)},
        {"Type": "TERM_MATCH", "Field": "operatingSystem", "Value": "Linux"},
        {"Type": "TERM_MATCH", "Field": "tenancy", "Value": "Shared"},
        {"Type": "TERM_MATCH", "Field": "preInstalledSw", "Value": "NA"},
        {"Type": "TERM_MATCH", "Field": "capacitystatus", "Value": "Used"},
    ]
    answer = aws.call("pricing", "get_products", region="us-east-1", ServiceCode="AmazonEC2",
                      Filters=filters, FormatVersion="aws_v1", MaxResults=10)
    return parse_price_list(answer.get("PriceList", []))
