"""One v2 infer request from its body to its answer: the steps both HTTP paths share.

aiohttp's route (:mod:`~mmsctl.server.v2.api`) and the lean path (:mod:`~mmsctl.server.http.lean`) differ
only in how the bytes arrive and leave (both make a :mod:`~mmsctl.server.v2.calls` call); what a request means
is decided here, once:
:func:`parse` (the codec, :mod:`mmsctl.engine.tensors`), :func:`plan` (the requests for the model's
queue, :mod:`~mmsctl.server.v2.models`) and :func:`render` (the workers' answers as the infer
response). Each step raises the ApiException the request is answered with.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Optional

from mmsctl.engine.protocol import RequestItem, ResponseItem
from mmsctl.engine.tensors import HEADER_LENGTH, InferRequest, InferResponse, TensorError, decode_request, \
    encode_response
from mmsctl.server.errors import BadRequest
from mmsctl.server.v2 import models as v2_models
from mmsctl.server.workers.model import Model

__all__ = ["InferPlan", "parse", "plan", "render"]


@dataclass
class InferPlan:
    """A parsed infer request and the requests it puts in its model's queue."""

    model: Model
    infer: InferRequest
    signature: v2_models.ModelSignature
    items: list[RequestItem]
    #: How many of *items* go to the handler in one call: a classifier's images up to
    #: max(batchSize, :data:`~mmsctl.server.v2.models.CLIENT_BATCH`) (the built-in handler runs any batch).
    together: int = 1


def parse(body: bytes, header_length: Optional[str], parsed: Optional[dict[str, Any]] = None,
          model: Optional[Model] = None) -> InferRequest:
    """The request's tensors (*header_length*: the ``Inference-Header-Content-Length`` value, if sent; *parsed*:
    a JSON body already parsed; *model*: the model it is for, whose signature refuses an input it cannot take
    before that input's data is converted)."""
    length: Optional[int] = None
    if header_length is not None:
        text = header_length.strip()
        if not (text.isascii() and text.isdigit()) or len(text) > 18:  # "²".isdigit(), but int() refuses it
            raise BadRequest(f"{HEADER_LENGTH} must be a whole number of bytes")
        length = int(text)
    try:
        check = None if model is None else partial(v2_models.check_input, v2_models.signature_of(model))
        return decode_request(body, length, parsed, check)
    except TensorError as exc:
        raise BadRequest(str(exc)) from None


def plan(model: Model, infer: InferRequest, request_id: str, headers: dict[str, str]) -> InferPlan:
    """The requests *infer* makes of *model*: a classifier's one per image, any other handler's one."""
    sig = v2_models.signature_of(model)
    v2_models.check_inputs(sig, infer.inputs)
    together = 1
    if sig.classifier:
        wanted = [o.classification for o in infer.outputs]
        top_k = max(wanted) if wanted and all(wanted) else v2_models.ALL_CLASSES
        items = v2_models.classifier_items(sig, infer.inputs[0], request_id, top_k)
        together = v2_models.client_batch(model, sig)
    else:
        items = [v2_models.generic_item(infer.inputs, request_id)]
    for item in items:
        item.headers = headers
    return InferPlan(model, infer, sig, items, together)


def render(plan: InferPlan, answers: list[ResponseItem]) -> tuple[bytes, Optional[int], str]:
    """The response to *plan* from its items' *answers*: body, JSON part's length (None: all JSON), content
    type. The first failed answer fails the call (V2Failure); an unknown output is a BadRequest."""
    for answer in answers:
        if not answer.ok:
            raise v2_models.failure(answer)
    sig, infer, model = plan.signature, plan.infer, plan.model
    if sig.classifier:
        outputs = v2_models.classifier_outputs(sig, answers, infer.outputs)
    else:
        outputs = v2_models.generic_outputs(sig, answers[0], infer.outputs)
    binary = {t.name for t in outputs if _binary(infer, t.name)}
    body, header_length = encode_response(InferResponse(model.name, model.version, infer.id, outputs), binary)
    return body, header_length, "application/octet-stream" if binary else "application/json"


def _binary(infer: InferRequest, name: str) -> bool:
    for output in infer.outputs:
        if output.name == name and output.binary is not None:
            return output.binary
    return infer.binary_output
