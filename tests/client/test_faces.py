"""The client core through both faces (sync and async) over httpx's MockTransport.

Every test runs twice: once with ``ManagementClient``/``HttpApi`` and friends, once with
``AsyncManagementClient``/``AsyncHttpApi``; the operations are the same code, so the
answers must be the same.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from mmsctl import __version__
from mmsctl.client._errors import (
    ConnectionRefused,
    ModelApiDisabled,
    RemoteArchiveNotFound,
    RemoteModelNotFound,
    RemoteVersionNotFound,
    WorkersNotReady,
)
from mmsctl.client.contexts import Context
from mmsctl.client.metrics import NoMetricsUrl
from mmsctl.errors import ApiError, AuthenticationFailed, ConnectionFailed, RequestTimeout, UsageError
from tests.client.faces import INFERENCE, MANAGEMENT, Face, Server, error_body, key_file


@pytest.fixture(params=["sync", "async"])
def face(request: pytest.FixtureRequest) -> Face:
    return Face(request.param)


def _models(names: list[str], token: Any = None) -> httpx.Response:
    data: dict[str, Any] = {"models": [{"modelName": n, "modelUrl": f"{n}.mar"} for n in names]}
    if token is not None:
        data["nextPageToken"] = token
    return httpx.Response(200, json=data)


# --- paging and encoding ---


def test_list_follows_page_tokens_encoded_and_stops_on_an_empty_page(face: Face) -> None:
    token = "a&b=c d/+%?#é"  # a server may put anything in a token: it must come back intact
    server = Server().then(_models(["a", "b"], token), _models(["c"], "2"), _models([], "3"))
    client = face.management(server)
    try:
        names = [m.name for m in client.list_models(limit=2)]
    finally:
        client.close()
    assert names == ["a", "b", "c"]
    assert [r.url.params.get("next_page_token") for r in server.requests] == [None, token, "2"]
    assert server.requests[1].url.query == b"limit=2&next_page_token=a%26b%3Dc+d%2F%2B%25%3F%23%C3%A9"
    assert all(r.url.params["limit"] == "2" for r in server.requests)


def test_list_stops_when_a_server_repeats_its_token(face: Face) -> None:
    server = Server(default=lambda request: _models(["x"], "same"))
    client = face.management(server)
    try:
        assert [m.name for m in client.list_models()] == ["x", "x"]
    finally:
        client.close()
    assert len(server.requests) == 2  # the second "same" token is not followed


@pytest.mark.parametrize("name, version, path", [
    ("a b/c?#%é", None, "/models/a%20b%2Fc%3F%23%25%C3%A9"),
    ("noop", "1.0/x", "/models/noop/1.0%2Fx"),
])
def test_model_names_and_versions_are_one_encoded_segment(face: Face, name: str, version: Any, path: str) -> None:
    server = Server(default=lambda request: httpx.Response(200, json={"modelName": name, "workers": []}))
    client = face.management(server)
    try:
        detail = client.describe(name, version)
        client.scale(name, 1, version=version)
    finally:
        client.close()
    assert detail.name == name and detail.listed is False
    assert server.paths() == [path, path + "?min_worker=1&synchronous=false"]


def test_predict_path_is_encoded(face: Face) -> None:
    server = Server(default=lambda request: httpx.Response(200, content=b"out", headers={"content-type": "text/plain"}))
    client = face.inference(server)
    try:
        result = client.predict("my model?", b"in", "application/octet-stream", version="2.0")
    finally:
        client.close()
    assert (result.status, result.body, result.content_type) == (200, b"out", "text/plain")
    (request,) = server.requests
    assert request.url.raw_path == b"/predictions/my%20model%3F/2.0"
    assert request.content == b"in" and request.headers["content-type"] == "application/octet-stream"


def test_an_empty_model_name_is_a_usage_error_before_any_request(face: Face) -> None:
    server = Server()
    client = face.management(server)
    try:
        with pytest.raises(UsageError, match="model name is empty"):
            client.describe("")
    finally:
        client.close()
    assert server.requests == []


def test_torchserve_list_describe_is_unwrapped_and_marked(face: Face) -> None:
    entries = [{"modelName": "m", "modelVersion": v, "workers": [{"id": "1", "status": "READY"}]} for v in ("1", "2")]
    server = Server(default=lambda request: httpx.Response(200, json=entries))
    client = face.management(server)
    try:
        details = client.describe_all("m", "all")
    finally:
        client.close()
    assert [(d.version, d.ready_workers, d.listed) for d in details] == [("1", 1, True), ("2", 1, True)]
    assert server.paths() == ["/models/m/all"]


def test_an_answer_that_is_not_json_is_an_api_error(face: Face) -> None:
    server = Server(default=lambda request: httpx.Response(200, text="<html>proxy</html>"))
    client = face.management(server)
    try:
        with pytest.raises(ApiError, match="the answer is not JSON"):
            client.list_models()
    finally:
        client.close()


# --- tokens and headers per API ---


def test_each_api_gets_its_own_key_and_metrics_the_management_key(face: Face, tmp_path) -> None:
    context = Context("ts", INFERENCE, MANAGEMENT, "http://metrics.test:8082", key_file(tmp_path / "key_file.json"))
    server = Server(default=lambda request: {
        "/models": _models([]),
        "/ping": httpx.Response(200, json={"status": "Healthy"}),
        "/metrics": httpx.Response(200, text="# TYPE up gauge\nup 1\n"),
    }.get(request.url.path, httpx.Response(200, json={})))
    management, inference, metrics = (face.management(server, context), face.inference(server, context),
                                      face.metrics(server, context))
    try:
        management.list_models()
        assert inference.ping(detect=False).healthy
        assert [s.name for s in metrics.fetch()] == ["up"]
    finally:
        for client in (management, inference, metrics):
            client.close()
    seen = {r.url.path: r.headers.get("authorization") for r in server.requests}
    assert seen == {"/models": "Bearer M-key", "/ping": "Bearer I-key", "/metrics": "Bearer M-key"}
    assert {r.headers["user-agent"] for r in server.requests} == {f"mmsctl/{__version__}"}


def test_no_token_file_sends_no_authorization(face: Face) -> None:
    server = Server(default=lambda request: _models([]))
    client = face.management(server)
    try:
        client.list_models()
    finally:
        client.close()
    assert "authorization" not in server.requests[0].headers


def test_a_context_without_metrics_url_is_a_typed_config_error(face: Face) -> None:
    with pytest.raises(NoMetricsUrl, match="context 'bare' has no metrics URL") as info:
        face.metrics(Server(), Context("bare", INFERENCE, MANAGEMENT))
    assert info.value.exit_code == 2 and info.value.context == "bare" and info.value.hint is None


def test_metrics_keep_declared_families_without_samples(face: Face) -> None:
    text = "# TYPE reqs counter\n# TYPE lat histogram\nlat_bucket{le=\"+Inf\"} 0\nlat_sum 0\nlat_count 0\n"
    server = Server(default=lambda request: httpx.Response(200, text=text))
    client = face.metrics(server)
    try:
        scrape = client.scrape()
    finally:
        client.close()
    assert scrape.families == {"reqs": "counter", "lat": "histogram"}
    assert {s.name for s in scrape.samples} == {"lat_bucket", "lat_sum", "lat_count"}


# --- error translation: one case per row of client/_errors.py's table ---

_TRANSPORT_ROWS = [
    (httpx.ConnectError("[Errno 111] Connection refused"), ConnectionRefused,
     "cannot connect to management.test:8081: connection refused"),
    (httpx.ConnectError("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"), ConnectionFailed,
     "TLS error talking to management.test:8081"),
    (httpx.ConnectError("[Errno -2] Name or service not known"), ConnectionFailed,
     "cannot resolve management.test:8081"),
    (httpx.ConnectTimeout("timed out"), ConnectionFailed, "cannot connect to management.test:8081: connection timed out"),
    (httpx.ReadTimeout("timed out"), RequestTimeout, "management.test:8081 did not answer after 30 s"),
]


@pytest.mark.parametrize("exc, kind, message", _TRANSPORT_ROWS, ids=lambda v: type(v).__name__)
def test_a_call_without_an_answer_is_translated(face: Face, exc: Exception, kind: type, message: str) -> None:
    server = Server(default=lambda request: exc)
    client = face.management(server, retries=0)
    try:
        with pytest.raises(kind) as info:
            client.list_models()
    finally:
        client.close()
    assert type(info.value) is kind and str(info.value).startswith(message)
    assert info.value.hint is None  # hints that name flags are the CLI's


_ANSWER_ROWS = [
    ("describe", error_body(400, "InvalidKeyException", "Token Authorization failed"), AuthenticationFailed,
     "authentication failed on management.test:8081: Token Authorization failed", 6),
    ("describe", httpx.Response(401), AuthenticationFailed, "authentication failed on management.test:8081", 6),
    ("describe", httpx.Response(403, text="forbidden"), AuthenticationFailed,
     "authentication failed on management.test:8081: forbidden", 6),
    ("describe", error_body(404, "ModelNotFoundException", "Model not found: m"), RemoteModelNotFound,
     "model m not found on management.test:8081", 3),
    ("describe", error_body(404, "ModelVersionNotFoundException", "Model version: 9 does not exist"),
     RemoteVersionNotFound, "model m has no such version on management.test:8081: Model version: 9 does not exist", 3),
    ("register", error_body(404, "ModelNotFoundException", "Model not found in model store: x.mar"),
     RemoteArchiveNotFound, "register failed on management.test:8081: Model not found in model store: x.mar", 3),
    ("register", error_body(405, "MethodNotAllowedException", "Requested method is not allowed"), ModelApiDisabled,
     "management.test:8081 refused to register: this server has its model API disabled", 8),
    ("unregister", error_body(405, "MethodNotAllowedException", "Requested method is not allowed"), ModelApiDisabled,
     "management.test:8081 refused to unregister", 8),
    ("register", error_body(409, "ConflictStatusException", "Model m is already registered."), ApiError,
     "register failed on management.test:8081: Model m is already registered. (ConflictStatusException 409)", 8),
    ("describe", httpx.Response(500, text="boom"), ApiError, "describe failed on management.test:8081: boom (HTTP 500)", 8),
]


def _do(client: Any, operation: str) -> Any:
    if operation == "register":
        return client.register("x.mar")
    if operation == "unregister":
        return client.unregister("m")
    return client.describe("m", "9")


@pytest.mark.parametrize("operation, answer, kind, message, code", _ANSWER_ROWS,
                         ids=[f"{r[0]}-{r[1].status_code}-{r[2].__name__}" for r in _ANSWER_ROWS])
def test_an_error_answer_is_translated(face: Face, operation: str, answer: httpx.Response, kind: type,
                                       message: str, code: int) -> None:
    server = Server(default=lambda request: answer)
    client = face.management(server, retries=0)
    try:
        with pytest.raises(kind) as info:
            _do(client, operation)
    finally:
        client.close()
    assert type(info.value) is kind and str(info.value).startswith(message), str(info.value)
    assert info.value.exit_code == code and info.value.hint is None


def test_ping_answers_for_an_unhealthy_or_unreachable_server(face: Face) -> None:
    server = Server().then(httpx.Response(503, json={"status": "Unhealthy"}),
                           httpx.ConnectError("[Errno 111] Connection refused"),
                           error_body(400, "InvalidKeyException", "bad key"))
    client = face.inference(server, retries=0)
    try:
        unhealthy = client.ping(detect=False)
        down = client.ping(detect=False)
        refused = client.ping(detect=False)
    finally:
        client.close()
    assert (unhealthy.healthy, unhealthy.status, unhealthy.error) == (False, "Unhealthy", None)
    assert not down.healthy and isinstance(down.error, ConnectionRefused)
    assert (refused.status, refused.server) == ("authentication failed", "torchserve")
    assert isinstance(refused.error, AuthenticationFailed)
    assert len(server.requests) == 3  # retries=0: ping is not retried either


def test_ping_detects_the_server_kind(face: Face) -> None:
    server = Server(default=lambda request: httpx.Response(200, json={"status": "Healthy"})
                    if request.method == "GET" else
                    httpx.Response(200, json={"info": {"title": "TorchServe APIs", "version": "0.12.0"}}))
    client = face.inference(server)
    try:
        result = client.ping()
    finally:
        client.close()
    assert (result.healthy, result.server, result.version) == (True, "torchserve", "0.12.0")
    assert [r.method for r in server.requests] == ["GET", "OPTIONS"]


# --- retries: idempotent calls only ---


def test_get_is_retried_on_503_with_doubling_backoff(face: Face) -> None:
    server = Server().then(error_body(503, "ServiceUnavailableException", "busy"), httpx.Response(502))
    sleeps: list[float] = []
    response = face.api(server, sleeps).request("GET", "/models")
    assert response.status_code == 200 and len(server.requests) == 3
    assert sleeps == pytest.approx([0.2, 0.4])


def test_put_is_retried_after_a_broken_connection(face: Face) -> None:
    server = Server().then(httpx.ReadError("connection reset"))
    sleeps: list[float] = []
    face.api(server, sleeps).request("PUT", "/models/m", params={"min_worker": 2})
    assert [r.method for r in server.requests] == ["PUT", "PUT"] and sleeps == pytest.approx([0.2])


@pytest.mark.parametrize("method", ["POST", "DELETE"])
def test_a_sent_post_or_delete_is_never_sent_again(face: Face, method: str) -> None:
    server = Server().then(httpx.ReadError("connection reset"), error_body(503, "ServiceUnavailableException", "busy"))
    sleeps: list[float] = []
    api = face.api(server, sleeps)
    with pytest.raises(ConnectionFailed, match="connection to management.test:8081 failed"):
        api.request(method, "/models", content=b"payload")
    with pytest.raises(ApiError, match="busy"):
        api.request(method, "/models")
    assert len(server.requests) == 2 and sleeps == []


def test_a_refused_connection_is_retried_for_any_method(face: Face) -> None:
    server = Server(default=lambda request: httpx.ConnectError("[Errno 111] Connection refused"))
    sleeps: list[float] = []
    with pytest.raises(ConnectionRefused):
        face.api(server, sleeps).request("POST", "/models")
    assert len(server.requests) == 3 and sleeps == pytest.approx([0.2, 0.4])


def test_a_read_timeout_is_never_retried(face: Face) -> None:
    server = Server(default=lambda request: httpx.ReadTimeout("timed out"))
    sleeps: list[float] = []
    with pytest.raises(RequestTimeout, match="did not answer after 0.5 s"):
        face.api(server, sleeps, timeout=0.5).request("GET", "/models")
    assert len(server.requests) == 1 and sleeps == []


def test_per_call_retries_override_and_ok_statuses_are_not_retried(face: Face) -> None:
    busy = error_body(503, "ServiceUnavailableException", "busy")
    server = Server().then(busy, busy, busy)
    sleeps: list[float] = []
    api = face.api(server, sleeps, retries=0)
    assert api.request("GET", "/ping", ok_statuses=(503,)).status_code == 503
    assert len(server.requests) == 1 and sleeps == []
    with pytest.raises(ApiError, match="busy") as info:
        api.request("GET", "/models", retries=1)
    assert info.value.status == 503
    assert len(server.requests) == 3 and sleeps == pytest.approx([0.2])


# --- operations of several calls ---


def test_scale_waits_for_ready_workers_between_pauses(face: Face) -> None:
    ready = iter([0, 1, 2])

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "PUT":
            return httpx.Response(202, json={"status": "Processing worker updates..."})
        n = next(ready)
        return httpx.Response(200, json={"modelName": "m", "workers": [{"id": str(i), "status": "READY"}
                                                                      for i in range(n)]})

    server = Server(default=answer)
    seen: list[int] = []
    client = face.management(server)
    try:
        result = client.scale("m", 2, wait=True, timeout=10, poll_interval=0.01,
                              on_progress=lambda d: seen.append(d.ready_workers))
    finally:
        client.close()
    assert (result.status, result.message, result.ready, result.total, result.waited) == (
        202, "Processing worker updates...", 2, 2, True)
    assert seen == [0, 1, 2] and [r.method for r in server.requests] == ["PUT", "GET", "GET", "GET"]


def test_a_wait_that_runs_out_is_workers_not_ready(face: Face) -> None:
    server = Server(default=lambda request: httpx.Response(200, json={"modelName": "m", "workers": []}))
    client = face.management(server)
    try:
        with pytest.raises(WorkersNotReady, match=r"gave up waiting for m .*: 0 of 3 workers ready") as info:
            client.wait_for_workers("m", 3, timeout=0.05, poll_interval=0.01)
    finally:
        client.close()
    assert info.value.exit_code == 7 and isinstance(info.value, RequestTimeout)
    assert (info.value.model, info.value.ready, info.value.wanted) == ("m", 0, 3)


def test_scale_checks_its_counts_before_sending(face: Face) -> None:
    server = Server()
    client = face.management(server)
    try:
        with pytest.raises(UsageError, match=r"max_workers \(2\) is below min_workers \(3\)"):
            client.scale("m", 3, 2)
        with pytest.raises(UsageError, match="min_workers must be 0 or more"):
            client.scale("m", -1)
    finally:
        client.close()
    assert server.requests == []


def test_register_sends_its_options_and_reads_the_status(face: Face) -> None:
    server = Server(default=lambda request: httpx.Response(200, json={"status": 'Model "x" registered'}))
    client = face.management(server)
    try:
        result = client.register("https://h/x.mar", model_name="x y", initial_workers=0, synchronous=False)
    finally:
        client.close()
    assert (result.status, result.message, result.in_progress) == (200, 'Model "x" registered', False)
    params = dict(server.requests[0].url.params)
    assert params == {"url": "https://h/x.mar", "model_name": "x y", "initial_workers": "0", "synchronous": "false"}


def test_an_unknown_context_url_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="bad server URL"):
        Face("sync").management(Server(), Context("bad", "http://[::1", "http://[::1"))
