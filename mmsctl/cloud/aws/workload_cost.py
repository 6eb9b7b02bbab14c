"""What one workload (N predictions over D days) costs on each way mmsctl serves a model, side by side.

    ec2         one instance for the whole period                 hours × hourly price
    fleet       two instances (fleet create's --min) and the ALB  hours × (2 × hourly price + the ALB's)
    lambda      per request                                       N × (GB × billed s × GB-s price + request price)
    sagemaker   one real-time instance for the period             hours × ml.* hourly price + data processed
    serverless  a SageMaker serverless endpoint                    N × (GB × s × GB-s price) + data processed

Every option runs the same image and archive; none is charged for its idle capacity beyond what the row
says (an instance billed for the period is billed whether it answers or not). Prices: the bundled us-east-1
tables (``prices.json``, dated), free tiers, EBS, the ALB's LCUs and data transfer not included.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Optional

from mmsctl.cloud.aws import prices
from mmsctl.errors import UsageError

__all__ = ["WorkloadCost", "sagemaker_hourly", "workload_costs"]

_GB = 1024**3


@dataclass(frozen=True)
class WorkloadCost:
    """One option's cost for the workload."""

    option: str
    setup: str
    billed: str
    total: float
    requests: int
    source: str

    @property
    def per_100k(self) -> float:
        return self.total / self.requests * prices.REQUESTS

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["total"] = round(self.total, 4)
        data["per_100k"] = round(self.per_100k, 4)
        return data


def sagemaker_hourly(instance_type: str) -> float:
    """A real-time endpoint instance's bundled hourly price."""
    table = prices.bundled_prices()["sagemaker"]["instances"]
    if instance_type not in table:
        raise prices.NoBundledPrice(f"no bundled SageMaker price for {instance_type}; known: "
                                    f"{', '.join(sorted(table))}", param="instance_type")
    return float(table[instance_type])


def _check(requests: int, days: float, duration_ms: float, serverless_mb: int) -> None:
    if not 1 <= requests <= 10**12:
        raise UsageError(f"requests {requests}: use 1 to 10^12", param="requests")
    if not 0 < days <= 3660:  # also refuses nan
        raise UsageError(f"days {days:g}: more than 0 and at most 3660", param="days")
    if not 0 < duration_ms <= 60_000:
        raise UsageError(f"duration {duration_ms:g} ms: more than 0 and at most SageMaker's 60000", param="duration_ms")
    if serverless_mb not in (1024, 2048, 3072, 4096, 5120, 6144):
        raise UsageError(f"serverless memory {serverless_mb}: 1024 to 6144 MB in whole GB", param="serverless_mb")


def _instances(requests: int, days: float, throughput: Optional[float], least: int) -> int:
    """Instances that keep up with the workload's mean rate (*throughput*: one instance's requests/s)."""
    if throughput is None:
        return least
    if not 0 < throughput <= 100_000:
        raise UsageError(f"throughput {throughput:g}: more than 0 and at most 100000 requests/s", param="throughput")
    return max(least, math.ceil(requests / (days * 86400.0) / throughput))


def workload_costs(requests: int, days: float, duration_ms: float, *, sagemaker_type: str = "ml.m5.large",
                   serverless_mb: int = 2048, lambda_mb: int = 1024, payload_kb: float = 8.0,
                   throughput: Optional[float] = None) -> list[WorkloadCost]:
    """The rows of the comparison (see the module docstring); with *throughput* (one instance's requests/s)
    the instance options get as many instances as the mean rate needs."""
    _check(requests, days, duration_ms, serverless_mb)
    table = prices.bundled_prices()
    sm = table["sagemaker"]
    hours = days * 24.0
    one, two = _instances(requests, days, throughput, 1), _instances(requests, days, throughput, 2)
    ec2_type = sagemaker_type.removeprefix("ml.")
    ec2 = prices.estimate(ec2_type, 1.0).hourly_price
    lb = prices.balancer_price()
    if not 0 <= payload_kb <= 6144:
        raise UsageError(f"payload {payload_kb:g} KB: 0 to 6144 (InvokeEndpoint's 6 MB)", param="payload_kb")
    data_gb = requests * payload_kb * 1024 / _GB  # in and out together
    data = data_gb * float(sm["data_processed_per_gb"])
    lam = prices.lambda_estimate(lambda_mb, duration_ms, requests)
    gb_s = requests * serverless_mb / 1024 * duration_ms / 1000.0
    ec2_src, sm_src = f"bundled us-east-1 ({table['as_of']})", f"bundled us-east-1 SageMaker ({sm['as_of']})"
    ml = sagemaker_hourly(sagemaker_type)
    return [
        WorkloadCost("ec2", f"{one} × {ec2_type}", f"{hours:g} h × {one} × ${ec2:g}", hours * one * ec2, requests,
                     ec2_src),
        WorkloadCost("fleet", f"{two} × {ec2_type} + ALB", f"{hours:g} h × ({two} × ${ec2:g} + ${lb:g})",
                     hours * (two * ec2 + lb), requests, ec2_src),
        WorkloadCost("lambda", f"{lambda_mb} MB", f"{requests:,} × {math.ceil(duration_ms)} ms", lam.total, requests,
                     lam.price_source),
        WorkloadCost("sagemaker", f"{one} × {sagemaker_type}", f"{hours:g} h × {one} × ${ml:g} + {data_gb:.2f} GB data",
                     hours * one * ml + data, requests, sm_src),
        WorkloadCost("sagemaker serverless", f"{serverless_mb} MB", f"{gb_s:,.0f} GB-s + {data_gb:.2f} GB data",
                     gb_s * float(sm["serverless"]["per_gb_second"]) + data, requests, sm_src),
    ]
