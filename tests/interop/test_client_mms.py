"""mmsctl's client and CLI against a real MMS 1.1.11 started by the test suite (one per module)."""

from __future__ import annotations

import json

import pytest

from mmsctl.client._errors import RemoteModelNotFound
from mmsctl.client.contexts import Context
from mmsctl.client.inference import InferenceClient
from mmsctl.client.management import ManagementClient
from mmsctl.errors import ApiError
from tests.support.cli import run_mmsctl
from tests.support.fixtures_mms import mms_server  # noqa: F401
from tests.support.mms import MmsInstance, predict, register_model, unregister_model, wait_for_prediction

pytestmark = [pytest.mark.interop, pytest.mark.xdist_group("mms")]


@pytest.fixture
def ctx(mms_server: MmsInstance) -> Context:
    return Context("mms", mms_server.inference_url, mms_server.management_url)


def test_support_starts_a_real_mms_that_serves(mms_server: MmsInstance) -> None:
    register_model(mms_server, "noop.mar", "echo")
    try:
        assert wait_for_prediction(mms_server, "echo", b"abc").body == b"abc"
        assert predict(mms_server, "nope").status == 404
    finally:
        assert unregister_model(mms_server, "echo").status == 200


def test_register_scale_predict_unregister(ctx: Context, mms_server: MmsInstance) -> None:
    with ManagementClient(ctx) as mgmt, InferenceClient(ctx) as inf:
        result = mgmt.register("noop.mar", model_name="nin", initial_workers=1, synchronous=True)
        try:
            assert result.status == 200 and result.message  # MMS: "Workers scaled"
            with pytest.raises(ApiError, match="already registered") as info:
                mgmt.register("noop.mar", model_name="nin")
            assert info.value.status == 409
            scaled = mgmt.scale("nin", 2, wait=True, timeout=60, poll_interval=0.3)
            assert scaled.status in (200, 202) and scaled.ready == 2 and scaled.total == 2
            detail = mgmt.describe("nin")
            assert (detail.min_workers, detail.ready_workers, detail.version) == (2, 2, None)
            wait_for_prediction(mms_server, "nin")
            answer = inf.predict("nin", b"\x01\x02", "application/octet-stream")
            assert (answer.status, answer.body) == (200, b"\x01\x02")
            assert mgmt.scale("nin", 1, wait=True, timeout=60, poll_interval=0.3).total == 1
        finally:
            mgmt.unregister("nin")
        with pytest.raises(RemoteModelNotFound, match="model nin not found on 127.0.0.1"):
            mgmt.describe("nin")
        with pytest.raises(RemoteModelNotFound):
            inf.predict("nin", b"x")
        with pytest.raises(RemoteModelNotFound):
            mgmt.register("missing.mar")  # MMS: "Model not found in model store"


def test_cli_register_sends_the_response_timeout_in_minutes(ctx: Context, capsys, monkeypatch) -> None:
    """MMS 1.1 multiplies response_timeout by 60: 90 s goes out as 2 (minutes), and mmsctl says so."""
    monkeypatch.setenv("MMSCTL_MANAGEMENT_URL", ctx.management_url)
    monkeypatch.setenv("MMSCTL_INFERENCE_URL", ctx.inference_url)
    r = run_mmsctl(capsys, "models", "register", "noop.mar", "--model-name", "slow", "--response-timeout", "90",
                   "--initial-workers", "0")
    try:
        assert r.code == 0, r.stderr
        assert r.stdout.startswith("slow registered on ")
        assert "warning: MMS 1.1 counts response_timeout in minutes: sent 2 (120 s) for 90 s" in r.stderr
        described = json.loads(run_mmsctl(capsys, "models", "describe", "slow", "-o", "json").stdout)
        assert described["modelName"] == "slow"
    finally:
        assert run_mmsctl(capsys, "models", "unregister", "slow").code == 0


def test_pages_with_a_token_on_the_last_full_page(ctx: Context) -> None:
    names = [f"p{i}" for i in range(4)]
    with ManagementClient(ctx) as mgmt:
        for name in names:
            mgmt.register("noop.mar", model_name=name, initial_workers=0)
        try:
            assert [m.name for m in mgmt.list_models(limit=2)] == names
            assert [m.name for m in mgmt.list_models(limit=4)] == names
        finally:
            for name in names:
                mgmt.unregister(name)


def test_cli_ping_and_list_against_mms(ctx: Context, capsys, monkeypatch) -> None:
    monkeypatch.setenv("MMSCTL_INFERENCE_URL", ctx.inference_url)
    monkeypatch.setenv("MMSCTL_MANAGEMENT_URL", ctx.management_url)
    r = run_mmsctl(capsys, "ping", "-o", "json")
    assert r.code == 0
    row = json.loads(r.stdout)[0]
    assert (row["healthy"], row["status"], row["server"]) == (True, "Healthy", "mms")
    r = run_mmsctl(capsys, "models", "describe", "ghost")
    assert r.code == 3 and "model ghost not found" in r.stderr
