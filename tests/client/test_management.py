"""ManagementClient / InferenceClient against a TorchServe-shaped stand-in on loopback."""

from __future__ import annotations

import dataclasses

import pytest

from mmsctl.cli.hints import hint_for
from mmsctl.client._errors import ModelApiDisabled, RemoteModelNotFound, RemoteVersionNotFound
from mmsctl.client.contexts import Context
from mmsctl.client.inference import InferenceClient
from mmsctl.client.management import ManagementClient
from mmsctl.errors import ApiError, AuthenticationFailed, ConnectionFailed, RequestTimeout, UsageError
from tests.client.standin import StandIn
from tests.support._proc import free_port


def test_list_follows_pages_and_stops_on_the_empty_page(standin: StandIn, context: Context) -> None:
    for i in range(5):
        standin.add_model(f"m{i}")
    with ManagementClient(context) as client:
        names = [m.name for m in client.list_models(limit=2)]
    assert names == sorted(["nin", "m0", "m1", "m2", "m3", "m4"])
    pages = [c for c in standin.calls if c[1].startswith("/models?")]
    assert len(pages) == 4  # 2 + 2 + 2 full pages (each with a token), then one empty page


def test_describe_unwraps_torchserve_list_and_versions(standin: StandIn, context: Context) -> None:
    with ManagementClient(context) as client:
        detail = client.describe("nin")
        assert (detail.name, detail.version, detail.ready_workers) == ("nin", "1.0", 1)
        assert client.describe("nin", "1.0").version == "1.0"
        # The model is there, the version is not: say so, and do not send the user to `models list`.
        with pytest.raises(RemoteVersionNotFound, match="model nin has no such version on 127.0.0.1:.*9.9 does not exist") as version:
            client.describe("nin", "9.9")
        assert isinstance(version.value, RemoteModelNotFound) and version.value.model == "nin"
        # The hint names CLI flags, so the CLI adds it (the client names none).
        assert version.value.hint is None
        hint = hint_for(version.value)
        assert hint is not None and "leave out --model-version" in hint and "models list" not in hint
        with pytest.raises(RemoteModelNotFound) as info:
            client.describe("nope")
    assert info.value.exit_code == 3
    assert str(info.value) == f"model nope not found on {standin.management_url[7:]}"


def test_scale_waits_until_workers_are_ready(standin: StandIn, context: Context) -> None:
    seen: list[int] = []
    with ManagementClient(context) as client:
        result = client.scale("nin", 3, wait=True, timeout=10, poll_interval=0.01,
                              on_progress=lambda d: seen.append(d.ready_workers))
    assert result.status == 202 and result.waited and result.ready == 3
    assert seen == [2, 3]
    assert ("PUT", "/models/nin?min_worker=3&synchronous=false") in standin.calls


def test_scale_wait_times_out_with_exit_7(standin: StandIn, context: Context) -> None:
    with ManagementClient(context) as client:
        with pytest.raises(RequestTimeout, match=r"gave up waiting for nin .*: \d of 50 workers ready") as info:
            client.scale("nin", 50, wait=True, timeout=0.2, poll_interval=0.05)
    assert info.value.exit_code == 7


def test_scale_refuses_max_below_min(context: Context) -> None:
    with ManagementClient(context) as client, pytest.raises(UsageError):
        client.scale("nin", 3, 2)


def test_register_405_says_model_api_is_disabled(standin: StandIn, context: Context) -> None:
    with ManagementClient(context) as client:
        with pytest.raises(ModelApiDisabled, match=r"model API disabled \(start it with --enable-model-api\)"):
            client.register("https://example.invalid/x.mar")
        with pytest.raises(ModelApiDisabled):
            client.unregister("nin")
    assert sum(1 for c in standin.calls if c[0] == "POST") == 1  # never re-sent


def test_register_and_unregister_when_enabled(standin: StandIn, context: Context) -> None:
    standin.model_api = True
    with ManagementClient(context) as client:
        assert client.register("x.mar", model_name="x", initial_workers=0).status == 200
        with pytest.raises(ApiError, match="already registered") as info:
            client.register("x.mar", model_name="x")
        assert info.value.status == 409 and info.value.exit_code == 8
        assert client.unregister("x").status == 200
        with pytest.raises(RemoteModelNotFound):
            client.unregister("x")


def test_bad_token_is_authentication_failed(standin: StandIn, context: Context, tmp_path) -> None:
    bad = tmp_path / "bad"
    bad.write_text("wrong\n")
    with ManagementClient(dataclasses.replace(context, token_file=str(bad))) as client:
        with pytest.raises(AuthenticationFailed, match="authentication failed on 127.0.0.1") as info:
            client.list_models()
    assert info.value.exit_code == 6


def test_idempotent_get_is_retried_after_503(standin: StandIn, context: Context) -> None:
    standin.fail_next = 2
    with ManagementClient(context, retries=2) as client:
        assert [m.name for m in client.list_models()] == ["nin"]
    standin.fail_next = 5
    with ManagementClient(context, retries=1) as client, pytest.raises(ApiError, match="busy"):
        client.list_models()


def test_connection_refused_is_one_clear_error() -> None:
    port = free_port()
    ctx = Context("down", f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port}")
    with ManagementClient(ctx, retries=0) as client, pytest.raises(ConnectionFailed) as info:
        client.list_models()
    assert str(info.value) == f"cannot connect to 127.0.0.1:{port}: connection refused"
    assert info.value.exit_code == 5


def test_predict_ping_and_detection(standin: StandIn, context: Context) -> None:
    with InferenceClient(context) as client:
        result = client.predict("nin", b"\x00\x01", "application/octet-stream")
        assert (result.status, result.body) == (200, b"\x00\x01")
        ping = client.ping()
        assert ping.healthy and ping.status == "Healthy" and ping.server == "torchserve"
        with pytest.raises(RemoteModelNotFound):
            client.predict("nope", b"x")
    standin.slow_ping = 1.0
    with InferenceClient(context, timeout=0.2, retries=0) as client:
        ping = client.ping(detect=False)
        assert not ping.healthy and isinstance(ping.error, RequestTimeout)
    with InferenceClient(dataclasses.replace(context, token_file=None)) as client:
        ping = client.ping()
        assert not ping.healthy and isinstance(ping.error, AuthenticationFailed)
