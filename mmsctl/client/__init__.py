"""Talk to remote MMS 1.1, TorchServe 0.12 and mmsctl servers: contexts, management, inference, metrics.

Names are loaded on first use, so importing ``mmsctl.client`` costs nothing
(httpx is imported only when a client is created).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
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
    "resolve_context",
]

_WHERE = {
    "Context": "contexts",
    "ContextStore": "contexts",
    "resolve_context": "contexts",
    "InferenceClient": "inference",
    "PingResult": "inference",
    "PredictResult": "inference",
    "ManagementClient": "management",
    "ModelDetail": "management",
    "ModelSummary": "management",
    "ScaleResult": "management",
    "MetricsClient": "metrics",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'mmsctl.client' has no attribute {name!r}")
    return getattr(importlib.import_module(f"mmsctl.client.{module}"), name)
