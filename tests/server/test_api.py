"""The inference and management APIs against a real server process, checked against MMS's contract."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import httpx
import pytest

from tests.support.error_bodies import is_error_body
from tests.support.mmsctl_server import ServerInfo
from tests.support.paths import MMS_OPENAPI_DIR, require_shared
from tests.support.waiting import wait_until


def _mms_error(resp: httpx.Response, status: int, type_: str) -> dict:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert is_error_body(body), body
    assert body["code"] == status and body["type"] == type_
    assert resp.headers.get("x-request-id")
    return body


# -- inference --------------------------------------------------------------------------------
def test_ping_is_healthy(server: ServerInfo) -> None:
    resp = httpx.get(f"{server.inference_url}/ping")
    assert resp.status_code == 200
    assert resp.json() == {"status": "Healthy"}
    assert resp.headers["x-request-id"]


def test_ping_model(server: ServerInfo) -> None:
    assert httpx.get(f"{server.inference_url}/ping/noop").json() == {"status": "Healthy"}
    _mms_error(httpx.get(f"{server.inference_url}/ping/nope"), 404, "ModelNotFoundException")


def test_the_lean_and_the_aiohttp_path_answer_alike(server: ServerInfo) -> None:
    """A plain prediction, a chunked one and a ping (the lean path) and the same with a query (aiohttp's path)
    carry the same status, headers and body, and all are counted."""
    url = f"{server.inference_url}/predictions/noop"

    def chunks():
        yield b"hel"
        yield b"lo"

    with httpx.Client(timeout=10) as client:
        answers = [client.post(url, content=b"hello"), client.post(url + "?probe=1", content=b"hello"),
                   client.post(url, content=chunks())]
        pings = [client.get(f"{server.inference_url}/ping"), client.get(f"{server.inference_url}/ping?probe=1")]
    for group in (answers, pings):
        for resp in group:
            assert resp.headers["x-request-id"]
            assert (resp.status_code, resp.headers["content-type"], resp.text) == \
                (group[0].status_code, group[0].headers["content-type"], group[0].text)
    assert answers[0].text == "hello" and answers[0].headers["content-type"] == "application/octet-stream"
    assert pings[0].headers["content-type"] == "application/json; charset=utf-8"
    assert len({r.headers["x-request-id"] for r in answers + pings}) == 5


@pytest.mark.parametrize("query", ["", "?aiohttp=1"], ids=["lean", "aiohttp"])
def test_a_handler_s_answer_is_framed_by_the_server(server: ServerInfo, query: str) -> None:
    """A 204 or 304 goes without the body its handler returned (a client would read that body as the next
    answer); a 101 (no final answer, and no protocol is switched) is a 500; a handler's Content-Length,
    Transfer-Encoding, Connection and other framing headers are dropped, so each answer is framed once, by the
    server. The same on both paths, answers after answers on one connection."""
    m = server.management_url
    resp = httpx.post(f"{m}/models", params={"url": "framing", "initial_workers": "1", "synchronous": "true"},
                      timeout=60)
    assert resp.status_code == 200, resp.text
    url = f"{server.inference_url}/predictions/framing{query}"
    try:
        with httpx.Client(timeout=10) as client:
            for _ in range(2):
                for status in (204, 304):
                    empty = client.post(url, content=str(status).encode())
                    assert (empty.status_code, empty.content) == (status, b"")
                    assert "content-length" not in empty.headers and "content-type" not in empty.headers
                _mms_error(client.post(url, content=b"101"), 500, "InternalServerException")
                invalid = client.post(url, content=b"str404")  # a status that is no int
                _mms_error(invalid, 500, "InternalServerException")
                assert invalid.json()["message"] == "Invalid response from the model."
                framed = client.post(url, content=b"headers")
                assert (framed.status_code, framed.text) == (200, "hello")
                assert framed.headers.get_list("content-length") == ["5"] and framed.headers["x-kept"] == "yes"
                assert framed.headers.get_list("content-type") == ["text/plain"]
                assert framed.headers.get_list("x-request-id") != ["mine"]
                for name in ("transfer-encoding", "connection", "keep-alive", "upgrade", "trailer"):
                    assert name not in framed.headers, name
                assert framed.headers["date"] != "yesterday"
    finally:
        httpx.delete(f"{m}/models/framing", timeout=60)


@pytest.mark.parametrize("path", ["/v2/models/framing/infer", "/invocations"])
@pytest.mark.parametrize("query", ["", "?aiohttp=1"], ids=["lean", "aiohttp"])
def test_a_v2_call_whose_handler_answers_a_1xx_or_3xx_is_a_500(server: ServerInfo, query: str, path: str) -> None:
    """A v2 infer call fails with its handler's 4xx or 5xx; a 101 or a 304 is no error a client can act on (a 101
    would leave it waiting for a final answer), and a status set as a str ("404") is none at all: a v2 error of
    500 on both paths, and the connection goes on."""
    m = server.management_url
    resp = httpx.post(f"{m}/models", params={"url": "framing", "initial_workers": "1", "synchronous": "true"},
                      timeout=60)
    assert resp.status_code == 200, resp.text
    headers = {"X-Model-Name": "framing"} if path == "/invocations" else {}
    try:
        with httpx.Client(timeout=10) as client:
            for asked in ("101", "304", "str404", "101"):
                body = {"inputs": [{"name": "body", "shape": [1], "datatype": "BYTES", "data": [asked]}]}
                answer = client.post(f"{server.inference_url}{path}{query}", json=body, headers=headers)
                assert (answer.status_code, answer.json()) == (500, {"error": "Invalid response from the model."})
    finally:
        httpx.delete(f"{m}/models/framing", timeout=60)


def test_form_fields_reach_the_handler_alike_on_both_paths(server: ServerInfo) -> None:
    """A text field as text, a field of another type (no file name) as its bytes, a file as its bytes: the lean
    path (no query) and aiohttp's (a query) decode forms with the same function."""
    url = f"{server.inference_url}/predictions/noop"
    cases = [({"data": (None, "caf\u00e9")}, "caf\u00e9"), ({"data": (None, b"\x01\x02bin", "application/octet-stream")},
             "\x01\x02bin"), ({"data": ("k.jpg", b"JPEG", "image/jpeg")}, "JPEG")]
    for files, echoed in cases:
        answers = [httpx.post(url + query, files=files, timeout=10) for query in ("", "?x=1")]
        assert [(a.status_code, a.text) for a in answers] == [(200, echoed)] * 2, files
        assert "server" not in answers[0].headers and "server" in answers[1].headers


def test_predict_raw_body(server: ServerInfo) -> None:
    resp = httpx.post(f"{server.inference_url}/predictions/noop", content=b"hello")
    assert resp.status_code == 200
    assert resp.text == "hello"


@pytest.mark.parametrize("path", ["/noop/predict", "/invocations?model_name=noop", "/models/noop/invoke"])
def test_other_prediction_paths(server: ServerInfo, path: str) -> None:
    resp = httpx.post(f"{server.inference_url}{path}", content=b"abc")
    assert resp.status_code == 200, resp.text
    assert resp.text == "abc"


def test_invocations_model_from_header_and_default(server: ServerInfo) -> None:
    resp = httpx.post(f"{server.inference_url}/invocations", content=b"x", headers={"model_name": "noop"})
    assert resp.text == "x"
    # one start-up model: MMS uses it when no model is named
    assert httpx.post(f"{server.inference_url}/invocations", content=b"y").text == "y"


def test_multipart_and_form(server: ServerInfo) -> None:
    resp = httpx.post(f"{server.inference_url}/predictions/noop", files={"data": ("a.bin", b"filebytes")})
    assert resp.status_code == 200 and resp.text == "filebytes"
    resp = httpx.post(f"{server.inference_url}/predictions/noop", data={"data": "formvalue"})
    assert resp.status_code == 200 and resp.text == "formvalue"


def test_empty_body_is_answered(server: ServerInfo) -> None:
    resp = httpx.post(f"{server.inference_url}/predictions/noop", content=b"")
    assert resp.status_code == 200


def test_unknown_model_and_path(server: ServerInfo) -> None:
    body = _mms_error(httpx.post(f"{server.inference_url}/predictions/nope", content=b"x"),
                      404, "ModelNotFoundException")
    assert body["message"] == "Model not found: nope"
    _mms_error(httpx.get(f"{server.inference_url}/no/such/path"), 404, "ResourceNotFoundException")
    _mms_error(httpx.delete(f"{server.management_url}/models"), 405, "MethodNotAllowedException")


def test_body_over_max_request_size_is_413(server: ServerInfo) -> None:
    resp = httpx.post(f"{server.inference_url}/predictions/noop", content=b"x" * 200_000)
    _mms_error(resp, 413, "RequestEntityTooLargeException")


def test_api_description_matches_mms_paths(server: ServerInfo) -> None:
    for url, name in ((server.inference_url, "inference"), (server.management_url, "management")):
        reference = json.loads(require_shared(MMS_OPENAPI_DIR / f"{name}_open_api.json").read_text())
        ours = httpx.request("OPTIONS", url + "/").json()
        assert ours["openapi"].startswith("3.0")
        for path, methods in reference["paths"].items():
            assert path in ours["paths"], path
            for method, op in methods.items():
                assert method in ours["paths"][path], (path, method)
                theirs = set(op["responses"])
                mine = set(ours["paths"][path][method]["responses"])
                assert theirs <= mine, (path, method, theirs - mine)
    assert httpx.get(f"{server.inference_url}/api-description").status_code == 200


# -- management -------------------------------------------------------------------------------
def test_describe_has_mms_shape_and_workers(server: ServerInfo) -> None:
    resp = httpx.get(f"{server.management_url}/models/noop")
    assert resp.status_code == 200
    d = resp.json()
    for key in ("modelName", "modelVersion", "modelUrl", "runtime", "minWorkers", "maxWorkers",
                "batchSize", "maxBatchDelay", "loadedAtStartup", "workers"):
        assert key in d, key
    assert d["loadedAtStartup"] is True
    assert d["queueStatus"]["capacity"] > 0
    assert len(d["workers"]) == 1
    worker = d["workers"][0]
    assert worker["status"] == "READY" and worker["pid"] > 0 and worker["memoryUsage"] > 0
    _mms_error(httpx.get(f"{server.management_url}/models/nope"), 404, "ModelNotFoundException")


def test_register_scale_list_unregister(server: ServerInfo) -> None:
    m = server.management_url
    resp = httpx.post(f"{m}/models", params={"url": "echo", "model_name": "e1", "initial_workers": "1"},
                      timeout=60)
    assert resp.status_code == 200, resp.text
    assert resp.json() == {"status": "Workers scaled"}  # MMS's answer to a synchronous register
    _mms_error(httpx.post(f"{m}/models", params={"url": "echo", "model_name": "e1"}), 409,
               "ConflictStatusException")
    assert httpx.post(f"{server.inference_url}/predictions/e1", content=b"q").text == "q"

    resp = httpx.put(f"{m}/models/e1", params={"min_worker": "2", "synchronous": "true"}, timeout=60)
    assert resp.status_code == 200 and resp.json() == {"status": "Workers scaled"}
    assert len(httpx.get(f"{m}/models/e1").json()["workers"]) == 2
    resp = httpx.put(f"{m}/models/e1", params={"min_worker": "1"})
    assert resp.status_code == 202 and resp.json() == {"status": "Processing worker updates..."}

    # MMS paging: sorted names, nextPageToken whenever the page is full
    page = httpx.get(f"{m}/models", params={"limit": "1"}).json()
    assert page == {"nextPageToken": "1", "models": [{"modelName": "e1", "modelUrl": "echo"}]}
    page = httpx.get(f"{m}/models", params={"limit": "1", "next_page_token": "1"}).json()
    assert page["models"][0]["modelName"] == "noop" and page["nextPageToken"] == "2"
    assert "nextPageToken" not in httpx.get(f"{m}/models").json()

    resp = httpx.delete(f"{m}/models/e1", timeout=60)
    assert resp.status_code == 200 and resp.json() == {"status": 'Model "e1" unregistered'}
    _mms_error(httpx.delete(f"{m}/models/e1"), 404, "ModelNotFoundException")
    _mms_error(httpx.post(f"{server.inference_url}/predictions/e1", content=b"q"), 404,
               "ModelNotFoundException")


def test_register_with_zero_workers_then_predict_is_503(server: ServerInfo) -> None:
    m = server.management_url
    assert httpx.post(f"{m}/models", params={"url": "echo", "model_name": "idle", "initial_workers": "0"}).status_code == 200
    try:
        body = _mms_error(httpx.post(f"{server.inference_url}/predictions/idle", content=b"x"), 503,
                          "ServiceUnavailableException")
        assert "No worker is available" in body["message"]
    finally:
        httpx.delete(f"{m}/models/idle", timeout=60)


@pytest.mark.parametrize("params, fragment", [
    ({"min_worker": "-1"}, "min_worker"),
    ({"min_worker": "abc"}, "min_worker"),
    ({"min_worker": "3", "max_worker": "2"}, "max_worker cannot be less than min_worker."),
    ({"synchronous": "maybe"}, "synchronous"),
])
def test_bad_scale_values(server: ServerInfo, params: dict, fragment: str) -> None:
    body = _mms_error(httpx.put(f"{server.management_url}/models/noop", params=params), 400,
                      "BadRequestException")
    assert fragment in body["message"]


def test_bad_register_requests(server: ServerInfo) -> None:
    m = server.management_url
    body = _mms_error(httpx.post(f"{m}/models", params={"model_url": "echo"}), 400, "BadRequestException")
    assert body["message"] == "Parameter url is required."
    _mms_error(httpx.post(f"{m}/models", params={"url": "missing.mar"}), 404, "ModelNotFoundException")
    _mms_error(httpx.post(f"{m}/models", params={"url": "../etc"}), 404, "ModelNotFoundException")
    _mms_error(httpx.post(f"{m}/models", params={"url": "echo", "batch_size": "x"}), 400, "BadRequestException")
    body = _mms_error(httpx.post(f"{m}/models", params={"url": "http://example.com/a.mar"}), 400,
                      "BadRequestException")
    assert "allowed_urls" in body["message"]


def test_register_handler_that_fails_to_load(server: ServerInfo) -> None:
    resp = httpx.post(f"{server.management_url}/models", params={"url": "broken", "initial_workers": "1"},
                      timeout=60)
    body = _mms_error(resp, 500, "InternalServerException")
    assert body["message"] == "Failed to start workers"  # MMS's text; why is the cause
    assert "cannot load" in body["cause"] and "missing weights" in body["cause"]
    # the failed model is not left registered
    _mms_error(httpx.get(f"{server.management_url}/models/broken"), 404, "ModelNotFoundException")


def test_register_from_json_body(server: ServerInfo) -> None:
    m = server.management_url
    resp = httpx.post(f"{m}/models", json={"url": "echo", "model_name": "j1", "initial_workers": 1}, timeout=60)
    assert resp.status_code == 200, resp.text
    httpx.delete(f"{m}/models/j1", timeout=60)


# -- metrics ----------------------------------------------------------------------------------
def test_prometheus_metrics(server: ServerInfo) -> None:
    httpx.post(f"{server.inference_url}/predictions/noop", content=b"m")
    text = httpx.get(f"{server.metrics_url}/metrics").text
    assert 'mmsctl_requests_total{api="inference",code="200",model="noop"}' in text
    assert 'mmsctl_workers{model="noop",state="READY"}' in text
    for name in ("mmsctl_inference_latency_seconds_bucket", "mmsctl_queue_latency_seconds_bucket",
                 "mmsctl_queue_depth", "mmsctl_worker_memory_bytes", "mmsctl_host_cpu_percent",
                 "mmsctl_host_memory_used_bytes"):
        assert name in text, name


def test_latencies_are_timed_finer_than_the_event_loops_millisecond_clock(server: ServerInfo) -> None:
    """The server runs on uvloop, whose loop.time() is libuv's millisecond clock: timed with it, a no-op's
    ~0.1 ms batches were 0 or 1 ms each, and `bench` reported 0 ms of server time. Twenty of them now add up
    to a sum that is no whole number of milliseconds."""
    def sums() -> dict[str, float]:
        text = httpx.get(f"{server.metrics_url}/metrics", timeout=10).text
        return {line.split("{")[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                if line.startswith(("mmsctl_inference_latency_seconds_sum{", "mmsctl_queue_latency_seconds_sum{"))
                and 'model="noop"' in line}

    before = sums()
    with httpx.Client(timeout=30) as client:
        for _ in range(20):
            assert client.post(f"{server.inference_url}/predictions/noop", content=b"t").status_code == 200
    after = sums()
    for name in ("mmsctl_inference_latency_seconds_sum", "mmsctl_queue_latency_seconds_sum"):
        spent_ms = (after[name] - before.get(name, 0.0)) * 1000
        assert spent_ms > 0 and abs(spent_ms - round(spent_ms)) > 1e-6, (name, spent_ms)


def test_prometheus_client_is_loaded_at_the_first_scrape_not_at_start() -> None:
    """No module of the server imports it (~0.13 s of every start); the first exposition does."""
    probe = (
        "import importlib, pkgutil, sys, mmsctl.server\n"
        "for info in pkgutil.walk_packages(mmsctl.server.__path__, 'mmsctl.server.'):\n"
        "    if info.name != 'mmsctl.server.__main__':\n"
        "        importlib.import_module(info.name)\n"
        "from mmsctl.server.metrics import ServerMetrics\n"
        "metrics = ServerMetrics(dict)\n"
        "metrics.count_request('inference', 'noop', 200)\n"
        "before = 'prometheus_client' in sys.modules\n"
        "text = metrics.exposition().decode()\n"
        "print(before, 'prometheus_client' in sys.modules,\n"
        "      'mmsctl_requests_total{api=\"inference\",code=\"200\",model=\"noop\"} 1.0' in text)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["False", "True", "True"], done.stderr[-2000:]


def test_a_version_in_the_path_must_be_the_models_version(server) -> None:
    """Like TorchServe: /models/{m}/{v} and /predictions/{m}/{v} answer 404 for another version."""
    import httpx

    mgmt, inf = server.management_url, server.inference_url
    ok = httpx.get(f"{mgmt}/models/noop/1.0", timeout=10)
    assert ok.status_code == 200, ok.text
    for resp in (
        httpx.get(f"{mgmt}/models/noop/2.0", timeout=10),
        httpx.put(f"{mgmt}/models/noop/2.0?min_worker=1", timeout=10),
        httpx.post(f"{inf}/predictions/noop/2.0", content=b"x", timeout=10),
        httpx.delete(f"{mgmt}/models/noop/2.0", timeout=10),
    ):
        assert resp.status_code == 404, resp.text
        assert resp.json()["type"] == "ModelVersionNotFoundException"
    assert httpx.get(f"{mgmt}/models/noop", timeout=10).status_code == 200  # not unregistered


def test_what_a_worker_prints_reaches_the_log_with_the_worker_named(server: ServerInfo) -> None:
    assert httpx.post(f"{server.inference_url}/predictions/noop", content=b"spam:2", timeout=30).status_code == 200
    tagged = re.compile(r"^\[noop W-\d+ pid \d+\] 00000001 x+$", re.MULTILINE)  # each line names its worker
    wait_until(lambda: tagged.search(server.log_text()), timeout=10, what="the worker's tagged line in the log")
