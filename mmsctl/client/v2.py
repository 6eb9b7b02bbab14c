"""Any Open Inference Protocol (KServe v2) server, read-only: health, models, metadata, infer.

The same core as the MMS clients (:mod:`._base` calls, retries, deadlines, size limits, error
translation, run by :class:`~mmsctl.client._http.HttpApi`), over the v2 REST routes. v2 has no
management API: listing uses Triton's model repository extension (``POST /v2/repository/index``,
which ``mmsctl serve`` answers too) where a server has it, and register, unregister and scale are
refused with :class:`V2ReadOnly`. :meth:`V2Client.predict` sends one input the way
``mmsctl predict`` sends a file (a BYTES tensor: binary where ``GET /v2`` declares the binary tensor data
extension, else a JSON string, as TorchServe's kservev2 envelope reads it; a model without a metadata
route gets one BYTES input) and answers the way the MMS API does: an
image classifier's top 5 as ``[{"probability", "class"}]`` (asked for with ``classification``),
another model's one BYTES output as its raw bytes, anything else as JSON ``{output: data}``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, cast

from mmsctl.client._base import Call, Operation, json_of, url_path
from mmsctl.client._errors import server_label
from mmsctl.client._http import HttpApi
from mmsctl.client.auth import read_token
from mmsctl.client.contexts import Context
from mmsctl.client.inference import PingResult, PredictResult, ServerKind
from mmsctl.errors import ApiError, MmsError, NotFoundError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    import httpx

__all__ = ["V2Client", "V2Model", "V2ReadOnly", "infer_body", "infer_path", "read_only"]

#: The classes a classifier's answer holds (what MMS's API answers by default).
TOP_K = 5
HEADER_LENGTH = "Inference-Header-Content-Length"


class V2ReadOnly(UsageError):
    """An operation the Open Inference Protocol does not have (register, unregister, scale)."""


def read_only(operation: str, context: Context) -> V2ReadOnly:
    return V2ReadOnly(f"cannot {operation} on {context.name}: it speaks the Open Inference Protocol (v2), which "
                      "has no management API (models are read-only: list, describe, predict, ping)")


@dataclass
class V2Model:
    """A model as v2 describes it: metadata and readiness."""

    name: str
    versions: list[str]
    platform: str
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    ready: bool
    raw: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"modelName": self.name, "modelVersion": ",".join(self.versions), "platform": self.platform,
                "ready": self.ready, "inputs": self.inputs, "outputs": self.outputs}

    @property
    def classifier_output(self) -> Optional[str]:
        """The output to ask ``classification`` of: an FP32 ``[batch, classes]`` one."""
        for output in self.outputs:
            if output.get("datatype") == "FP32" and len(output.get("shape") or []) == 2:
                return str(output.get("name"))
        return None


def _model(data: Any, ready: bool) -> V2Model:
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise ApiError("the server's model metadata is not a v2 metadata object")
    return V2Model(data["name"], [str(v) for v in data.get("versions") or []], str(data.get("platform") or ""),
                   list(data.get("inputs") or []), list(data.get("outputs") or []), ready, data)


class _V2Ops:
    """The v2 operations, written once (generators over :class:`Call`)."""

    context: Context
    _binary_known: Optional[bool] = None

    def _ping(self) -> Operation[PingResult]:
        url = self.context.inference_url
        started = time.perf_counter()
        try:
            response = yield Call("GET", "/v2/health/ready", operation="ping", ok_statuses=(400, 500, 503), retries=1)
        except MmsError as exc:
            return PingResult(url, False, exc.message, error=exc)
        latency = (time.perf_counter() - started) * 1000
        healthy = response.status_code == 200
        result = PingResult(url, healthy, "Ready" if healthy else f"not ready (HTTP {response.status_code})",
                            latency_ms=latency)
        try:
            meta = json_of((yield Call("GET", "/v2", operation="server metadata", retries=0)))
            name = str(meta.get("name") or "") if isinstance(meta, dict) else ""
            result.server = cast(ServerKind, name if name == "mmsctl" else f"v2:{name or 'unknown'}")
            result.version = str(meta.get("version")) if isinstance(meta, dict) and meta.get("version") else None
        except MmsError:
            pass
        return result

    def _describe(self, model: str, version: Optional[str]) -> Operation[V2Model]:
        path = "/v2/models" + url_path(model, None) + (f"/versions{url_path(version, None)}" if version else "")
        meta = json_of((yield Call("GET", path, operation="describe", model=model)))
        ready = yield Call("GET", path + "/ready", operation="describe", model=model, ok_statuses=(400, 503))
        return _model(meta, ready.status_code == 200)

    def _list(self) -> Operation[list[dict[str, Any]]]:
        try:
            response = yield Call("POST", "/v2/repository/index", content=b"{}", operation="list models",
                                  headers={"Content-Type": "application/json"}, retries=1)
        except ApiError as exc:
            if exc.status in (400, 404, 405, 501):
                raise UsageError(f"{server_label(self.context.inference_url)} does not list its models (the v2 "
                                 "protocol has no list; Triton's model repository extension is missing); "
                                 "ask for a model by name") from None
            raise
        data = json_of(response)
        if not isinstance(data, list):
            raise ApiError("the server's model index is not a list")
        return [{"modelName": str(m.get("name")), "modelVersion": str(m.get("version") or ""),
                 "state": str(m.get("state") or "")} for m in data if isinstance(m, dict)]

    def _binary(self) -> Operation[bool]:
        """Whether the server declares the binary tensor data extension (``GET /v2``), asked once per client.

        TorchServe's kservev2 envelope, for one, answers no ``/v2`` metadata and reads JSON only."""
        if self._binary_known is None:
            try:
                meta = json_of((yield Call("GET", "/v2", operation="server metadata", retries=0)))
                extensions = meta.get("extensions") if isinstance(meta, dict) else None
                self._binary_known = isinstance(extensions, list) and "binary_tensor_data" in extensions
            except MmsError:
                self._binary_known = False
        return self._binary_known

    def _infer_request(self, model: str, bodies: list[bytes],
                       version: Optional[str]) -> Operation[tuple[V2Model, list[tuple[bytes, dict[str, str]]]]]:
        """The model's metadata (or, where the server has no metadata route, one BYTES input) and the requests."""
        binary = yield from self._binary()
        try:
            meta = yield from self._describe(model, version)
        except (NotFoundError, ApiError) as exc:
            if getattr(exc, "status", 404) not in (404, 405, 501):
                raise
            # no metadata route (TorchServe's kservev2): infer answers for an unknown model itself
            meta = V2Model(model, [version] if version else [], "", [{"name": "data", "datatype": "BYTES",
                                                                    "shape": [1]}], [], True)
        return meta, [infer_body(meta, body, binary=binary) for body in bodies]

    def _predict(self, model: str, body: bytes, version: Optional[str],
                 timeout: Optional[float]) -> Operation[PredictResult]:
        from mmsctl.engine.tensors import decode_response

        meta, ((payload, headers),) = yield from self._infer_request(model, [body], version)
        classify = meta.classifier_output
        response = yield Call("POST", infer_path(model, version), content=payload, headers=headers, model=model,
                              operation="predict", timeout=timeout)
        try:
            answer = decode_response(response.content, _header_length(response))
        except ValueError as exc:
            raise ApiError(f"predict on {server_label(self.context.inference_url)}: not a v2 answer: {exc}") from None
        return _as_mms_answer(answer.outputs, classify)


def infer_path(model: str, version: Optional[str] = None) -> str:
    """``/v2/models/{model}[/versions/{version}]/infer``, each part escaped."""
    return "/v2/models" + url_path(model, None) + (f"/versions{url_path(version, None)}" if version else "") + "/infer"


def infer_body(meta: V2Model, body: bytes, *, binary: bool = True) -> tuple[bytes, dict[str, str]]:
    """An infer request with *body* as the model's first input (one BYTES element, in the binary tensor
    extension, or as a JSON string for a server without it) and, for a classifier, its top 5 asked for;
    the body and its headers. ``bench`` sends the same bytes.

    Raises:
        ApiError: the model declares no input.
        UsageError: *body* is not UTF-8 text and the server takes JSON only (BYTES are strings there).
    """
    from mmsctl.engine.tensors import RequestedOutput, Tensor, encode_request
    import numpy as np

    if not meta.inputs:
        raise ApiError(f"model {meta.name} declares no input")
    data = np.empty(1, dtype=object)
    data[0] = body
    classify = meta.classifier_output
    outputs = [RequestedOutput(classify, True, TOP_K)] if classify else []
    if not binary:
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            raise UsageError(f"model {meta.name}: the server does not declare the binary tensor data extension, "
                             "and in JSON a BYTES input must be UTF-8 text; this input is not") from None
    payload, length = encode_request([Tensor(str(meta.inputs[0].get("name")), "BYTES", [1], data)], outputs,
                                     binary=binary)
    if length is None:
        return payload, {"Content-Type": "application/json"}
    return payload, {"Content-Type": "application/octet-stream", HEADER_LENGTH: str(length)}


def _header_length(response: "httpx.Response") -> Optional[int]:
    value = response.headers.get(HEADER_LENGTH)
    return int(value) if value is not None and value.strip().isdigit() else None


def _as_mms_answer(outputs: list[Any], classified: Optional[str]) -> PredictResult:
    """A v2 answer the way the MMS API answers (so ``predict`` renders both alike)."""
    import numpy as np

    if classified and len(outputs) == 1 and outputs[0].datatype == "BYTES":
        rows = []
        for value in np.asarray(outputs[0].data).ravel()[:TOP_K]:
            text = value if isinstance(value, str) else bytes(value).decode("utf-8", "replace")
            score, _, rest = text.partition(":")
            _, _, label = rest.partition(":")
            if score:
                rows.append({"probability": float(score), "class": label})
        return PredictResult(200, "application/json", json.dumps(rows).encode())
    if len(outputs) == 1 and outputs[0].datatype == "BYTES" and np.asarray(outputs[0].data).size == 1:
        return PredictResult(200, None, bytes(np.asarray(outputs[0].data).ravel()[0]))
    data = {o.name: np.asarray(o.data).ravel().tolist() if o.datatype != "BYTES" else
            [bytes(v).decode("utf-8", "replace") for v in np.asarray(o.data).ravel()] for o in outputs}
    return PredictResult(200, "application/json", json.dumps(data).encode())


class V2Client(_V2Ops):
    """A v2 server's REST API (the context's inference URL; its token is the inference one)."""

    def __init__(self, context: Context, *, timeout: float = 60.0, retries: int = 2,
                 transport: Optional["httpx.BaseTransport"] = None) -> None:
        self.context = context
        self.server = server_label(context.inference_url)
        self._api = HttpApi(context.inference_url, read_token(context.token_file, "inference"), timeout, retries,
                            transport=transport)

    def ping(self) -> PingResult:
        """Ready or not (``GET /v2/health/ready``), and the server's name (``GET /v2``); never raises."""
        return self._api.run(self._ping())

    def list_models(self) -> list[dict[str, Any]]:
        return self._api.run(self._list())

    def describe(self, model: str, version: Optional[str] = None) -> V2Model:
        return self._api.run(self._describe(model, version))

    def infer_requests(self, model: str, bodies: list[bytes],
                       version: Optional[str] = None) -> list[tuple[bytes, dict[str, str]]]:
        """The infer requests :meth:`predict` would send for *bodies* (``bench`` cycles them): body and headers."""
        return self._api.run(self._infer_request(model, bodies, version))[1]

    def predict(self, model: str, body: bytes, content_type: Optional[str] = None, *, version: Optional[str] = None,
                timeout: Optional[float] = None) -> PredictResult:
        """Infer with *body* as the model's first input (BYTES, binary); the answer as the MMS API gives it."""
        return self._api.run(self._predict(model, body, version, timeout))

    def close(self) -> None:
        self._api.close()

    def __enter__(self) -> "V2Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
