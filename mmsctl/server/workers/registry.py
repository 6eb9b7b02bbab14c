"""The models one server holds, by name, and what ``state.json`` says of them.

A local ``mmsctl predict`` of the same archive reads ``served`` there to send its inputs to this server instead
of starting mxnet (:mod:`mmsctl.predict.warm`); ``serve start`` prints ``notes``.
"""

from __future__ import annotations

import logging
import unicodedata
from typing import Any, Optional

from mmsctl.server.config import ServerConfig
from mmsctl.server.errors import BadRequest, ConflictError, ModelNotFound, ModelVersionNotFound
from mmsctl.server.workers.model import Model

__all__ = ["Registry", "valid_model_name"]

log = logging.getLogger("mmsctl.server")

_MAX_MODEL_NAME = 255


def valid_model_name(name: str) -> str:
    """*name*, if a model may be registered under it (a register request's, an archive's manifest's, a start-up
    model's): any text a URL path segment can carry and a log line can show as one line (no ``/``, no control
    characters), at most 255 characters; else BadRequest."""
    if not name or len(name) > _MAX_MODEL_NAME or "/" in name or \
            any(unicodedata.category(c)[0] == "C" for c in name):
        raise BadRequest(f"Invalid model name {name[:80]!r}: 1 to {_MAX_MODEL_NAME} characters, no '/' or "
                         "control characters.")
    return name


class Registry:
    """The models of one server by name, the start-up ones among them, and lines for ``serve start``."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.models: dict[str, Model] = {}
        self.startup_models: set[str] = set()
        #: Lines for ``serve start``'s output (published in state.json): the kernel measurements begun.
        self.notes: list[str] = []

    def add(self, model: Model) -> None:
        """Register *model* (ConflictError: the name is taken)."""
        if model.name in self.models:
            raise ConflictError(f"Model {model.name} is already registered.")
        self.models[model.name] = model
        log.info("Model %s loaded.", model.name)
        self.publish()

    def get(self, name: str, version: Optional[str] = None) -> Model:
        """The model called *name*; with *version*, only if that is its version (else 404)."""
        model = self.models.get(name)
        if model is None:
            raise ModelNotFound(f"Model not found: {name}")
        if version is not None and version != model.version:
            raise ModelVersionNotFound(f"Model version: {version} does not exist for model: {name}")
        return model

    def remove(self, name: str) -> Model:
        """Take the model called *name* out (ModelNotFound: there is none); it is no longer served or published."""
        model = self.get(name)
        self._take_out(name)
        return model

    def discard(self, model: Model) -> bool:
        """Take *model* out if it is the one registered by its name; False, and nothing taken, when it is not (it
        was unregistered already, and the name may be a newer model's)."""
        if self.models.get(model.name) is not model:
            return False
        self._take_out(model.name)
        return True

    def _take_out(self, name: str) -> None:
        from mmsctl.engine.kernels import forget_started

        del self.models[name]
        forget_started(name)
        self.publish()
        self.startup_models.discard(name)

    def note(self, line: str) -> None:
        """A line for ``serve start``'s output."""
        self.notes.append(line)
        self.update_state(notes=list(self.notes))

    def update_state(self, **changes: Any) -> None:
        from mmsctl.local_servers import Instance

        try:
            Instance(self.config.instance_name).update(**changes)
        except (OSError, ValueError) as exc:
            log.warning("cannot update state.json: %s", exc)

    def publish(self) -> None:
        """Each model's archive digest, handler and kernel set in ``state.json`` (what ``predict``'s warm path
        matches)."""
        from pathlib import Path

        from mmsctl.engine.kernels import started_with

        served: dict[str, dict[str, Any]] = {}
        for name, m in self.models.items():
            root = Path(m.spec.root)
            if root.parent.name != "extracted" or len(root.name) != 32 or m.spec.gpu_id is not None \
                    or not self.config.decode_input_request:
                continue  # a folder, not the cached extraction of an archive file, or not what predict runs
            served[name] = {"archive": root.name, "handler": m.spec.chosen_handler or "",
                            "override": m.spec.handler_override is not None, "mkldnn": started_with(name)}
        self.update_state(served=served)
