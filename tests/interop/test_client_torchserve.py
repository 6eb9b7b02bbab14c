"""mmsctl's client and CLI against a real TorchServe 0.12 (token auth on, model API on), one per module."""

from __future__ import annotations

import json

import pytest

from mmsctl.client._errors import RemoteModelNotFound
from mmsctl.client.contexts import Context
from mmsctl.client.inference import InferenceClient
from mmsctl.client.management import ManagementClient
from mmsctl.errors import AuthenticationFailed
from tests.support.cli import run_mmsctl
from tests.support.fixtures_mms import torchserve_server  # noqa: F401
from tests.support.mms import predict, wait_for_prediction
from tests.support.torchserve import TorchServeInstance

pytestmark = [pytest.mark.interop, pytest.mark.xdist_group("mms")]


@pytest.fixture
def ctx(torchserve_server: TorchServeInstance) -> Context:
    ts = torchserve_server
    return Context("ts", ts.inference_url, ts.management_url, ts.metrics_url, str(ts.key_file))


def test_support_starts_a_real_torchserve_with_token_auth(torchserve_server: TorchServeInstance) -> None:
    ts = torchserve_server
    assert set(ts.keys) >= {"inference", "management"}
    assert wait_for_prediction(ts, "noop", b"abc", headers=ts.inference_headers()).body == b"abc"
    refused = predict(ts, "noop", b"abc")
    assert refused.status == 400 and b"InvalidKeyException" in refused.body


def test_key_file_tokens_describe_versions_scale_predict(ctx: Context) -> None:
    with ManagementClient(ctx) as mgmt, InferenceClient(ctx) as inf:
        assert [m.name for m in mgmt.list_models()] == ["noop"]
        detail = mgmt.describe("noop")
        assert (detail.name, detail.version) == ("noop", "1.0")
        assert mgmt.describe("noop", "1.0").version == "1.0"
        with pytest.raises(RemoteModelNotFound, match="9.9 does not exist"):
            mgmt.describe("noop", "9.9")
        assert mgmt.scale("noop", 2, wait=True, timeout=90, poll_interval=0.3).ready == 2
        assert mgmt.scale("noop", 1, wait=True, timeout=90, poll_interval=0.3).total == 1
        assert inf.predict("noop", b"hi", "text/plain").body == b"hi"
        assert inf.predict("noop", b"hi", version="1.0").body == b"hi"
        ping = inf.ping()
        assert ping.healthy and (ping.server, ping.version) == ("torchserve", "0.12.0")
    with ManagementClient(Context("ts", ctx.inference_url, ctx.management_url)) as anon:
        with pytest.raises(AuthenticationFailed):
            anon.list_models()


def test_register_and_unregister_with_model_api(ctx: Context) -> None:
    with ManagementClient(ctx) as mgmt:
        assert mgmt.register("noop.mar", model_name="noop2", initial_workers=1).status == 200
        assert "noop2" in [m.name for m in mgmt.list_models()]
        assert mgmt.unregister("noop2").status == 200


def test_cli_against_torchserve(ctx: Context, capsys, monkeypatch) -> None:
    monkeypatch.setenv("MMSCTL_INFERENCE_URL", ctx.inference_url)
    monkeypatch.setenv("MMSCTL_MANAGEMENT_URL", ctx.management_url)
    monkeypatch.setenv("MMSCTL_TOKEN_FILE", str(ctx.token_file))
    r = run_mmsctl(capsys, "models", "describe", "noop", "-o", "json")
    assert r.code == 0 and json.loads(r.stdout)["modelVersion"] == "1.0"
    monkeypatch.delenv("MMSCTL_TOKEN_FILE")
    r = run_mmsctl(capsys, "models", "list")
    assert r.code == 6 and r.stderr.startswith("error: authentication failed on 127.0.0.1")
