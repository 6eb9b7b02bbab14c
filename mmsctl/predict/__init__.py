"""``mmsctl predict``'s core: find the model, run inputs through it (here, in worker processes or on a
server), and collect the answers.

It sits above the engine, the archive and the zoo: it resolves names and opens archives
into an :class:`~mmsctl.engine.spec.ServiceSpec`, and the engine runs that.

    spec = open_model("squeezenet")
    started = start_service(spec, len(sources))
    for prediction in predict_local(started.service, expand_inputs(["photos/"]), batch_size=started.batch_size): ...

The names below load on first use (PEP 562), so a module of this package (``warm``, ``prediction``)
can be imported without the rest (the warm ``mmsctl predict`` path imports only what it uses).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mmsctl.predict.inputs import InputSource, expand_inputs
    from mmsctl.predict.loading import StartedService, default_batch_size, open_model, start_service
    from mmsctl.predict.local import PredictService, predict_local
    from mmsctl.predict.prediction import Prediction, truncate_top_k
    from mmsctl.predict.remote import predict_remote

#: Each public name and the module that defines it.
_WHERE = {
    "InputSource": "inputs",
    "expand_inputs": "inputs",
    "PredictService": "local",
    "predict_local": "local",
    "StartedService": "loading",
    "default_batch_size": "loading",
    "open_model": "loading",
    "start_service": "loading",
    "Prediction": "prediction",
    "truncate_top_k": "prediction",
    "predict_remote": "remote",
}

__all__ = [
    "InputSource",
    "PredictService",
    "Prediction",
    "StartedService",
    "default_batch_size",
    "expand_inputs",
    "open_model",
    "predict_local",
    "predict_remote",
    "start_service",
    "truncate_top_k",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
