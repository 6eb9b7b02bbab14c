"""A stand-in for ``mmsctl.engine.service.load_service`` while that module is absent.

Only used when the engine package has no ``service`` module (builds of the
server without the engine). It runs an MMS-contract ``module:function``
handler from an extracted archive folder, nothing more: the real engine adds
the built-in services, signature handling and MMS's exact error bodies.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any, Optional

from mmsctl.engine.protocol import RequestItem, ResponseItem
from mmsctl.errors import HandlerError

__all__ = ["load_fallback_service"]


class _Context:
    def __init__(self, model_dir: str, model_name: str, batch_size: int, gpu_id: Optional[int]) -> None:
        self.system_properties = {"model_dir": model_dir, "gpu_id": gpu_id, "batch_size": batch_size,
                                  "server_name": "mmsctl", "server_version": "0"}
        self.model_name = model_name
        self.manifest: dict[str, Any] = {}
        self.request_ids: dict[int, str] = {}
        self.request_processor: list[Any] = []
        self._content_types: dict[int, str] = {}

    def set_response_content_type(self, idx: int, value: str) -> None:
        self._content_types[idx] = value


class _Service:
    def __init__(self, fn: Any, ctx: _Context) -> None:
        self._fn = fn
        self._ctx = ctx

    def handle(self, batch: list[RequestItem]) -> list[ResponseItem]:
        data = [{p.name: p.value for p in item.parameters} for item in batch]
        self._ctx._content_types = {}
        try:
            out = self._fn(data, self._ctx)
        except Exception as exc:  # noqa: BLE001 - a failing handler fails the batch, like MMS
            body = json.dumps({"code": 503, "type": "InternalServerException",
                               "message": f"Prediction failed: {exc}"}).encode()
            return [ResponseItem(503, body, "application/json") for _ in batch]
        if not isinstance(out, list) or len(out) != len(batch):
            body = json.dumps({"code": 503, "type": "InternalServerException",
                               "message": "number of batch response mismatched"}).encode()
            return [ResponseItem(503, body, "application/json") for _ in batch]
        items = []
        for i, value in enumerate(out):
            ct = self._ctx._content_types.get(i)
            if isinstance(value, (bytes, bytearray)):
                items.append(ResponseItem(200, bytes(value), ct))
            elif isinstance(value, str):
                items.append(ResponseItem(200, value.encode(), ct))
            else:
                items.append(ResponseItem(200, json.dumps(value).encode(), ct or "application/json"))
        return items

    def close(self) -> None:
        pass


def load_fallback_service(root: Path, model_name: str, handler: Optional[str], batch_size: int,
                          gpu_id: Optional[int]) -> _Service:
    if not handler:
        manifest = json.loads((root / "MAR-INF" / "MANIFEST.json").read_text())
        handler = manifest.get("model", {}).get("handler")
    if not handler:
        raise HandlerError("the archive names no handler")
    module_name, _, func = handler.partition(":")
    sys.path.insert(0, str(root))
    try:
        module = importlib.import_module(module_name[:-3] if module_name.endswith(".py") else module_name)
        fn = getattr(module, func or "handle")
    except Exception as exc:  # noqa: BLE001
        raise HandlerError(f"cannot load handler {handler!r}: {type(exc).__name__}: {exc}") from exc
    return _Service(fn, _Context(str(root), model_name, batch_size, gpu_id))
