"""One Open Inference Protocol (KServe v2) infer request as a :class:`~mmsctl.server.http.calls.Call`: both
HTTP paths make it here, from the whole body, and answer with its :meth:`V2Call.reply`.

The request is read, planned and rendered by the protocol's steps (:mod:`~mmsctl.server.v2.infer`); a
classifier's images go to the queue :func:`~mmsctl.server.v2.models.client_batch` at a time, each group one
handler call. Errors before the model runs are raised (the route answers them as ``{"error": ...}``);
an answer that fails after it ran (a handler's error, an output the model does not have) is rendered by
:meth:`V2Call.reply` the same way.

Clients resend one JSON header with every binary request (only the binary part changes). For a
non-classifier whose inputs are each one binary BYTES element, the steps run on the first such request;
what they decided (the plan, the checks, the response's bytes around the handler's answer) is kept as a
:class:`_Recipe` for that header and model, and later requests only have their elements cut out and the
answer spliced in. A recipe is kept only when its templates give the steps' bytes for several probe
answers, and it is used only when the model, its signature and the sizes in the body are what the recipe
was made from; anything else goes through the steps.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii
from typing import Any, Awaitable, Optional, Union

from mmsctl.engine.protocol import Parameter, RequestItem, ResponseItem
from mmsctl.engine.spec import ServiceSpec
from mmsctl.engine.tensors import HEADER_LENGTH, json_element
from mmsctl.server.errors import ApiException, ServiceUnavailable
from mmsctl.server.http.calls import OFF_LOOP_BYTES, Call, WholeRequest, first_header, off_loop
from mmsctl.server.http.replies import JSON, Reply, error_reply
from mmsctl.server.v2 import models as v2_models
from mmsctl.server.v2.errors import as_v2_error
from mmsctl.server.v2.infer import InferPlan, parse, plan, render
from mmsctl.server.workers.model import Model

__all__ = ["V2Call", "infer_call", "infer_outcome", "json_bytes"]

log = logging.getLogger("mmsctl.server")

_LENGTH = HEADER_LENGTH.lower().encode()
#: A binary BYTES element's length prefix.
_ELEMENT = struct.Struct("<I")
#: What is known of a request header, by (model name, URL version, ``Inference-Header-Content-Length`` as
#: sent, JSON header): seen once (:data:`_SEEN`: a header seen once, such as one with a new id each time, is not
#: worth a recipe), its recipe, or None (seen again, no recipe). At most so many, of headers at most so long.
_Key = tuple[str, Optional[str], str, bytes]
_RECIPES: dict[_Key, Union["_Recipe", bool, None]] = {}
_SEEN = False
_RECIPES_KEPT = 256
_RECIPE_HEADER = 4096
#: Answers a recipe's templates must render exactly as the steps do before it is kept (escapes,
#: bytes that are not UTF-8, sizes of different widths).
_PROBES = (b"\x01mmsctl probe\x02", b"", b'a"\\\n\xff\xc3\xa9</\x00' + b"x" * 200, b"z" * 12345)
_SIZE_KEY = b'"binary_data_size":'
#: A str as a JSON string, ASCII (what json_element does, without its checks: the body is bytes here).
_json_string = encode_basestring_ascii
_OCTETS = b"application/octet-stream"


@dataclass(frozen=True)
class _Answer:
    """The steps' response to a non-classifier's answer, as bytes around it (its body is the one
    element of the one BYTES output): JSON, or binary with the element's size spliced into the header."""

    head: bytes
    tail: bytes
    binary: bool

    def reply(self, body: bytes) -> Reply:
        """The 200 for an ok answer with this *body*."""
        data, length, _ = self.render(body)
        if length is None:
            return Reply(200, data, JSON)
        return Reply(200, data, _OCTETS, {HEADER_LENGTH: str(length)})

    def render(self, body: bytes) -> tuple[bytes, Optional[int], str]:
        """What :func:`~mmsctl.server.v2.infer.render` returns for an ok answer with this *body*."""
        if self.binary:
            header = b"%s%d%s" % (self.head, len(body) + 4, self.tail)
            return b"".join((header, _ELEMENT.pack(len(body)), body)), len(header), "application/octet-stream"
        return b"".join((self.head, _json_string(body.decode("utf-8", "replace")).encode(), self.tail)), None, \
            "application/json"

    @classmethod
    def of(cls, infer_plan: InferPlan) -> Optional["_Answer"]:
        """The templates of *infer_plan*'s answers, if they give the steps' bytes for every probe."""
        try:
            sample, length, _ = render(infer_plan, [ResponseItem(200, _PROBES[0])])
            binary = length is not None
            marker = _SIZE_KEY + b"%d" % (len(_PROBES[0]) + 4) if binary else json_element(_PROBES[0])
            header = sample[:length] if binary else sample
            if header.count(marker) != 1:
                return None
            before, after = header.split(marker)
            answer = cls(before + _SIZE_KEY if binary else before, after, binary)
            if all(answer.render(p) == render(infer_plan, [ResponseItem(200, p)]) for p in _PROBES):
                return answer
        except Exception:  # noqa: BLE001 - an answer the steps refuse: no recipe, the steps decide
            pass
        return None


@dataclass(frozen=True)
class _Recipe:
    """What the steps made of one JSON header for one model (see the module's docstring)."""

    spec: ServiceSpec
    #: ``v2_models.generation`` when the recipe was made (the model's signature is the one it was made with).
    generation: int
    name: str
    version: str
    #: Per input: its name and its bytes in the binary part (the 4-byte length and the one element).
    inputs: tuple[tuple[str, int], ...]
    #: Where the binary part starts (the JSON header's length) and the body's length.
    start: int
    total: int
    answer: _Answer

    def item(self, model: Model, body: bytes, request_id: str, headers: dict[str, str]) -> Optional[RequestItem]:
        """The queue's request for *body* (it starts with this header), or None when the recipe does not fit:
        another model or signature, or sizes that do not add up (the steps then answer it)."""
        if (len(body) != self.total or model.spec is not self.spec or model.name != self.name
                or model.version != self.version or v2_models.generation != self.generation):
            return None
        parameters, pos = [], self.start
        for name, size in self.inputs:
            if _ELEMENT.unpack_from(body, pos)[0] != size - 4:
                return None  # the element's length does not fill its binary_data_size
            parameters.append(Parameter(name, body[pos + 4:pos + size]))
            pos += size
        return RequestItem(request_id, parameters, headers)

    @classmethod
    def of(cls, infer_plan: InferPlan, start: int, total: int) -> Optional["_Recipe"]:
        """The recipe of a request the steps just planned, if it is one a recipe can repeat."""
        model, sig = infer_plan.model, infer_plan.signature
        inputs = []
        for tensor in infer_plan.infer.inputs:
            size = tensor.parameters.get("binary_data_size")
            if tensor.datatype != "BYTES" or tensor.data.size != 1 or type(size) is not int or size < 4:
                return None
            inputs.append((tensor.name, size))
        if sig.classifier or len(infer_plan.items) != 1 or start + sum(s for _, s in inputs) != total:
            return None
        answer = _Answer.of(infer_plan)
        return None if answer is None else cls(model.spec, v2_models.generation, model.name, model.version,
                                               tuple(inputs), start, total, answer)


class V2Call(Call):
    """An infer request's groups for the model's queue, and how to answer them (a recipe's templates, or the
    steps' plan). (Slots, no dataclass: one is made per request.)"""

    __slots__ = ("max_request_size", "plan", "answer", "source")

    def __init__(self, model: Model, groups: list[list[RequestItem]], max_request_size: int,
                 plan: Optional[InferPlan] = None, answer: Optional[_Answer] = None,
                 source: Optional[tuple[bytes, Optional[str], dict[str, str]]] = None) -> None:
        super().__init__(model, groups, v2=True)
        self.max_request_size = max_request_size
        #: The steps' plan (None: made from a recipe until an answer needs it: see :meth:`_plan`).
        self.plan = plan
        self.answer = answer
        #: What the plan is made from when it is needed: the body, its header length and the request's headers.
        self.source = source

    def _plan(self) -> InferPlan:
        if self.plan is None:
            assert self.source is not None
            body, header_length, headers = self.source
            self.plan = plan(self.model, parse(body, header_length), self.groups[0][0].request_id, headers)
        return self.plan

    def reply(self, answers: list[ResponseItem]) -> Reply:
        """The answer to the workers' *answers*, the protocol's error where they failed."""
        answer = self.answer
        if answer is not None and answers[0].ok and type(answers[0].body) is bytes:
            return answer.reply(answers[0].body)
        try:
            body, header_length, content_type = render(self._plan(), answers)
        except Exception as exc:  # noqa: BLE001 - answered as the protocol's error, never a traceback
            if not isinstance(exc, ApiException):
                log.exception("unhandled error answering v2 infer for %s", self.model.name)
            return as_v2_error(error_reply(exc, self.max_request_size))
        headers = {HEADER_LENGTH: str(header_length)} if header_length is not None else {}
        return Reply(200, body, content_type.encode(), headers)


def _recipe_key(name: str, version: Optional[str], body: bytes, header_length: Optional[str]) -> Optional[_Key]:
    """The key of this request's recipe, or None (a JSON body; a length longer than a recipe's header). The
    length is not checked here: the key holds it as sent, and only what the steps accepted has a recipe."""
    if header_length is None:
        return None
    try:
        length = int(header_length)
    except ValueError:
        return None
    return (name, version, header_length, body[:length]) if 0 < length <= _RECIPE_HEADER else None


def _check_queue(model: Model, items: int) -> None:
    if items > model.queue_size:
        raise ServiceUnavailable(f"{items} images are more than model {model.name}'s queue holds "
                                 f"({model.queue_size}, job_queue_size).", retry_after=1)


def _planned(model: Model, key: Optional[_Key], body: bytes, header_length: Optional[str], request_id: str,
             headers: dict[str, str], max_request_size: int, parsed: Optional[dict[str, Any]]) -> V2Call:
    """The call the steps make of this request (and its recipe made, the second time its header comes)."""
    infer_plan = plan(model, parse(body, header_length, parsed, model), request_id, headers)
    items, together = infer_plan.items, infer_plan.together
    _check_queue(model, len(items))
    if key is not None and len(items) == 1:
        known = _RECIPES.get(key, True)
        if known is not None:  # (a recipe that did not fit was made for a model or signature since replaced)
            if len(_RECIPES) >= _RECIPES_KEPT:
                _RECIPES.clear()
            _RECIPES[key] = _SEEN if known is True else _Recipe.of(infer_plan, len(key[3]), len(body))
    return V2Call(model, [items[i:i + together] for i in range(0, len(items), together)], max_request_size,
                  infer_plan)


def infer_call(model: Model, version: Optional[str], request: WholeRequest, max_request_size: int,
               parsed: Optional[dict[str, Any]] = None) -> V2Call:
    """The call of a whole infer request for *model* (*version*: the URL's, if it names one; *parsed*: its JSON
    body, where the caller parsed it already).

    Raises:
        ApiException: what the request is answered instead (a body the codec refuses, inputs the model does
            not take, more images than the queue holds).
    """
    body, headers, request_id = request.body, request.headers, request.request_id
    header_length = first_header(request, _LENGTH)  # the first, as aiohttp's mapping gives it
    key = _recipe_key(model.name, version, body, header_length)
    recipe = _RECIPES.get(key) if key is not None else None
    if isinstance(recipe, _Recipe):
        item = recipe.item(model, body, request_id, headers)
        if item is not None:
            _check_queue(model, 1)
            return V2Call(model, [[item]], max_request_size, None, recipe.answer, (body, header_length, headers))
    return _planned(model, key, body, header_length, request_id, headers, max_request_size, parsed)


def json_bytes(body: bytes, header_length: Optional[str]) -> int:
    """How many bytes of *body* are JSON (all of it, or the ``Inference-Header-Content-Length`` it declares)."""
    if header_length is not None:
        text = header_length.strip()
        if text.isascii() and text.isdigit() and len(text) <= 18:
            return min(int(text), len(body))
    return len(body)


def infer_outcome(model: Model, version: Optional[str], request: WholeRequest, max_request_size: int,
                  parsed: Optional[dict[str, Any]] = None) -> Union[V2Call, Awaitable[V2Call]]:
    """:func:`infer_call`, made on the loop when the request's JSON is small, else off it (:func:`~mmsctl.server.
    http.calls.off_loop`): the call, or what to await for it (either raises what the request is answered)."""
    if json_bytes(request.body, first_header(request, _LENGTH)) < OFF_LOOP_BYTES:
        return infer_call(model, version, request, max_request_size, parsed)
    return off_loop(infer_call, model, version, request, max_request_size, parsed)
