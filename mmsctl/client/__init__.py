"""Talk to remote MMS 1.1, TorchServe 0.12 and mmsctl servers: contexts, management, inference, metrics.

Each API has a sync client (``ManagementClient``…) and an async one
(``AsyncManagementClient``…) that run the same operations (``_base.py`` holds the
shared request/response logic, ``_http.py`` the two faces).

Names are loaded on first use, so importing ``mmsctl.client`` costs nothing
(httpx is imported only when a client is created).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "AsyncInferenceClient",
    "AsyncManagementClient",
    "AsyncMetricsClient",
    "Context",
    "ContextStore",
    "InferenceClient",
    "ManagementClient",
    "MetricsClient",
    "ModelDetail",
    "ModelSummary",
    "PingResult",
    "PredictResult",
    "ScaleResult",
    "parse_metrics",
    "read_token",
    "resolve_context",
]

_WHERE = {
    "Context": "contexts",
    "ContextStore": "contexts",
    "resolve_context": "contexts",
    "AsyncInferenceClient": "inference",
    "InferenceClient": "inference",
    "PingResult": "inference",
    "PredictResult": "inference",
    "AsyncManagementClient": "management",
    "ManagementClient": "management",
    "ModelDetail": "management",
    "ModelSummary": "management",
    "ScaleResult": "management",
    "AsyncMetricsClient": "metrics",
    "MetricsClient": "metrics",
    "parse_metrics": "metrics",
    "read_token": "auth",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'mmsctl.client' has no attribute {name!r}")
    return getattr(importlib.import_module(f"mmsctl.client.{module}"), name)
