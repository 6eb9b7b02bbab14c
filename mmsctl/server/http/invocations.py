"""SageMaker's ``POST /invocations`` (and ``/models/{model}/invoke``): which model, and what the request's
``Content-Type`` and ``Accept`` ask of it. Both HTTP paths decide here, once.

* **The model**: ``/models/{model}/invoke``'s, the ``model_name`` query or header (``X-Model-Name``), else the
  one start-up model (SageMaker's container serves one).
* **The body**: the Open Inference Protocol's (a JSON object with ``inputs``, or Triton's binary extension
  with ``Inference-Header-Content-Length``) is a v2 infer request and gets the protocol's answer, errors
  included; anything else (an image, a ``.npy`` tensor, JSON in the MMS form) reaches the model with its own
  content type, as on ``/predictions``.
* **Accept** picks the answer's form: ``application/json`` (also ``*/*`` or none) is the model's own answer
  (the top-k list for a classifier), ``application/x-npy`` asks a classifier for every class's score as a
  float32 ``.npy`` vector; a classifier asked for a type it cannot give is a 406 before it runs. Any other
  handler gets ``Accept`` in its request headers and answers as it answers.
* ``X-Amzn-SageMaker-Custom-Attributes: topk=N`` (what ``InvokeEndpoint``'s ``CustomAttributes`` carries; the
  runtime API has no query string) is the ``topk`` parameter.

Both HTTP paths answer with :func:`invocation_model` (once the head is read) and :func:`invocation_call` (once
the body is): the lean path ``POST /invocations``, aiohttp's the rest (a query, ``/models/{model}/invoke``).
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any, Mapping, Optional, Union

from aiohttp import web

from mmsctl.engine.protocol import Parameter
from mmsctl.server.errors import ApiException, BadRequest
from mmsctl.server.http.bodies import FORMS, MULTIPART, body_parameters, media_type, multipart_parameters, read_body, \
    request_item
from mmsctl.server.http.calls import OFF_LOOP_BYTES, Call, Outcome, Prediction, Whole, WholeRequest, answer, \
    off_loop
from mmsctl.server.http.middleware import HEADERS, MODEL
from mmsctl.server.http.replies import Reply, as_response, error_reply
from mmsctl.server.v2.api import HEADER_LENGTH
from mmsctl.server.workers.manager import ModelManager
from mmsctl.server.workers.model import Model

__all__ = ["InvocationsApi", "NotAcceptable", "answer_form", "invocation_call", "invocation_model", "is_v2_body",
           "model_name"]

log = logging.getLogger("mmsctl.server")

JSON = "application/json"
NPY = "application/x-npy"
#: The header ``InvokeEndpoint``'s ``CustomAttributes`` arrives in, and the parameters read from it.
CUSTOM_ATTRIBUTES = "x-amzn-sagemaker-custom-attributes"
_ATTRIBUTES = ("topk", "top_k")
#: Media ranges of one Accept header read at most (the rest are ignored).
_MAX_RANGES = 32
#: What clients send most (curl, requests, boto3's default): the model's own answer, without parsing.
_DEFAULT_ACCEPT = frozenset({"*/*", JSON, "application/*"})
#: The binary extension's header as the request's header mapping spells it (lower case).
_HEADER_LENGTH = HEADER_LENGTH.lower()


class NotAcceptable(ApiException):
    status, type_name = 406, "NotAcceptableException"


def _unnamed(manager: ModelManager, headers: Mapping[str, str]) -> Optional[str]:
    """The model a header names, else the only start-up model, else None."""
    name = headers.get("model_name") or headers.get("x-model-name")
    if name:
        return name
    startup = manager.startup_models
    return next(iter(startup)) if len(startup) == 1 else None


def model_name(manager: ModelManager, named: Optional[str], headers: Mapping[str, str]) -> str:
    """The model an invocation is for: *named* (route or query), a header, else the only start-up model."""
    name = named or _unnamed(manager, headers)
    if not name:
        raise BadRequest("Parameter model_name is required.")
    return name


def _quality(params: str) -> float:
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "q":
            try:
                q = float(value.strip())
            except ValueError:
                return 0.0
            return q if math.isfinite(q) else 0.0
    return 1.0


def answer_form(accept: Optional[str]) -> Optional[str]:
    """``json`` (no Accept, ``*/*``, ``application/*`` or ``application/json`` preferred), ``npy``
    (``application/x-npy`` preferred), or None when Accept allows neither."""
    if accept is None or accept in _DEFAULT_ACCEPT or not accept.strip():
        return JSON
    best = {JSON: -1.0, NPY: -1.0}
    for part in accept.split(",")[:_MAX_RANGES]:
        media, _, params = part.partition(";")
        media = media.strip().lower()
        q = _quality(params)
        if not 0 < q <= 1:  # q=0: refused
            continue
        for form in (JSON, NPY):
            if media in (form, "*/*", "application/*"):
                best[form] = max(best[form], q + (1e-6 if media == form else 0.0))  # exact beats a wildcard
    if best[JSON] < 0 and best[NPY] < 0:
        return None
    return NPY if best[NPY] > best[JSON] else JSON


def _maybe_v2_body(mime: Optional[str], body: bytes, headers: Mapping[str, str]) -> bool:
    """Whether the body may be an Open Inference Protocol infer request (no parsing yet)."""
    return _HEADER_LENGTH in headers or (mime == JSON and b'"inputs"' in body)


def is_v2_body(mime: Optional[str], body: bytes, headers: Mapping[str, str]) -> Union[bool, dict[str, Any]]:
    """Whether the body is an Open Inference Protocol infer request: False; True for JSON and binary (its JSON
    part is the codec's to parse); a JSON one as the object it parses to (the codec takes it, not parsing it
    again)."""
    if not _maybe_v2_body(mime, body, headers):
        return False
    if _HEADER_LENGTH in headers:
        return True
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False
    return data if isinstance(data, dict) and "inputs" in data else False


def _attributes(headers: Mapping[str, str]) -> list[Parameter]:
    """``topk=N`` from the custom attributes (``;`` or ``,`` between pairs); other pairs are the handler's."""
    found = []
    for pair in headers.get(CUSTOM_ATTRIBUTES, "").replace(",", ";").split(";")[:_MAX_RANGES]:
        key, sep, value = pair.partition("=")
        if sep and key.strip().lower() in _ATTRIBUTES:
            found.append(Parameter("topk", value.strip()[:32]))
    return found[-1:]


def invocation_model(manager: ModelManager, named: Optional[str], headers: Mapping[str, str]) -> Model:
    """The model an invocation is for (:func:`model_name`), or the 400 / 404 it is answered."""
    return manager.get(model_name(manager, named, headers), None)


def invocation_call(model: Model, request: WholeRequest, max_request_size: int) -> Outcome:
    """What an invocation of *model* is, from its whole request: a v2 infer request (answered, errors too, as
    the protocol's), or a prediction in the form ``Accept`` and the custom attributes ask. A body that may be a
    v2 request with :data:`~mmsctl.server.http.calls.OFF_LOOP_BYTES` of JSON or more is looked into off the
    loop."""
    mime = media_type(request.headers.get("content-type"))
    if mime not in FORMS and _maybe_v2_body(mime, request.body, request.headers):
        from mmsctl.server.v2.calls import json_bytes

        if json_bytes(request.body, request.headers.get(_HEADER_LENGTH)) >= OFF_LOOP_BYTES:
            return off_loop(_invocation_call, model, request, max_request_size)
    return _invocation_call(model, request, max_request_size)


def _invocation_call(model: Model, request: WholeRequest, max_request_size: int) -> Outcome:
    content_type = request.headers.get("content-type")
    mime = media_type(content_type)
    v2 = mime not in FORMS and is_v2_body(mime, request.body, request.headers)
    if v2:
        return _v2_call(model, request, max_request_size, v2 if isinstance(v2, dict) else None)
    if mime == MULTIPART:
        return _form_invocation(model, request, content_type or "", max_request_size)
    return _prediction(model, request, body_parameters(mime, request.body))


def _v2_call(model: Model, request: WholeRequest, max_request_size: int,
             parsed: Optional[dict[str, Any]]) -> Union[Reply, Call]:
    from mmsctl.server.v2.calls import infer_call
    from mmsctl.server.v2.errors import as_v2_error

    try:
        return infer_call(model, None, request, max_request_size, parsed)
    except Exception as exc:  # noqa: BLE001 - answered as the protocol's error, never a traceback
        if not isinstance(exc, ApiException):
            log.exception("unhandled error on POST /invocations (request %s)", request.request_id)
        return as_v2_error(error_reply(exc, max_request_size))


async def _form_invocation(model: Model, request: WholeRequest, content_type: str, max_request_size: int) -> Call:
    return _prediction(model, request, await multipart_parameters(content_type, request.body, max_request_size))


def _prediction(model: Model, request: WholeRequest, parameters: list[Parameter]) -> Call:
    headers = request.headers
    form = answer_form(headers.get("accept"))
    item = request_item(request.request_id, request.query, headers, parameters)
    if CUSTOM_ATTRIBUTES in headers:
        item.parameters[:0] = _attributes(headers)
    if form != JSON:
        from mmsctl.server.v2 import models as v2_models  # numpy: loaded only for these requests

        if v2_models.signature_of(model).classifier:
            if form is None:
                raise NotAcceptable(f"Model {model.name} answers {JSON} or {NPY}; Accept asked for "
                                    f"{headers.get('accept', '')[:100]!r}.")
            item.parameters.insert(0, Parameter("scores", "npy"))
    return Prediction(model, item)


class InvocationsApi:
    """The aiohttp routes of SageMaker's invocation API, over one ModelManager."""

    def __init__(self, manager: ModelManager, max_request_size: int) -> None:
        self.manager = manager
        self.max_request_size = max_request_size

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_route("*", "/invocations", self.invocations)
        router.add_route("*", "/models/{model}/invoke", self.invocations)

    async def invocations(self, request: web.Request) -> web.StreamResponse:
        headers = request.get(HEADERS) or {}
        model = invocation_model(self.manager, request.match_info.get("model") or request.query.get("model_name"),
                                 headers)
        request[MODEL] = model.name
        outcome = invocation_call(model, Whole(request, await read_body(request)), self.max_request_size)
        return as_response(await answer(self.manager, outcome, self.max_request_size))
