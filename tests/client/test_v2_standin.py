"""mmsctl's v2 client and CLI against a v2 server no one here wrote the protocol of: a stand-in built from
the Open Inference Protocol's published OpenAPI document (kserve/open-inference-protocol,
``specification/protocol/open_inference_rest.yaml``; see tests/support/v2_standin.py), for what
TorchServe's kservev2 envelope does not cover: server metadata, health, model metadata and readiness,
versioned routes, and a server without Triton's model repository extension (no list)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest

from mmsctl.client.contexts import Context
from mmsctl.client.v2 import V2Client
from mmsctl.errors import MmsError, UsageError
from tests.support.cli import run_mmsctl
from tests.support.v2_standin import V2StandIn, running_v2_standin


@pytest.fixture(scope="module")
def standin() -> Iterator[V2StandIn]:
    with running_v2_standin() as state:
        yield state


def _client(standin: V2StandIn) -> V2Client:
    return V2Client(Context("standin", standin.url, standin.url, protocol="v2"), timeout=10.0, retries=0)


def test_ping_reads_health_and_server_metadata(standin: V2StandIn) -> None:
    with _client(standin) as client:
        ping = client.ping()
    assert ping.healthy and ping.server == "v2:standin" and ping.version == "0.1"
    assert standin.seen.get("GET /v2/health/ready") and standin.seen.get("GET /v2")


def test_describe_reads_metadata_and_readiness(standin: V2StandIn) -> None:
    with _client(standin) as client:
        echo = client.describe("echo")
        sleepy = client.describe("sleepy")
        versioned = client.describe("echo", "1")
    assert (echo.name, echo.versions, echo.platform, echo.ready) == ("echo", ["1"], "standin", True)
    assert echo.inputs == [{"name": "raw", "datatype": "BYTES", "shape": [-1]}]
    assert sleepy.ready is False  # its ready route answers 503
    assert versioned.ready and standin.seen.get("GET /v2/models/echo/versions/1/ready")


def test_unknown_model_and_version_are_errors(standin: V2StandIn) -> None:
    with _client(standin) as client:
        for model, version in (("nosuch", None), ("echo", "9")):
            with pytest.raises(MmsError) as caught:
                client.describe(model, version)
            assert "unknown model" in caught.value.message or "not found" in caught.value.message.lower()


def test_list_is_refused_in_one_line_without_the_repository_extension(standin: V2StandIn) -> None:
    with _client(standin) as client, pytest.raises(UsageError, match="does not list its models"):
        client.list_models()


def test_predict_sends_one_bytes_element_in_binary_and_reads_a_json_answer(standin: V2StandIn) -> None:
    payload = bytes(range(256)) * 3
    with _client(standin) as client:
        answer = client.predict("echo", b"plain text")
        client.predict("echo", payload, version="1")
    assert answer.body == b"plain text"  # one BYTES output element: its raw bytes, as the MMS API answers
    assert standin.last_elements == [payload]  # the stand-in parsed the binary tensor itself
    assert standin.seen.get("POST /v2/models/echo/versions/1/infer") == 1


def test_cli_predict_ping_describe_on_the_standin(standin: V2StandIn, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert run_mmsctl(capsys, "context", "add", "oip", "--inference", standin.url, "--protocol", "v2").code == 0
    body = tmp_path / "note.txt"
    body.write_text("from the CLI")
    predicted = run_mmsctl(capsys, "--context", "oip", "predict", "echo", str(body))
    assert predicted.code == 0, predicted.stderr
    assert "from the CLI" in predicted.stdout
    ping = run_mmsctl(capsys, "--context", "oip", "ping", "-o", "json")
    assert ping.code == 0 and json.loads(ping.stdout)[0]["healthy"] is True
    described = run_mmsctl(capsys, "--context", "oip", "models", "describe", "sleepy", "-o", "json")
    assert described.code == 0 and json.loads(described.stdout)["ready"] is False
    listed = run_mmsctl(capsys, "--context", "oip", "models", "list")
    assert listed.code != 0 and "does not list its models" in listed.stderr and "Traceback" not in listed.stderr
