"""`mmsctl top --context sagemaker:NAME`: a SageMaker endpoint as a :class:`~mmsctl.tui.source.DataSource`.

Each poll reads the endpoint through AWS (:func:`mmsctl.cloud.sagemaker.query.endpoint_status`, in a thread:
boto3 blocks): one row per variant, its model as the name, instances as the workers (READY is the current
count, of the desired one), the scaling range as MIN and MAX, and from CloudWatch the last five minutes'
invocations and errors per second and model latency (mean, p50, p99). CloudWatch aggregates per minute and
publishes a minute or more late, so the rates lag the endpoint; no queue or batch figures exist there.

``+`` and ``-`` set the desired instance count (UpdateEndpointWeightsAndCapacities, within the scaling range);
a SageMaker endpoint serves one model, so register and unregister are refused with the words the caller gives
(the CLI names its commands there).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Optional

from mmsctl.errors import MmsError, UsageError
from mmsctl.tui.snapshot import ModelRow, ServerStatus, Snapshot

__all__ = ["SageMakerSource"]

#: The window of CloudWatch figures each poll reads (minutes).
WINDOW_MINUTES = 5


def _row(variant: dict[str, Any], scaling: Optional[dict[str, Any]], load: Any, status: str, url: str) -> ModelRow:
    instances = variant.get("instances")
    return ModelRow(
        name=variant.get("model") or variant.get("variant") or "-", version=variant.get("variant"),
        workers_ready=instances, workers_total=variant.get("desired_instances"),
        min_workers=scaling["min"] if scaling else instances, max_workers=scaling["max"] if scaling else instances,
        requests_per_s=load.per_second, errors_per_s=load.errors_per_second, p50_ms=load.latency_p50_ms,
        p99_ms=load.latency_p99_ms, mean_ms=load.latency_avg_ms, status=status, url=url, metrics=True)


class SageMakerSource:
    """Polls one SageMaker endpoint (see the module docstring)."""

    def __init__(self, endpoint: str, aws_factory: Callable[[], Any], *, clock: Callable[[], float] = time.time,
                 one_model: str = "a SageMaker endpoint serves one model") -> None:
        self.endpoint = endpoint
        self.title = f"sagemaker:{endpoint}"
        #: Why register and unregister are refused (and what changes the model instead).
        self.one_model = one_model
        self._aws_factory = aws_factory
        self._aws: Any = None
        self._clock = clock

    def _session(self) -> Any:
        if self._aws is None:
            self._aws = self._aws_factory()
        return self._aws

    def _read(self) -> dict[str, Any]:
        from mmsctl.cloud.sagemaker.query import endpoint_status

        return endpoint_status(self._session(), self.endpoint, minutes=WINDOW_MINUTES)

    async def fetch(self) -> Snapshot:
        started, now = time.perf_counter(), self._clock()
        try:
            found = await asyncio.to_thread(self._read)
        except MmsError as exc:
            return Snapshot(now, ServerStatus(url=self.title, kind="sagemaker", error=str(exc)),
                            poll_ms=round((time.perf_counter() - started) * 1000.0, 1))
        status = str(found["status"])
        rows = tuple(_row(v, found["scaling"], found["load"], status, found["url"]) for v in found["variants"])
        server = ServerStatus(url=found["url"], kind="sagemaker", reachable=True,
                              health="Healthy" if status == "InService" else status, metrics=True)
        return Snapshot(now, server, models=rows, poll_ms=round((time.perf_counter() - started) * 1000.0, 1))

    async def scale(self, model: str, min_workers: int, max_workers: Optional[int] = None,
                    *, version: Optional[str] = None) -> str:
        from mmsctl.cloud.sagemaker.deploy.scaling import set_instances

        await asyncio.to_thread(set_instances, self._session(), self.endpoint, min_workers)
        return f"{self.endpoint}: {min_workers} instance(s) desired"

    async def register(self, url: str, *, model_name: Optional[str] = None, initial_workers: int = 1) -> str:
        """Refused: the endpoint's model changes by an update of the endpoint."""
        raise UsageError(self.one_model, param="model")

    async def unregister(self, model: str, *, version: Optional[str] = None) -> str:
        """Refused: the endpoint's model goes with the endpoint."""
        raise UsageError(self.one_model, param="model")

    def set_focus(self, key: Optional[str]) -> None:
        """Every poll reads the whole endpoint: nothing to focus."""

    async def aclose(self) -> None:
        """boto3 keeps no connection to close."""
