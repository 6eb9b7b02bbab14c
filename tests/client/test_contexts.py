"""Context resolution: flag > env > file > local default, and the contexts.toml file."""

from __future__ import annotations

import json

import pytest

from mmsctl.client.auth import read_token
from mmsctl.client.contexts import Context, ContextNotFound, ContextStore, contexts_file, resolve_context
from mmsctl.errors import ConfigError, InputNotFoundError, UsageError


@pytest.fixture
def store() -> ContextStore:
    s = ContextStore()
    s.add(Context("a", "http://a:8080/", "http://a:8081"))
    s.add(Context("b", "http://b:8080", "http://b:8081", "http://b:8082"))
    return s


def test_default_is_local_server_ports() -> None:
    ctx = resolve_context(None)
    assert (ctx.name, ctx.inference_url, ctx.management_url, ctx.metrics_url, ctx.source) == (
        "local", "http://127.0.0.1:8080", "http://127.0.0.1:8081", "http://127.0.0.1:8082", "default")


def test_local_default_finds_a_running_mmsctl_instance() -> None:
    import os

    from mmsctl.config import state_dir

    inst = state_dir() / "instances" / "default"
    inst.mkdir(parents=True)
    from mmsctl.local_servers import process_start_time

    (inst / "state.json").write_text(json.dumps({
        "name": "default", "pid": os.getpid(), "status": "ready", "process_start": process_start_time(os.getpid()),
        "inference_url": "http://127.0.0.1:18080", "management_url": "http://127.0.0.1:18081",
    }))
    ctx = resolve_context(None)
    assert (ctx.inference_url, ctx.management_url, ctx.source) == ("http://127.0.0.1:18080", "http://127.0.0.1:18081", "instance")


def test_precedence_flag_env_file(store: ContextStore, monkeypatch: pytest.MonkeyPatch) -> None:
    assert store.use("a").name == "a"
    assert resolve_context(None).inference_url == "http://a:8080"  # trailing slash dropped
    monkeypatch.setenv("MMSCTL_CONTEXT", "b")
    assert resolve_context(None).name == "b"
    monkeypatch.setenv("MMSCTL_MANAGEMENT_URL", "http://env:9081")
    ctx = resolve_context(None)
    assert (ctx.name, ctx.inference_url, ctx.management_url, ctx.source) == ("b", "http://b:8080", "http://env:9081", "env")
    flagged = resolve_context("a")  # a named context wins over every environment variable
    assert (flagged.management_url, flagged.source) == ("http://a:8081", "flag")


def test_file_round_trip_and_remove_current(store: ContextStore) -> None:
    store.use("b")
    again = ContextStore()
    assert again.names() == ["a", "b"] and again.current == "b"
    assert again.get("b").metrics_url == "http://b:8082"
    again.remove("b")
    assert ContextStore().current is None
    assert "current" not in contexts_file().read_text()


def test_errors(store: ContextStore, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ContextNotFound, match="context 'zz' not found") as info:
        resolve_context("zz")
    assert info.value.exit_code == 3
    with pytest.raises(UsageError, match="bad inference URL"):
        store.add(Context("c", "ftp://x", "http://x"))
    with pytest.raises(UsageError, match="built-in"):
        store.add(Context("local", "http://x", "http://x"))
    monkeypatch.setenv("MMSCTL_INFERENCE_URL", "nonsense")
    with pytest.raises(UsageError, match="MMSCTL_INFERENCE_URL"):
        resolve_context(None)
    contexts_file().write_text("current = [")
    with pytest.raises(ConfigError, match="not valid TOML"):
        ContextStore()


def test_tokens_plain_and_torchserve_key_file(tmp_path) -> None:
    plain = tmp_path / "tok"
    plain.write_text("s3cret\n")
    assert read_token(str(plain), "management") == read_token(str(plain), "inference") == "s3cret"
    keys = tmp_path / "key_file.json"
    keys.write_text(json.dumps({"management": {"key": "M"}, "inference": {"key": "I"}, "API": {"key": "A"}}))
    assert (read_token(str(keys), "management"), read_token(str(keys), "inference")) == ("M", "I")
    assert read_token(None, "inference") is None
    with pytest.raises(InputNotFoundError, match="not found"):  # exit 3, as every missing input file
        read_token(str(tmp_path / "missing"), "inference")


def test_a_fleet_context_keeps_its_members_and_needs_no_management_url() -> None:
    store = ContextStore()
    store.add(Context("lab", "http://lb:80", "", members=("http://a:8081", "http://b:9080=http://b:9081")))
    store.add(Context("prod", "https://prod.elb.example.com", "", fleet="prod", region="eu-west-1"))
    lab, prod = ContextStore().get("lab"), ContextStore().get("prod")
    assert (lab.members, lab.management_url, lab.is_fleet) == (("http://a:8081", "http://b:9080=http://b:9081"), "", True)
    assert (prod.fleet, prod.region, prod.inference_url, prod.is_fleet) == (
        "prod", "eu-west-1", "https://prod.elb.example.com", True)
    assert resolve_context("lab").to_dict()["members"] == ["http://a:8081", "http://b:9080=http://b:9081"]
    assert not ContextStore().get("local").is_fleet
    with pytest.raises(UsageError, match="bad management URL"):
        store.add(Context("plain", "http://a:8080", ""))  # only a fleet may leave it out
    contexts_file().write_text('[contexts.bad]\ninference = "http://x:1"\nmembers = "http://x:2"\n')
    with pytest.raises(ConfigError, match="'members' must be a list of URLs"):
        ContextStore().get("bad")


def _running_instance(name: str, port: int, token_file: str = "") -> None:
    import os

    from mmsctl.config import state_dir
    from mmsctl.local_servers import process_start_time

    inst = state_dir() / "instances" / name
    inst.mkdir(parents=True)
    (inst / "state.json").write_text(json.dumps({
        "name": name, "pid": os.getpid(), "status": "ready", "process_start": process_start_time(os.getpid()),
        "inference_url": f"http://127.0.0.1:{port}", "management_url": f"http://127.0.0.1:{port + 1}",
        "token_file": token_file,
    }))


def test_env_urls_win_over_several_local_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    """`MMSCTL_*_URL=… mmsctl top` with three servers running here: the environment said where, no ambiguity."""
    from mmsctl.errors import AmbiguousInstanceError

    _running_instance("one", 18080, token_file="/secret/one.key")
    _running_instance("two", 19080)
    monkeypatch.setenv("MMSCTL_INFERENCE_URL", "http://127.0.0.1:28080")
    monkeypatch.setenv("MMSCTL_MANAGEMENT_URL", "http://127.0.0.1:28081")
    with pytest.raises(AmbiguousInstanceError):  # the metrics URL would still come from `local`
        resolve_context(None)
    assert resolve_context(None, needs=("management_url",)).management_url == "http://127.0.0.1:28081"
    monkeypatch.setenv("MMSCTL_METRICS_URL", "http://127.0.0.1:28082")
    ctx = resolve_context(None)
    assert (ctx.inference_url, ctx.management_url, ctx.metrics_url, ctx.source) == (
        "http://127.0.0.1:28080", "http://127.0.0.1:28081", "http://127.0.0.1:28082", "env")
    assert ctx.token_file is None  # a local server's key never goes to a server the environment named


def test_env_urls_do_not_take_a_single_local_servers_token(monkeypatch: pytest.MonkeyPatch) -> None:
    _running_instance("only", 18080, token_file="/secret/only.key")
    assert resolve_context(None).token_file == "/secret/only.key"
    for key, port in (("MMSCTL_INFERENCE_URL", 28080), ("MMSCTL_MANAGEMENT_URL", 28081), ("MMSCTL_METRICS_URL", 28082)):
        monkeypatch.setenv(key, f"http://127.0.0.1:{port}")
    assert resolve_context(None).token_file is None
