"""``mms.model_service.model_service``: the base classes of MMS 0.x services.

A legacy service is built as ``cls(model_name, model_dir, manifest, gpu)``, then ``initialize(context)``
reads the signature file the manifest names; each batch goes through ``handle(data, context)``, which
takes the first request's input (the signature's first input name, else the raw body, else ``data``) and
answers what ``inference`` returns, as a list.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import time
from typing import Any, Optional

__all__ = ["ModelService", "SingleNodeService"]

log = logging.getLogger(__name__)


class ModelService:
    """What every 0.x service has: its signature, ``inference``, ``ping`` and the ``handle`` entry point."""

    def __init__(self, model_name: str, model_dir: str, manifest: Optional[dict[str, Any]], gpu: Any = None) -> None:
        self.ctx: Any = None
        self._context: Any = None
        self._signature: Any = None

    def initialize(self, context: Any) -> None:
        """Keep *context* and read the signature file the manifest's ``Model.Signature`` names."""
        self._context = context
        model_dir = context.system_properties.get("model_dir")
        path = os.path.join(model_dir, context.manifest["Model"]["Signature"])
        if not os.path.isfile(path):
            raise ValueError("Signature file is not found.")
        with open(path, encoding="utf-8") as fh:
            self._signature = json.load(fh)

    def inference(self, data: list[Any]) -> Any:
        """Run the model on *data* (the inputs of one request); subclasses say how."""
        raise NotImplementedError

    def ping(self) -> Any:
        """The service's health; subclasses say what it is."""
        raise NotImplementedError

    def signature(self) -> Any:
        return self._signature

    def handle(self, data: list[dict[str, Any]], context: Any) -> list[Any]:
        """The entry point: the first request's input through :meth:`inference`, answered as a list."""
        signature = self._signature
        value = data[0].get(signature["inputs"][0]["data_name"])
        if value is None:
            value = data[0].get("body")
        if value is None:
            value = data[0].get("data")
        if signature["input_type"] == "application/json" and isinstance(value, (bytes, bytearray)):
            value = ast.literal_eval(bytes(value).decode("utf-8"))  # a Python literal, as MMS reads it
        answer = self.inference([value])
        return answer if isinstance(answer, list) else [answer]


class SingleNodeService(ModelService):
    """A service of one model: ``inference`` is ``_preprocess``, ``_inference`` and ``_postprocess`` in turn."""

    def inference(self, data: list[Any]) -> Any:
        for stage in (self._preprocess, self._inference, self._postprocess):
            started = time.time()
            data = stage(data)
            log.info("%s time: %.2f", stage.__name__[1:], (time.time() - started) * 1000)
        return data

    def _inference(self, data: Any) -> Any:
        return data

    def _preprocess(self, data: Any) -> Any:
        return data

    def _postprocess(self, data: Any) -> Any:
        return data
