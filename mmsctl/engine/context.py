"""The ``context`` object a handler receives, with the same attributes and methods as MMS 1.1.11's.

Handlers written for MMS call ``context.system_properties["model_dir"]``,
``context.get_request_header(idx, "Content-Type")``,
``context.set_response_status(code, phrase, idx)``,
``context.metrics.add_time(...)`` and so on; this module gives them the same
surface so they run unmodified. It is a re-implementation of the documented
contract, not a copy of MMS's code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

__all__ = ["Context", "MetricSample", "MetricsStore", "RequestProcessor"]


class RequestProcessor:
    """Per-request headers in, status and headers out (MMS: ``context.request_processor[idx]``)."""

    def __init__(self, request_header: dict[str, Any]) -> None:
        self._request_header = request_header
        self._status_code = 200
        self._reason_phrase: Optional[str] = None
        self._response_header: dict[str, str] = {}

    def get_request_property(self, key: str) -> Any:
        return self._request_header.get(key)

    def get_request_properties(self) -> dict[str, Any]:
        return self._request_header

    def report_status(self, code: int, reason_phrase: Optional[str] = None) -> None:
        self._status_code = code
        self._reason_phrase = reason_phrase

    def get_response_status_code(self) -> int:
        return self._status_code

    def get_response_status_phrase(self) -> Optional[str]:
        return self._reason_phrase

    def add_response_property(self, key: str, value: str) -> None:
        self._response_header[key] = value

    def get_response_headers(self) -> dict[str, str]:
        return self._response_header

    def get_response_header(self, key: str) -> Optional[str]:
        return self._response_header.get(key)


@dataclass
class MetricSample:
    """One metric a handler reported through ``context.metrics``."""

    name: str
    value: float
    unit: str
    request_id: Optional[str] = None
    dimensions: dict[str, str] = field(default_factory=dict)


class MetricsStore:
    """Collects what a handler reports via ``context.metrics`` (same method names as MMS)."""

    def __init__(self, request_ids: Optional[dict[int, str]], model_name: str) -> None:
        self.request_ids = request_ids or {}
        self.model_name = model_name
        self.store: list[MetricSample] = []

    def _request_id(self, idx: Optional[int]) -> Optional[str]:
        if idx is None:
            return ",".join(self.request_ids.values()) or None
        return self.request_ids.get(idx)

    def _dims(self, dimensions: Any) -> dict[str, str]:
        out = {"ModelName": self.model_name, "Level": "Model"}
        for dim in dimensions or []:
            name = getattr(dim, "name", None)
            value = getattr(dim, "value", None)
            if name is None and isinstance(dim, (tuple, list)) and len(dim) == 2:
                name, value = dim
            if name is not None:
                out[str(name)] = str(value)
        return out

    def add_metric(
        self, name: str, value: float, idx: Optional[int] = None, unit: Optional[str] = None,
        dimensions: Any = None,
    ) -> None:
        self.store.append(
            MetricSample(name, value, unit or "count", self._request_id(idx), self._dims(dimensions))
        )

    def add_counter(self, name: str, value: float, idx: Optional[int] = None, dimensions: Any = None) -> None:
        self.add_metric(name, value, idx, "count", dimensions)

    def add_time(
        self, name: str, value: float, idx: Optional[int] = None, unit: str = "ms", dimensions: Any = None
    ) -> None:
        self.add_metric(name, value, idx, unit, dimensions)

    def add_size(
        self, name: str, value: float, idx: Optional[int] = None, unit: str = "MB", dimensions: Any = None
    ) -> None:
        self.add_metric(name, value, idx, unit, dimensions)

    def add_percent(self, name: str, value: float, idx: Optional[int] = None, dimensions: Any = None) -> None:
        self.add_metric(name, value, idx, "percent", dimensions)

    def add_error(self, name: str, value: Any, dimensions: Any = None) -> None:
        dims = self._dims(dimensions)
        dims["Level"] = "Error"
        self.store.append(MetricSample(name, value, "", None, dims))


class Context:
    """What a handler sees of the model server: model facts at load time, request facts per batch."""

    def __init__(
        self,
        model_name: str,
        model_dir: str,
        manifest: Optional[dict[str, Any]],
        batch_size: int,
        gpu: Optional[int],
        server_version: str,
        server_name: str = "mmsctl",
    ) -> None:
        self.model_name = model_name
        self.manifest = manifest
        self._system_properties = {
            "model_dir": model_dir,
            "gpu_id": gpu,
            "batch_size": batch_size,
            "server_name": server_name,
            "server_version": server_version,
        }
        self.request_ids: Optional[dict[int, str]] = None
        self._request_processor: Optional[list[RequestProcessor]] = None
        self._metrics: Optional[MetricsStore] = None

    @property
    def system_properties(self) -> dict[str, Any]:
        return self._system_properties

    @property
    def request_processor(self) -> Optional[list[RequestProcessor]]:
        return self._request_processor

    @request_processor.setter
    def request_processor(self, value: Optional[list[RequestProcessor]]) -> None:
        self._request_processor = value

    @property
    def metrics(self) -> Optional[MetricsStore]:
        return self._metrics

    @metrics.setter
    def metrics(self, value: Optional[MetricsStore]) -> None:
        self._metrics = value

    def _processor(self, idx: int) -> RequestProcessor:
        if self._request_processor is None:
            raise IndexError("no request in this context (called at load time?)")
        return self._request_processor[idx]

    def get_request_id(self, idx: int = 0) -> Optional[str]:
        return (self.request_ids or {}).get(idx)

    def get_request_header(self, idx: int, key: str) -> Any:
        return self._processor(idx).get_request_property(key)

    def get_all_request_header(self, idx: int) -> dict[str, Any]:
        return self._processor(idx).get_request_properties()

    def set_response_content_type(self, idx: int, value: str) -> None:
        self.set_response_header(idx, "content-type", value)

    def get_response_content_type(self, idx: int) -> Optional[str]:
        return self.get_response_headers(idx).get("content-type")

    def get_response_status(self, idx: int) -> tuple[int, Optional[str]]:
        proc = self._processor(idx)
        return proc.get_response_status_code(), proc.get_response_status_phrase()

    def set_response_status(self, code: int = 200, phrase: str = "", idx: int = 0) -> None:
        if self._request_processor is not None and self._request_processor[idx] is not None:
            self._request_processor[idx].report_status(code, reason_phrase=phrase)

    def set_all_response_status(self, code: int = 200, phrase: str = "") -> None:
        for proc in self._request_processor or []:
            proc.report_status(code, reason_phrase=phrase)

    def get_response_headers(self, idx: int) -> dict[str, str]:
        return self._processor(idx).get_response_headers()

    def set_response_header(self, idx: int, key: str, value: str) -> None:
        self._processor(idx).add_response_property(key, value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Context) and self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]
