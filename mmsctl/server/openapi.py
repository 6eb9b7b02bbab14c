"""OpenAPI 3.0.1 descriptions of our inference and management APIs (``OPTIONS /``).

Written for mmsctl, with the same paths, methods, parameters and status codes
as the documents MMS 1.1 serves, so tools generated from those keep working.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from mmsctl import __version__

__all__ = ["inference_api", "management_api", "model_api", "v2_api"]

_ERROR = {
    "type": "object",
    "required": ["code", "type", "message"],
    "properties": {
        "code": {"type": "integer", "description": "HTTP status code."},
        "type": {"type": "string", "description": "Error type (the MMS exception name)."},
        "message": {"type": "string", "description": "What went wrong."},
    },
}
_STATUS = {"type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}}
_REASONS = {
    "200": "OK", "202": "Accepted", "210": "Partial Success", "400": "Bad request",
    "401": "Missing or bad bearer token", "404": "Not found", "408": "Timed out", "409": "Conflict",
    "413": "Request body too large", "500": "Internal server error",
    "503": "No worker available, or the server is draining (Retry-After)",
}


def _responses(ok: dict[str, Any], codes: Iterable[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for code in codes:
        schema = ok if code.startswith("2") else _ERROR
        out[code] = {"description": _REASONS[code], "content": {"application/json": {"schema": schema}}}
    return out


def _param(name: str, where: str, kind: str, text: str, required: bool = False,
           default: Any = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": kind}
    if default is not None:
        schema["default"] = default
    return {"in": where, "name": name, "description": text, "required": required, "schema": schema}


def _model_path(text: str = "Name of the model.") -> dict[str, Any]:
    return _param("model_name", "path", "string", text, required=True)


def _op(op_id: str, summary: str, params: list[dict[str, Any]], ok: dict[str, Any],
        codes: Iterable[str], body: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    op: dict[str, Any] = {"operationId": op_id, "description": summary, "parameters": params,
                          "responses": _responses(ok, codes)}
    if body is not None:
        op["requestBody"] = body
    return op


_ANY_BODY = {
    "description": "Input data: a raw body, multipart/form-data or a urlencoded form.",
    "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
    "required": True,
}
_PREDICTION = {"type": "string", "format": "binary", "description": "Whatever the handler returns."}


def _doc(title: str, paths: dict[str, Any]) -> dict[str, Any]:
    return {
        "openapi": "3.0.1",
        "info": {"title": title, "description": "Served by mmsctl, compatible with Model Server "
                 "for Apache MXNet 1.1.", "version": __version__},
        "paths": paths,
    }


def inference_api(models: Iterable[str] = ()) -> dict[str, Any]:
    """The inference API (port 8080), with a ``/predictions/{name}`` path per registered model."""
    describe = _op("apiDescription", "The OpenAPI description of this API.", [], {"type": "object"},
                   ["200", "500"])
    predict_codes = ["200", "400", "404", "408", "413", "500", "503"]
    paths: dict[str, Any] = {
        "/": {"options": describe},
        "/ping": {"get": _op("ping", "Health of the server (503 Draining while it stops).", [], _STATUS,
                             ["200", "500", "503"])},
        "/predictions/{model_name}": {
            "post": _op("predictions", "Run a prediction.", [_model_path()], _PREDICTION,
                        predict_codes, _ANY_BODY),
            "options": _op("modelApi", "The OpenAPI description of one model's API.",
                           [_model_path()], {"type": "object"}, ["200"]),
        },
        "/{model_name}/predict": {
            "post": _op("legacyPredict", "Run a prediction (MMS 0.4 path).", [_model_path()],
                        _PREDICTION, predict_codes, _ANY_BODY),
        },
        "/api-description": {"get": _op("apiDescriptionGet", "The OpenAPI description of this API.",
                                        [], {"type": "object"}, ["200", "500"])},
        "/invocations": {"post": _op(
            "invocations", "Run a prediction; the model comes from the model_name query or header.",
            [_param("model_name", "query", "string", "Name of the model.")], _PREDICTION,
            predict_codes, _ANY_BODY)},
        "/models/{model_name}/invoke": {"post": _op(
            "invokeModel", "Run a prediction (SageMaker-style path).", [_model_path()], _PREDICTION,
            predict_codes, _ANY_BODY)},
    }
    for name in models:
        paths[f"/predictions/{name}"] = {"post": _op(f"predict_{name}", f"Run model {name}.", [],
                                                     _PREDICTION, predict_codes, _ANY_BODY)}
    return _doc("Model Server APIs (inference)", paths)


def model_api(name: str) -> dict[str, Any]:
    """``OPTIONS /predictions/{name}``: the description of one model's prediction path."""
    return _doc(f"Model {name}", {f"/predictions/{name}": {"post": _op(
        f"predict_{name}", f"Run model {name}.", [], _PREDICTION, ["200", "400", "404", "408", "413", "500", "503"],
        _ANY_BODY)}})


def management_api() -> dict[str, Any]:
    """The management API (port 8081)."""
    list_ok = {"type": "object", "required": ["models"], "properties": {
        "nextPageToken": {"type": "string"},
        "models": {"type": "array", "items": {"type": "object", "properties": {
            "modelName": {"type": "string"}, "modelUrl": {"type": "string"}}}}}}
    describe_ok = {"type": "object", "required": ["modelName", "modelUrl", "workers"]}
    register_params = [
        _param("url", "query", "string", "Archive in the model store, a zoo name or an allowed URL.",
               required=True),
        _param("model_name", "query", "string", "Name to register under (default: the manifest's)."),
        _param("handler", "query", "string", "Handler entry point, module:function."),
        _param("runtime", "query", "string", "Runtime, python only.", default="python"),
        _param("batch_size", "query", "integer", "Inference batch size (at most job_queue_size).", default=1),
        _param("max_batch_delay", "query", "integer", "Milliseconds to wait for a full batch (at most 600000).",
               default=100),
        _param("response_timeout", "query", "integer",
               "Minutes (as MMS) a batch may take, at most a day; '30s' for seconds."),
        _param("initial_workers", "query", "integer", "Workers to start (all models together: at most worker_limit)."),
        _param("synchronous", "query", "boolean", "Wait until the workers are ready.", default=True),
    ]
    scale_params = [
        _model_path(),
        _param("min_worker", "query", "integer", "Minimum number of workers (all models: at most worker_limit).",
               default=1),
        _param("max_worker", "query", "integer", "Maximum number of workers (autoscaling between)."),
        _param("number_gpu", "query", "integer", "Accepted and ignored, as MMS."),
        _param("synchronous", "query", "boolean", "Wait until the workers are ready.", default=False),
        _param("timeout", "query", "integer", "Seconds to wait when synchronous (at most 3600)."),
    ]
    return _doc("Model Server APIs (management)", {
        "/": {"options": _op("apiDescription", "The OpenAPI description of this API.", [],
                             {"type": "object"}, ["200", "500"])},
        "/models": {
            "get": _op("listModels", "List registered models, in pages.", [
                _param("limit", "query", "integer", "Page size (at most 100).", default=100),
                _param("next_page_token", "query", "string", "Where the page starts."),
            ], list_ok, ["200", "500"]),
            "post": _op("registerModel", "Register a model and start its workers.", register_params,
                        _STATUS, ["200", "202", "210", "400", "404", "408", "409", "413", "500", "503"]),
        },
        "/models/{model_name}": {
            "get": _op("describeModel", "Describe a model and its workers.", [_model_path()],
                       describe_ok, ["200", "404", "500"]),
            "put": _op("setAutoScale", "Set the worker range of a model.", scale_params, _STATUS,
                       ["200", "202", "210", "400", "404", "500", "503"]),
            "delete": _op("unregisterModel", "Unregister a model once its queue has drained.",
                          [_model_path()], _STATUS, ["200", "202", "404", "408", "500", "503"]),
        },
    })


# -- the Open Inference Protocol (KServe v2) ------------------------------------------------------
_V2_ERROR = {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}}
_V2_TENSOR = {
    "type": "object", "required": ["name", "shape", "datatype"],
    "properties": {
        "name": {"type": "string"},
        "shape": {"type": "array", "items": {"type": "integer", "minimum": 0}},
        "datatype": {"type": "string", "enum": ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16",
                                                "INT32", "INT64", "FP16", "FP32", "FP64", "BYTES"]},
        "parameters": {"type": "object", "properties": {"binary_data_size": {"type": "integer", "minimum": 0}}},
        "data": {"type": "array", "items": {}},
    },
}
_V2_REQUEST = {
    "type": "object", "required": ["inputs"],
    "properties": {
        "id": {"type": "string"},
        "parameters": {"type": "object", "properties": {"binary_data_output": {"type": "boolean"}}},
        "inputs": {"type": "array", "items": _V2_TENSOR},
        "outputs": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string"},
            "parameters": {"type": "object", "properties": {
                "binary_data": {"type": "boolean"}, "classification": {"type": "integer", "minimum": 0}}}}}},
    },
}
_V2_RESPONSE = {"type": "object", "required": ["model_name", "outputs"], "properties": {
    "model_name": {"type": "string"}, "model_version": {"type": "string"}, "id": {"type": "string"},
    "outputs": {"type": "array", "items": _V2_TENSOR}}}
_V2_METADATA = {"type": "object", "required": ["name", "inputs", "outputs"], "properties": {
    "name": {"type": "string"}, "versions": {"type": "array", "items": {"type": "string"}},
    "platform": {"type": "string"},
    "inputs": {"type": "array", "items": {"type": "object"}}, "outputs": {"type": "array", "items": {"type": "object"}}}}


def _v2_op(op_id: str, summary: str, params: list[dict[str, Any]], ok: dict[str, Any], codes: Iterable[str],
           body: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    responses = {code: {"description": _REASONS[code], "content": {"application/json": {
        "schema": ok if code.startswith("2") else _V2_ERROR}}} for code in codes}
    op: dict[str, Any] = {"operationId": op_id, "description": summary, "parameters": params, "responses": responses}
    if body is not None:
        op["requestBody"] = body
    return op


def v2_api(models: Iterable[str] = ()) -> dict[str, Any]:
    """The Open Inference Protocol (KServe v2) REST API on the inference port (``GET /v2/api-description``),
    with the metadata and infer paths of each registered model."""
    model = _param("model_name", "path", "string", "Name of the model.", required=True)
    version = _param("model_version", "path", "string", "Version of the model.", required=True)
    length = _param("Inference-Header-Content-Length", "header", "integer",
                    "Bytes of JSON before the binary tensor data (binary tensor data extension).")
    infer_body = {"required": True, "content": {
        "application/json": {"schema": _V2_REQUEST},
        "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}
    infer_codes = ["200", "400", "404", "408", "413", "500", "503"]
    paths: dict[str, Any] = {
        "/v2": {"get": _v2_op("serverMetadata", "Server name, version and extensions.", [], {"type": "object"},
                              ["200"])},
        "/v2/health/live": {"get": _v2_op("serverLive", "Whether the server is live.", [], {"type": "object"},
                                          ["200"])},
        "/v2/health/ready": {"get": _v2_op("serverReady", "Whether every start-up model has a ready worker.", [],
                                           {"type": "object"}, ["200", "503"])},
        "/v2/repository/index": {"post": _v2_op("repositoryIndex", "Every model and its state (Triton's model "
                                                "repository extension).", [], {"type": "array", "items": {}},
                                                ["200"])},
    }
    for prefix, params, tag in (("/v2/models/{model_name}", [model], ""),
                                ("/v2/models/{model_name}/versions/{model_version}", [model, version], "Version")):
        paths[prefix] = {"get": _v2_op(f"modelMetadata{tag}", "A model's inputs and outputs.", params,
                                       _V2_METADATA, ["200", "404"])}
        paths[prefix + "/ready"] = {"get": _v2_op(f"modelReady{tag}", "Whether a model has a ready worker.", params,
                                                  {"type": "object"}, ["200", "404", "503"])}
        paths[prefix + "/infer"] = {"post": _v2_op(f"modelInfer{tag}", "Run an inference.", [*params, length],
                                                   _V2_RESPONSE, infer_codes, infer_body)}
    for name in models:
        paths[f"/v2/models/{name}"] = {"get": _v2_op(f"metadata_{name}", f"Model {name}'s inputs and outputs.", [],
                                                     _V2_METADATA, ["200"])}
        paths[f"/v2/models/{name}/infer"] = {"post": _v2_op(f"infer_{name}", f"Run model {name}.", [length],
                                                            _V2_RESPONSE, infer_codes, infer_body)}
    doc = _doc("Open Inference Protocol (KServe v2)", paths)
    doc["info"]["description"] = "The KServe v2 REST API served by mmsctl beside MMS's inference API."
    return doc
