"""The cases of MMS 1.1.11's ModelServerTest.java, in its order, as HTTP requests and the checks it makes.

Each case is named after the Java method it ports and checks what that method asserts (a status text, an
error body's code and message, an HTTP status, a header, a log line). The Java test's client sends no
``Host`` header and its negative cases open a new connection each; the replay is an ordinary HTTP/1.1
client (a ``Host`` on every request, keep-alive), with one case of its own for a request without
``Host``. Where a Java case depends on a setting it changes through reflection, the case runs on the
phase's server with that setting (:data:`tests.support.mms_suite.PHASES`).
"""

from __future__ import annotations

import json
import re
import socket
from typing import Any, Callable, Optional
from urllib.parse import urlsplit

import httpx

from tests.support.mms_suite import Case, Session
from tests.support.paths import MMS_OPENAPI_DIR
from tests.support.waiting import wait_until

__all__ = ["CASES"]

ERROR_NOT_FOUND = "Requested resource is not found, please refer to API document."
ERROR_METHOD_NOT_ALLOWED = "Requested method is not allowed, please refer to API document."

OWN_OPENAPI = ("mmsctl publishes its own OpenAPI text (what it serves, its limits), not MMS's byte for byte")
STRICT_JSON = "mmsctl reads register bodies as strict JSON; MMS's Gson also takes single quotes"
TIMEOUT_408 = ("mmsctl unregisters at once when unregister_model_timeout is 0; MMS answers 408 and keeps the "
               "model (its process-kill wait of 0 s never succeeds)")
NO_HOST = "an HTTP/1.1 request without Host is a 400 in mmsctl (RFC 9112; nginx, Go and h11 answer the same)"
ALLOWED_URLS = "mmsctl downloads a register url only where allowed_urls allows it; MMS 1.1 downloads any"


def _show(resp: httpx.Response) -> str:
    return f"{resp.status_code} {resp.text[:300]!r}"


def _json(resp: httpx.Response) -> Any:
    try:
        return resp.json()
    except ValueError:
        raise AssertionError(f"not JSON: {_show(resp)}") from None


def expect_status(resp: httpx.Response, text: str, code: Optional[int] = None) -> None:
    """A StatusResponse ``{"status": text}`` (and the HTTP status, where the Java test checks it)."""
    body = _json(resp)
    assert isinstance(body, dict) and body.get("status") == text, f"want status {text!r}, got {_show(resp)}"
    assert code is None or resp.status_code == code, f"want HTTP {code}, got {_show(resp)}"


def expect_error(resp: httpx.Response, code: int, message: str) -> None:
    """An ErrorResponse with this code and message (what the Java test reads of it)."""
    body = _json(resp)
    assert isinstance(body, dict) and (body.get("code"), body.get("message")) == (code, message), \
        f"want error {code} {message!r}, got {_show(resp)}"


def expect_http(resp: httpx.Response, code: int) -> None:
    assert resp.status_code == code, f"want HTTP {code}, got {_show(resp)}"


def expect_body(resp: httpx.Response, text: str) -> None:
    assert resp.text == text, f"want body {text!r}, got {_show(resp)}"


def _register(s: Session, query: str) -> httpx.Response:
    return s.management.post(f"/models?{query}")


def load_tests(s: Session, model: str, name: str) -> httpx.Response:
    """The Java ``loadTests``: register synchronously with one worker."""
    return _register(s, f"url={model}&model_name={name}&initial_workers=1&synchronous=true")


def unload_tests(s: Session, name: str) -> None:
    """The Java ``unloadTests``: unregister, and check the status text."""
    expect_status(s.management.delete(f"/models/{name}"), f'Model "{name}" unregistered')


def _form(s: Session, path: str, body: str = "data=test") -> httpx.Response:
    return s.inference.post(path, content=body.encode(),
                            headers={"Content-Type": "application/x-www-form-urlencoded"})


def _json_post(s: Session, path: str) -> httpx.Response:
    return s.inference.post(path, content=b'{"data": "test"}', headers={"Content-Type": "application/json"})


def _multipart(s: Session, path: str, fields: Optional[dict[str, str]] = None) -> httpx.Response:
    return s.inference.post(path, data=fields or {}, files={"data": ("test.txt", b"test", "text/plain")})


# -- the startup, the API descriptions ---------------------------------------------------------------------
def case_ping(s: Session) -> None:
    resp = s.inference.get("/ping")
    expect_status(resp, "Healthy")
    assert "x-request-id" in resp.headers, f"no x-request-id: {dict(resp.headers)}"


def _mms_openapi(name: str) -> Any:
    return json.loads((MMS_OPENAPI_DIR / name).read_text())


def _openapi_paths(resp: httpx.Response) -> set[str]:
    body = _json(resp)
    assert resp.status_code == 200 and str(body.get("openapi", "")).startswith("3."), f"no OpenAPI: {_show(resp)}"
    return set(body["paths"])


def _root(s: Session, client: httpx.Client, reference: str) -> None:
    resp = client.options("/")
    if s.kind == "mms":
        assert _json(resp) == _mms_openapi(reference), f"not MMS's {reference}"
        return
    missing = set(_mms_openapi(reference)["paths"]) - _openapi_paths(resp)
    assert not missing, f"mmsctl's OpenAPI lacks MMS's paths {sorted(missing)}"


def case_root_inference(s: Session) -> None:
    _root(s, s.inference, "inference_open_api.json")


def case_root_management(s: Session) -> None:
    _root(s, s.management, "management_open_api.json")


def case_api_description(s: Session) -> None:
    resp = s.inference.get("/api-description")
    assert _json(resp) == _json(s.inference.options("/")), "/api-description is not what OPTIONS / answers"


def case_describe_api(s: Session) -> None:
    paths = _openapi_paths(s.inference.options("/predictions/noop_v0.1"))
    assert any("noop_v0.1" in p for p in paths), f"no path for noop_v0.1 in {sorted(paths)}"


# -- registration and scaling ------------------------------------------------------------------------------
def case_unregister_model(s: Session) -> None:
    unload_tests(s, "noop_v0.1")


def case_load_model(s: Session) -> None:
    resp = _register(s, "url=noop-v0.1&model_name=noop_v0.1&runtime=python&synchronous=false")
    expect_status(resp, 'Model "noop_v0.1" registered')


def case_sync_scale_model(s: Session) -> None:
    expect_status(s.management.put("/models/noop_v0.1?synchronous=true&min_worker=1"), "Workers scaled")


def case_scale_model(s: Session) -> None:
    expect_status(s.management.put("/models/noop_v0.1?min_worker=2"), "Processing worker updates...")


def case_list_models(s: Session) -> None:
    body = _json(s.management.get("/models?limit=200&nextPageToken=X"))
    assert len(body["models"]) == 2, f"want 2 models, got {body}"


def case_describe_model(s: Session) -> None:
    body = _json(s.management.get("/models/noop_v0.1"))
    assert len(body["workers"]) > 1, f"want more than one worker, got {body}"


def case_load_model_with_initial_workers(s: Session) -> None:
    unload_tests(s, "noop_v0.1")
    resp = _register(s, "url=noop-v0.1&model_name=noop_v0.1&initial_workers=1&synchronous=true")
    expect_status(resp, "Workers scaled")


def case_load_model_with_initial_workers_with_json_req_body(s: Session) -> None:
    unload_tests(s, "noop_v0.1")
    body = "{'url':'noop-v0.1', 'model_name':'noop_v0.1', 'initial_workers':'1', 'synchronous':'true'}"
    resp = s.management.post("/models", content=body.encode(), headers={"Content-Type": "application/json"})
    if s.kind == "mms":
        expect_status(resp, "Workers scaled")
        return
    body_json = _json(resp)
    assert resp.status_code == 400 and body_json.get("type") == "BadRequestException", _show(resp)
    strict = json.dumps({"url": "noop-v0.1", "model_name": "noop_v0.1", "initial_workers": "1",
                         "synchronous": "true"})
    resp = s.management.post("/models", content=strict.encode(), headers={"Content-Type": "application/json"})
    expect_status(resp, "Workers scaled")


# -- predictions -------------------------------------------------------------------------------------------
def case_predictions(s: Session) -> None:
    expect_body(_form(s, "/predictions/noop"), "OK")


def case_predictions_binary(s: Session) -> None:
    resp = s.inference.post("/predictions/noop", content=b"test", headers={"Content-Type": "application/octet-stream"})
    expect_body(resp, "OK")


def case_predictions_json(s: Session) -> None:
    expect_body(_json_post(s, "/predictions/noop"), "OK")


def case_invocations_json(s: Session) -> None:
    expect_body(_json_post(s, "/invocations?model_name=noop"), "OK")


def case_invocations_multipart(s: Session) -> None:
    expect_body(_multipart(s, "/invocations", {"model_name": "noop_v0.1"}), "OK")


def case_models_invoke_json(s: Session) -> None:
    expect_body(_json_post(s, "/models/noop/invoke"), "OK")


def case_models_invoke_multipart(s: Session) -> None:
    expect_body(_multipart(s, "/models/noop/invoke"), "OK")


def case_legacy_predict(s: Session) -> None:
    expect_body(s.inference.get("/noop/predict?data=test"), "OK")


def case_predictions_invalid_request_size(s: Session) -> None:
    resp = s.inference.post("/predictions/noop", content=bytes(11485760),
                            headers={"Content-Type": "application/octet-stream"})
    expect_http(resp, 413)


def case_predictions_valid_request_size(s: Session) -> None:
    resp = s.inference.post("/predictions/noop", content=bytes(10385760),
                            headers={"Content-Type": "application/octet-stream"})
    expect_http(resp, 200)


def _decoded(s: Session, model: str, name: str) -> httpx.Response:
    load_tests(s, model, name)
    resp = _json_post(s, f"/predictions/{name}")
    expect_http(resp, 200)
    return resp


def case_predictions_decode_request(s: Session) -> None:
    resp = _decoded(s, "noop-v1.0-config-tests", "noop-config")
    assert "bytearray" not in resp.text, f"a decoded body still came as bytes: {_show(resp)}"
    unload_tests(s, "noop-config")


def case_predictions_do_not_decode_request(s: Session) -> None:
    resp = _decoded(s, "noop-v1.0-config-tests", "noop-config")
    assert "bytearray" in resp.text, f"the body was decoded: {_show(resp)}"
    unload_tests(s, "noop-config")


def case_predictions_modify_response_header(s: Session) -> None:
    resp = _decoded(s, "respheader-test", "respheader")
    assert resp.headers.get("dummy") == "1", f"no header dummy: 1 in {dict(resp.headers)}"
    assert resp.headers.get("content-type") == "text/plain", f"content-type {resp.headers.get('content-type')!r}"
    assert "bytearray" in resp.text, f"the body was decoded: {_show(resp)}"
    unload_tests(s, "respheader")


def case_predictions_no_manifest(s: Session) -> None:
    resp = _decoded(s, "noop-no-manifest", "nomanifest")
    expect_body(resp, "OK")
    unload_tests(s, "nomanifest")


def case_model_register_with_default_workers(s: Session) -> None:
    load_tests(s, "noop-v1.0", "noop_default_model_workers")
    resp = s.management.get("/models/noop_default_model_workers")
    expect_http(resp, 200)
    assert _json(resp)["minWorkers"] == 1, _show(resp)
    unload_tests(s, "noop_default_model_workers")


def _log_count(s: Session, pattern: str) -> int:
    return s.target.log().count(pattern)


def case_logging(s: Session) -> None:
    load_tests(s, "logging", "logging")
    for _ in range(5):
        expect_http(_form(s, "/predictions/logging"), 200)
    # The log is written as the worker's lines arrive: wait for them (bounded), as a reader of the log would.
    wait_until(lambda: _log_count(s, "LoggingService inference [PID]:") >= 2, timeout=10,
               what="the worker's log lines in the server's log")
    unload_tests(s, "logging")


def case_logging_unload(s: Session) -> None:
    load_tests(s, "logging", "logging")
    unload_tests(s, "logging")
    wait_until(lambda: _log_count(s, "Model logging unregistered") >= 1, timeout=10,
               what="'Model logging unregistered' in the server's log")


def case_loading_memory_error(s: Session) -> None:
    resp = _register(s, "url=loading-memory-error&model_name=memory_error&runtime=python&initial_workers=1"
                        "&synchronous=true")
    expect_http(resp, 507)


def case_prediction_memory_error(s: Session) -> None:
    resp = _register(s, "url=prediction-memory-error&model_name=pred-err&runtime=python&initial_workers=1"
                        "&synchronous=true")
    expect_http(resp, 200)
    expect_http(s.inference.post("/predictions/pred-err", content=b"data=invalid_output"), 507)
    expect_http(s.management.delete("/models/pred-err"), 200)


def case_prediction_custom_error_code(s: Session) -> None:
    resp = _register(s, "url=custom-return-code&model_name=custom-return-code&runtime=python&initial_workers=1"
                        "&synchronous=true")
    expect_http(resp, 200)
    resp = s.inference.post("/predictions/custom-return-code", content=b"data=invalid_output")
    expect_error(resp, 599, "Some Prediction Error")


_METRIC = re.compile(r"(\w+)\.(\w+):[0-9.]+\|#Level:(\w+)")


def case_metric_manager(s: Session) -> None:
    """The host metrics MMS's MetricManager collects, as the lines it logs (the Java test reads them in the
    JVM). Its check of ``DiskUsed`` names a metric MMS never emits; ``DiskUsage`` is the one it means."""

    def host_metrics() -> dict[str, tuple[str, str]]:
        return {m.group(1): (m.group(2), m.group(3)) for m in _METRIC.finditer(s.target.metrics_log())}

    found = wait_until(lambda: {"CPUUtilization", "MemoryUsed", "DiskUsage"} <= set(host_metrics()) and host_metrics(),
                       timeout=15, what="host metrics in the log")
    assert found["CPUUtilization"][0] == "Percent", found
    assert found["MemoryUsed"][0] == "Megabytes", found
    assert found["DiskUsage"][1] == "Host", found


def case_error_batch(s: Session) -> None:
    expect_status(load_tests(s, "error_batch", "err_batch"), "Workers scaled")
    resp = _form(s, "/predictions/err_batch", "data=invalid_output")
    expect_http(resp, 507)
    expect_body(resp, "Invalid response")


# -- negative cases ----------------------------------------------------------------------------------------
#: The Java test's negative cases that are one request and the error it gets: (case, API, method, path, code,
#: message), in its order.
ONE_REQUEST_ERRORS = [
    ("testInvalidRootRequest", "inference", "GET", "/", 405, ERROR_METHOD_NOT_ALLOWED),
    ("testInvalidInferenceUri", "inference", "GET", "/InvalidUrl", 404, ERROR_NOT_FOUND),
    ("testInvalidPredictionsUri", "inference", "GET", "/predictions", 404, ERROR_NOT_FOUND),
    ("testInvalidDescribeModel", "inference", "OPTIONS", "/predictions/InvalidModel", 404,
     "Model not found: InvalidModel"),
    ("testPredictionsModelNotFound", "inference", "GET", "/predictions/InvalidModel", 404,
     "Model not found: InvalidModel"),
    ("testInvalidManagementUri", "management", "GET", "/InvalidUrl", 404, ERROR_NOT_FOUND),
    ("testInvalidModelsMethod", "management", "PUT", "/models", 405, ERROR_METHOD_NOT_ALLOWED),
    ("testInvalidModelMethod", "management", "POST", "/models/noop", 405, ERROR_METHOD_NOT_ALLOWED),
    ("testDescribeModelNotFound", "management", "GET", "/models/InvalidModel", 404, "Model not found: InvalidModel"),
    ("testRegisterModelMissingUrl", "management", "POST", "/models", 400, "Parameter url is required."),
    ("testRegisterModelInvalidRuntime", "management", "POST", "/models?url=InvalidUrl&runtime=InvalidRuntime", 400,
     "Invalid RuntimeType value: InvalidRuntime"),
    ("testRegisterModelNotFound", "management", "POST", "/models?url=InvalidUrl", 404,
     "Model not found in model store: InvalidUrl"),
]


def _one_request(name: str, api: str, method: str, path: str, code: int, message: str) -> Case:
    def run(s: Session) -> None:
        expect_error((s.inference if api == "inference" else s.management).request(method, path), code, message)

    return Case(name, "main", run)


def case_register_model_conflict(s: Session) -> None:
    query = "url=noop-v0.1&model_name=noop_v0.1&runtime=python&synchronous=false"
    _register(s, query)
    expect_error(_register(s, query), 409, "Model noop_v0.1 is already registered.")


def case_register_model_malformed_url(s: Session) -> None:
    expect_error(_register(s, "url=http%3A%2F%2Flocalhost%3Aaaaa"), 404, "Invalid model url: http://localhost:aaaa")


def _closed_port() -> int:
    """A loopback port nothing listens on (the Java test's fixed 18888)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def case_register_model_connection_failed(s: Session) -> None:
    url = f"http://localhost:{_closed_port()}/fake.mar"
    expect_error(s.management.post("/models", params={"url": url, "synchronous": "false"}), 400,
                 f"Failed to download model from: {url}")


def _missing_archive_url(s: Session) -> str:
    """A URL the server's own inference API answers 404 (the Java test uses MMS's HTTPS port)."""
    return f"http://localhost:{urlsplit(s.target.inference_url).port}/fake.mar"


def case_register_model_http_error(s: Session) -> None:
    url = _missing_archive_url(s)
    expect_error(s.management.post("/models", params={"url": url, "synchronous": "false"}), 400,
                 f"Failed to download model from: {url}, code: 404")


def case_register_model_invalid_path(s: Session) -> None:
    expect_error(_register(s, "url=..%2Ffake.mar&synchronous=false"), 404,
                 "Relative path is not allowed in url: ../fake.mar")


def case_scale_model_not_found(s: Session) -> None:
    expect_error(s.management.put("/models/fake"), 404, "Model not found: fake")


def case_scale_model_failure(s: Session) -> None:
    expect_http(_register(s, "url=init-error&model_name=init-error&synchronous=false"), 200)
    resp = s.management.put("/models/init-error?synchronous=true&min_worker=1")
    expect_http(resp, 500)
    expect_error(resp, 500, "Failed to start workers")


def case_unregister_model_not_found(s: Session) -> None:
    expect_error(s.management.delete("/models/fake"), 404, "Model not found: fake")


def case_unregister_model_timeout(s: Session) -> None:
    expect_status(_register(s, "url=noop-v0.1&model_name=noop_v0.1&runtime=python&synchronous=false"),
                  'Model "noop_v0.1" registered')
    resp = s.management.delete("/models/noop_v0.1")
    if s.kind == "mms":
        expect_error(resp, 408, "Timed out while cleaning resources: noop_v0.1")
    else:
        expect_status(resp, 'Model "noop_v0.1" unregistered', 200)


def case_unregister_model_timeout_120(s: Session) -> None:
    expect_http(s.management.delete("/models/noop_v0.1"), 200)


def case_invalid_model(s: Session) -> None:
    expect_status(load_tests(s, "invalid", "invalid"), "Workers scaled")
    resp = _form(s, "/predictions/invalid", "data=invalid_output")
    expect_http(resp, 503)
    expect_error(resp, 503, "Invalid model predict output")


# -- cases of the replay's own, for its transport --------------------------------------------------------
def case_request_without_host(s: Session) -> None:
    """The Java test's client sends HTTP/1.1 without ``Host``: MMS answers it, mmsctl refuses it."""
    where = urlsplit(s.target.inference_url)
    with socket.create_connection((where.hostname, where.port), timeout=30) as sock:
        sock.sendall(b"GET /ping HTTP/1.1\r\nConnection: close\r\n\r\n")
        head = sock.makefile("rb").readline()
    status = int(head.split()[1])
    assert status == (200 if s.kind == "mms" else 400), f"got {head!r}"


def case_download_refused_without_allowed_urls(s: Session) -> None:
    """On a server without ``allowed_urls``: MMS downloads (and fails, nothing is there); mmsctl refuses."""
    url = _missing_archive_url(s)
    resp = s.management.post("/models", params={"url": url, "synchronous": "false"})
    if s.kind == "mms":
        expect_error(resp, 400, f"Failed to download model from: {url}, code: 404")
    else:
        body = _json(resp)
        assert resp.status_code == 400 and str(body.get("message", "")).startswith("URL not allowed"), _show(resp)


def _case(fn: Callable[[Session], None], phase: str = "main", kept: Optional[str] = None,
          name: Optional[str] = None) -> Case:
    """*fn* as a case named after its Java method (``case_load_model`` -> ``testLoadModel``)."""
    words = fn.__name__.split("_")[1:]
    return Case(name or "test" + "".join(w.capitalize() for w in words), phase, fn, kept)


#: Every case, in ModelServerTest's order within each phase.
CASES: list[Case] = [
    _case(case_ping),
    _case(case_root_inference, kept=OWN_OPENAPI, name="testRoot(inference)"),
    _case(case_root_management, kept=OWN_OPENAPI, name="testRoot(management)"),
    _case(case_api_description),
    _case(case_describe_api, kept=OWN_OPENAPI),
    _case(case_unregister_model),
    _case(case_load_model),
    _case(case_sync_scale_model),
    _case(case_scale_model),
    _case(case_list_models),
    _case(case_describe_model),
    _case(case_load_model_with_initial_workers),
    _case(case_load_model_with_initial_workers_with_json_req_body, kept=STRICT_JSON,
          name="testLoadModelWithInitialWorkersWithJSONReqBody"),
    _case(case_predictions),
    _case(case_predictions_binary),
    _case(case_predictions_json),
    _case(case_invocations_json),
    _case(case_invocations_multipart),
    _case(case_models_invoke_json),
    _case(case_models_invoke_multipart),
    _case(case_legacy_predict),
    _case(case_predictions_invalid_request_size),
    _case(case_predictions_valid_request_size),
    _case(case_predictions_decode_request),
    _case(case_predictions_do_not_decode_request, "no-decode"),
    _case(case_predictions_modify_response_header, "no-decode"),
    _case(case_predictions_no_manifest),
    _case(case_model_register_with_default_workers),
    _case(case_logging),
    _case(case_logging_unload),
    _case(case_loading_memory_error),
    _case(case_prediction_memory_error),
    _case(case_prediction_custom_error_code),
    _case(case_metric_manager),
    _case(case_error_batch),
    *(_one_request(*row) for row in ONE_REQUEST_ERRORS),
    _case(case_register_model_conflict),
    _case(case_register_model_malformed_url),
    _case(case_register_model_connection_failed),
    _case(case_register_model_http_error),
    _case(case_register_model_invalid_path),
    _case(case_scale_model_not_found),
    _case(case_scale_model_failure),
    _case(case_unregister_model_not_found),
    _case(case_unregister_model_timeout, "unregister-timeout-0", kept=TIMEOUT_408,
          name="testUnregisterModelTimeout(0)"),
    _case(case_unregister_model_timeout_120, name="testUnregisterModelTimeout(120)"),
    _case(case_invalid_model),
    _case(case_request_without_host, kept=NO_HOST),
    _case(case_download_refused_without_allowed_urls, "no-decode", kept=ALLOWED_URLS),
]
