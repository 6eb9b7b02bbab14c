"""Open Inference Protocol (KServe v2) infer on the inference API's fast path (:mod:`~mmsctl.server.fastpath`).

``POST /v2/models/{name}/infer`` and ``POST /v2/models/{name}/versions/{version}/infer``, whole, with a
JSON body or Triton's binary tensor data extension (one ``Inference-Header-Content-Length``), that make
ONE request of the model's queue (any handler but a classifier; a classifier's one image: what
``mmsctl bench``, tritonclient and kserve's clients send) are answered without aiohttp. The request
means what it means on the full path: it is admitted by the same gate, read by the same codec and
planned and rendered by the same steps (:mod:`~mmsctl.server.v2_infer`). Whatever those steps refuse
before the model runs (a bad header, a body the codec refuses, an unknown model or version, inputs the
model does not take, several images, a full queue) hands the request, with its bytes, to aiohttp, which
answers it as it always has. Only an answer that fails after the model ran (a handler's error, an
output the model does not have) is rendered here, by the full path's own error functions.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Optional

from mmsctl.engine.protocol import ResponseItem
from mmsctl.server.errors import ApiException
from mmsctl.server.middleware import _error_for
from mmsctl.server.supervisor import ModelManager
from mmsctl.server.v2_errors import as_v2_error
from mmsctl.server.v2_infer import InferPlan, parse, plan, render
from mmsctl.server.workers import Model

__all__ = ["Reply", "V2Call", "infer_route", "prepare"]

log = logging.getLogger("mmsctl.server")

#: The routes of aiohttp's application these URLs match (what the admission gate judges by).
_ROUTES = {5: "/v2/models/{model}/infer", 7: "/v2/models/{model}/versions/{version}/infer"}
_LENGTH = b"inference-header-content-length"
#: The headers an error answer keeps (as :func:`~mmsctl.server.v2_errors.as_v2_error` does).
_KEPT = ("Retry-After", "WWW-Authenticate")


@dataclass
class Reply:
    """One answer as the fast path writes it."""

    status: int
    body: bytes
    content_type: bytes
    headers: dict[str, str]


def infer_route(parts: list[bytes]) -> Optional[tuple[str, str, Optional[str]]]:
    """The route, model name and version of a v2 infer URL split at "/" (no empty part), or None."""
    if len(parts) == 5 and parts[4] == b"infer":
        return _ROUTES[5], parts[3].decode(), None
    if len(parts) == 7 and parts[4] == b"versions" and parts[6] == b"infer":
        return _ROUTES[7], parts[3].decode(), parts[5].decode()
    return None


def _header_length(headers: dict[str, str], raw: list[tuple[bytes, bytes]]) -> tuple[bool, Optional[str]]:
    """Whether ``Inference-Header-Content-Length`` is sent at most once, and its value."""
    if len(raw) == len(headers):  # no header line repeats a name (the gate's dict holds one per name)
        return True, headers.get("inference-header-content-length")
    values = [value for name, value in raw if name.lower() == _LENGTH]
    if len(values) > 1:
        return False, None  # the full path reads the first: it alone answers such a request
    return True, values[0].decode("utf-8", "surrogateescape") if values else None  # as the gate decodes


@dataclass
class V2Call:
    """An infer request the fast path takes: its model and plan (with the one request to queue)."""

    model: Model
    plan: InferPlan
    max_request_size: int

    def reply(self, response: ResponseItem) -> Reply:
        """The answer to the worker's *response*, as the full path gives it."""
        try:
            body, header_length, content_type = render(self.plan, [response])
        except Exception as exc:  # noqa: BLE001 - the full path's error functions decide what it answers
            if not isinstance(exc, ApiException):
                log.exception("unhandled error answering v2 infer for %s", self.model.name)
            error = as_v2_error(_error_for(exc, self.max_request_size))
            kept = {k: error.headers[k] for k in _KEPT if k in error.headers}
            return Reply(error.status, error.body if isinstance(error.body, bytes) else b"",
                         (error.content_type or "application/json").encode(), kept)
        headers = {"Inference-Header-Content-Length": str(header_length)} if header_length is not None else {}
        return Reply(200, body, content_type.encode(), headers)


def prepare(manager: ModelManager, headers: dict[str, str], raw: list[tuple[bytes, bytes]], name: str,
            version: Optional[str], body: bytes, request_id: str, max_request_size: int) -> Optional[V2Call]:
    """The fast path's call for this admitted request, or None when it is the full path's to answer."""
    once, header_length = _header_length(headers, raw)
    if not once or "transfer-encoding" in headers or "expect" in headers:
        return None
    try:
        model = manager.get(name, version)
        call = V2Call(model, plan(model, parse(body, header_length), request_id, headers), max_request_size)
    except Exception:  # noqa: BLE001 - refused (or worse): the full path answers, logs, counts it
        return None
    if len(call.plan.items) != 1 or model.queue_size < 1:
        return None  # several images (or no queue for one): the full path queues and answers them together
    return call
