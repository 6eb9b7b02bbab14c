"""run-local's Lambda stand-in: init timing, REPORT lines, error payloads, and the Invoke API on loopback.

Small handlers written for the test stand in for the image's, so these run without mxnet;
the real handler runs through `mmsctl lambda run-local` in tests/cloud.
"""

from __future__ import annotations

import base64
import json
import sys
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Iterator

import boto3
import botocore.config
import botocore.exceptions
import httpx
import pytest

from mmsctl.cloud.lambda_.invoke import parse_report
from mmsctl.lambda_.local import MAX_PAYLOAD, LocalFunction, _invoke_handler

HANDLERS = '''
import logging
log = logging.getLogger("mmsctl.lambda")
log.setLevel(logging.INFO)
log.info("loading")
calls = []

def echo(event, context):
    calls.append(context.aws_request_id)
    log.info("got %s", sorted(event))
    return {"event": event, "function": context.function_name, "memory": context.memory_limit_in_mb,
            "remaining_ok": 0 < context.get_remaining_time_in_millis() <= 3000}

def boom(event, context):
    raise ValueError("the model exploded")

def unwritable(event, context):
    return {"raw": b"bytes"}

import threading
release = threading.Event()

def overrun(event, context):
    release.wait(30)  # past any timeout the test sets; the test releases it
    return {"late": True}
'''


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"fake_handlers_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(HANDLERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_first_invocation_reports_the_init_phase(module: str) -> None:
    fn = LocalFunction(f"{module}.echo", function_name="demo", memory_mb=512, timeout_s=3)
    first = fn.invoke({"b": 1, "a": 2})
    second = fn.invoke({})
    assert first.payload == {"event": {"b": 1, "a": 2}, "function": "demo", "memory": 512, "remaining_ok": True}
    assert first.error is None and first.init_ms is not None and second.init_ms is None
    assert any("loading" in line for line in first.logs) and not any("loading" in line for line in second.logs)
    assert any(line.endswith("got ['a', 'b']") and first.request_id in line for line in first.logs)
    report = parse_report(first.log_text())
    assert report is not None and report.request_id == first.request_id and report.cold
    assert report.memory_mb == 512 and report.billed_ms == first.billed_ms >= report.init_ms  # images bill init
    assert not parse_report(second.log_text()).cold  # type: ignore[union-attr]
    text = base64.b64decode(first.log_tail()).decode()
    assert text.startswith("START RequestId: ") and f"END RequestId: {first.request_id}" in text


def test_a_raising_handler_becomes_lambdas_error_payload(module: str) -> None:
    result = LocalFunction(f"{module}.boom", function_name="demo").invoke({})
    assert result.payload is None
    assert result.error is not None
    assert (result.error["errorType"], result.error["errorMessage"]) == ("ValueError", "the model exploded")
    assert result.error["requestId"] == result.request_id and result.error["stackTrace"]


@contextmanager
def _serving(entry_point: str) -> Iterator[str]:
    from mmsctl.lambda_.local import InvokeServer

    fn = LocalFunction(entry_point, function_name="demo", timeout_s=3)
    server = InvokeServer(("127.0.0.1", 0), _invoke_handler(fn, lambda line: None))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def endpoint(module: str) -> Iterator[str]:
    with _serving(f"{module}.echo") as url:
        yield url


def _client(url: str) -> Any:
    return boto3.client("lambda", endpoint_url=url, region_name="us-east-1", aws_access_key_id="x",
                        aws_secret_access_key="x", config=botocore.config.Config(retries={"max_attempts": 1}))


def test_boto3s_invoke_reaches_the_local_invoke_api(endpoint: str) -> None:
    client = _client(endpoint)
    answer = client.invoke(FunctionName="demo", Payload=b'{"x": 1}', LogType="Tail")
    assert answer["StatusCode"] == 200 and "FunctionError" not in answer
    assert json.loads(answer["Payload"].read())["event"] == {"x": 1}
    report = parse_report(base64.b64decode(answer["LogResult"]).decode())
    assert report is not None and report.cold
    again = client.invoke(FunctionName="arn:aws:lambda:us-east-1:1:function:demo", Payload=b"{}", LogType="Tail")
    assert not parse_report(base64.b64decode(again["LogResult"]).decode()).cold  # type: ignore[union-attr]
    assert client.invoke(FunctionName="demo", Payload=b"{}", InvocationType="Event")["StatusCode"] == 202
    assert client.invoke(FunctionName="demo", Payload=b"{}", InvocationType="DryRun")["StatusCode"] == 204


def test_the_invoke_api_refuses_what_lambda_refuses(endpoint: str) -> None:
    client = _client(endpoint)
    with pytest.raises(botocore.exceptions.ClientError) as info:
        client.invoke(FunctionName="other", Payload=b"{}")
    assert info.value.response["Error"]["Code"] == "ResourceNotFoundException"
    with pytest.raises(botocore.exceptions.ClientError) as info:
        client.invoke(FunctionName="demo", Payload=b"{not json")
    assert info.value.response["Error"]["Code"] == "InvalidRequestContentException"
    too_big = httpx.post(f"{endpoint}/2015-03-31/functions/demo/invocations", content=b"0" * (MAX_PAYLOAD + 1))
    assert too_big.status_code == 413 and too_big.headers["x-amzn-ErrorType"] == "RequestTooLargeException"


def test_an_event_nested_deeper_than_json_goes_is_lambdas_400_and_the_api_answers_on(endpoint: str) -> None:
    """Lambda's front end refuses a body it cannot parse as JSON (InvalidRequestContentException, 400); a
    nesting past the parser's depth is such a body, not a crash that leaves the connection unanswered."""
    client = _client(endpoint)
    for deep in (b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 50_000 + b"1" + b"}" * 50_000):
        with pytest.raises(botocore.exceptions.ClientError) as info:
            client.invoke(FunctionName="demo", Payload=deep)
        error = info.value.response
        assert error["ResponseMetadata"]["HTTPStatusCode"] == 400, error
        assert error["Error"]["Code"] == "InvalidRequestContentException", error
    assert json.loads(client.invoke(FunctionName="demo", Payload=b'{"x": [[1]]}')["Payload"].read())["event"] == \
        {"x": [[1]]}


def test_a_result_json_cannot_write_is_the_runtimes_marshal_error(module: str) -> None:
    with _serving(f"{module}.unwritable") as url:
        answer = _client(url).invoke(FunctionName="demo", Payload=b"{}")
    assert answer["StatusCode"] == 200 and answer["FunctionError"] == "Unhandled"
    assert json.loads(answer["Payload"].read())["errorType"] == "Runtime.MarshalError"


def test_a_handler_past_its_timeout_is_reported_as_lambda_does(module: str) -> None:
    """No result, Lambda's error payload and log line ("Task timed out after 0.30 seconds")."""
    fn = LocalFunction(f"{module}.overrun", function_name="demo", timeout_s=0.3)
    try:
        result = fn.invoke({})
    finally:
        sys.modules[module].release.set()
    assert result.timed_out and result.payload is None
    assert result.error == {"errorType": "Sandbox.Timedout",
                            "errorMessage": f"RequestId: {result.request_id} Error: Task timed out after 0.30 seconds"}
    assert any(line.endswith(f"{result.request_id} Task timed out after 0.30 seconds") for line in result.logs)
    assert result.duration_ms == 300.0 and "Task timed out after 0.30 seconds" in result.log_text()


@pytest.mark.parametrize("kind", ["invoke-api", "image-stand-in"])
def test_a_server_says_nothing_when_a_client_drops_its_connection(kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`aws lambda invoke` gives up at its read timeout and closes (run-local --serve's Invoke API); a fetch that
    stops at its cap closes a connection the tests' image stand-in still serves. The reset in the connection's
    thread prints no traceback (in the serving terminal, in the run's output); any other error still does."""
    from mmsctl.lambda_.local import InvokeServer
    from tests.support.imageserver import StandInServer

    server = (InvokeServer if kind == "invoke-api" else StandInServer)(("127.0.0.1", 0), BaseHTTPRequestHandler)
    try:
        for error in (ConnectionResetError(104, "Connection reset by peer"), BrokenPipeError(32, "Broken pipe"),
                      ValueError("a bug in a handler")):
            try:
                raise error
            except Exception:  # noqa: BLE001 - as socketserver calls handle_error: inside the except
                server.handle_error(None, ("127.0.0.1", 1))
    finally:
        server.server_close()
    err = capsys.readouterr().err
    assert err.count("Traceback") == 1 and "ValueError: a bug in a handler" in err and "reset" not in err


def test_a_build_context_runs_the_runner_beside_its_handler() -> None:
    """`run-local --build DIR` runs the context's own code in the child: the runner is the ``local`` module beside the
    handler its manifest names, so a context an earlier mmsctl wrote (its handler under ``mmsctl.serverless``) runs
    with that layout."""
    import importlib.util

    from mmsctl.cloud.lambda_ import env
    from mmsctl.lambda_.run_local import context_runner

    assert context_runner(env.HANDLER) == "mmsctl.lambda_.local"
    assert importlib.util.find_spec(context_runner(env.HANDLER)) is not None
    assert context_runner("mmsctl.serverless.handler.handler") == "mmsctl.serverless.local"
