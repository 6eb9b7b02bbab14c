"""``mmsctl predict``'s core: find the model, run inputs through it (here, in worker processes or on a
server), and collect the answers.

It sits above the engine, the archive and the zoo: it resolves names and opens archives
into an :class:`~mmsctl.engine.spec.ServiceSpec`, and the engine runs that.

    spec = open_model("squeezenet")
    started = start_service(spec, len(sources))
    for prediction in predict_local(started.service, expand_inputs(["photos/"]), batch_size=started.batch_size): ...
"""

from __future__ import annotations

from mmsctl.predict.inputs import InputSource, expand_inputs
from mmsctl.predict.local import PredictService, predict_local
from mmsctl.predict.loading import StartedService, default_batch_size, open_model, start_service
from mmsctl.predict.prediction import Prediction, truncate_top_k
from mmsctl.predict.remote import predict_remote

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
