"""mmsctl's v2 client and the CLI on a ``--protocol v2`` context, against ``mmsctl serve``'s v2 endpoints:
``context add --protocol v2``, ``ping``, ``models list/describe``, ``predict --context`` (the same top 5 as
the MMS API), and register/scale refused in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from mmsctl.client.contexts import Context, ContextStore
from mmsctl.client.v2 import V2Client
from tests.support.cli import run_mmsctl
from tests.support.mmsctl_server import ServerInfo, make_noop_archive, running_mmsctl_server
from tests.support.paths import KITTEN_JPG, SQUEEZENET_DIR


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    from mmsctl.archive import create_archive

    store = tmp_path_factory.mktemp("store")
    make_noop_archive(store / "echo", name="echo")
    models = {"echo": "echo"}
    if SQUEEZENET_DIR.is_dir():
        create_archive(SQUEEZENET_DIR, model_name="squeezenet", export_path=store)
        models["squeezenet"] = "squeezenet.mar"
    with running_mmsctl_server(tmp_path_factory.mktemp("srv"), model_store=store, models=models) as info:
        yield info


def _ctx(srv: ServerInfo) -> Context:
    return Context("v2", srv.inference_url, srv.inference_url, protocol="v2")


def test_context_add_protocol_v2_is_stored_and_read_back(srv: ServerInfo, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_mmsctl(capsys, "context", "add", "tri", "--inference", srv.inference_url, "--protocol", "v2")
    assert result.code == 0, result.stderr
    assert ContextStore().get("tri").protocol == "v2"
    assert 'protocol = "v2"' in ContextStore().path.read_text()
    bad = run_mmsctl(capsys, "context", "add", "bad", "--inference", srv.inference_url, "--management",
                     srv.management_url, "--protocol", "v3")
    assert bad.code != 0 and "unknown protocol" in bad.stderr


def test_client_ping_list_describe_predict_echo(srv: ServerInfo) -> None:
    with V2Client(_ctx(srv)) as client:
        ping = client.ping()
        assert ping.healthy and ping.server == "mmsctl"
        assert {"modelName": "echo", "modelVersion": "1.0", "state": "READY"} in client.list_models()
        detail = client.describe("echo")
        assert detail.ready and detail.inputs[0]["name"] == "body"
        assert client.predict("echo", b"hello").body == b"hello"


def test_cli_on_a_v2_context(srv: ServerInfo, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert run_mmsctl(capsys, "context", "add", "v2", "--inference", srv.inference_url, "--protocol", "v2").code == 0
    ping = run_mmsctl(capsys, "--context", "v2", "ping", "-o", "json")
    assert ping.code == 0 and json.loads(ping.stdout)[0]["healthy"] is True
    listed = run_mmsctl(capsys, "--context", "v2", "models", "list", "-o", "json")
    assert listed.code == 0 and "echo" in {m["modelName"] for m in json.loads(listed.stdout)}
    described = run_mmsctl(capsys, "--context", "v2", "models", "describe", "echo", "-o", "json")
    assert described.code == 0 and json.loads(described.stdout)["name"] == "echo"
    for args in (["models", "register", "x.mar"], ["scale", "echo", "--min-workers", "2"]):
        refused = run_mmsctl(capsys, "--context", "v2", *args)
        assert refused.code != 0 and "no management API" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    missing = run_mmsctl(capsys, "--context", "v2", "models", "describe", "nope")
    assert missing.code != 0 and "not found" in missing.stderr


def test_predict_on_a_v2_context_matches_the_mms_api(srv: ServerInfo, capsys: pytest.CaptureFixture[str]) -> None:
    if not SQUEEZENET_DIR.is_dir():
        pytest.skip(f"{SQUEEZENET_DIR} is absent")
    expected = httpx.post(f"{srv.inference_url}/predictions/squeezenet", content=KITTEN_JPG.read_bytes(),
                          timeout=60).json()
    assert run_mmsctl(capsys, "context", "add", "v2", "--inference", srv.inference_url, "--protocol", "v2").code == 0
    result = run_mmsctl(capsys, "--context", "v2", "predict", "squeezenet", str(KITTEN_JPG), "-o", "json")
    assert result.code == 0, result.stderr
    answer = json.loads(result.stdout)
    text = json.dumps(answer)
    assert [row["class"] for row in expected][0] in text and expected[4]["class"] in text
