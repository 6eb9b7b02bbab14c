"""`mmsctl models|scale|ping` end to end (real entry point, real HTTP to a loopback stand-in)."""

from __future__ import annotations

import json
import os
from typing import Iterator

import pytest
import yaml

from tests.support.cli import run_mmsctl
from tests.client.standin import StandIn, running_standin
from tests.support._proc import free_port


@pytest.fixture
def server(tmp_path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StandIn]:
    with running_standin(StandIn()) as standin:
        standin.add_model("nin", 1)
        standin.add_model("squeezenet", 2)
        keys = tmp_path / "key_file.json"
        keys.write_text(json.dumps({"management": {"key": "mkey"}, "inference": {"key": "ikey"}}))
        monkeypatch.setenv("MMSCTL_INFERENCE_URL", standin.inference_url)
        monkeypatch.setenv("MMSCTL_MANAGEMENT_URL", standin.management_url)
        monkeypatch.setenv("MMSCTL_TOKEN_FILE", str(keys))
        yield standin


def test_models_list_plain_when_piped_and_json_yaml(server: StandIn, capsys) -> None:
    r = run_mmsctl(capsys, "models", "list")
    assert r.code == 0 and r.stderr == ""
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["NAME", "URL"]
    assert [line.split()[0] for line in lines[1:]] == ["nin", "squeezenet"]
    r = run_mmsctl(capsys, "models", "list", "-o", "json")
    assert json.loads(r.stdout) == [
        {"modelName": "nin", "modelUrl": "nin.mar"}, {"modelName": "squeezenet", "modelUrl": "squeezenet.mar"}]
    r = run_mmsctl(capsys, "models", "list", "-o", "wide")
    assert "2/2" in r.stdout and "VERSION" in r.stdout
    assert yaml.safe_load(run_mmsctl(capsys, "models", "list", "-o", "yaml").stdout)[1]["modelName"] == "squeezenet"
    r = run_mmsctl(capsys, "models", "list", "-o", "xml")
    assert r.code == 2 and "unknown output format 'xml'" in r.stderr


def test_models_describe(server: StandIn, capsys) -> None:
    r = run_mmsctl(capsys, "models", "describe", "squeezenet")
    assert r.code == 0
    assert "2 ready / 2 (min 2, max 2)" in r.stdout and "READY" in r.stdout
    assert json.loads(run_mmsctl(capsys, "models", "describe", "nin", "-o", "json").stdout)["modelVersion"] == "1.0"
    r = run_mmsctl(capsys, "models", "describe", "ghost")
    assert r.code == 3 and r.stdout == ""
    assert r.stderr.startswith(f"error: model ghost not found on {server.management_url[7:]}")
    assert "Traceback" not in r.stderr


def test_scale_wait_answers_like_kubectl(server: StandIn, capsys) -> None:
    r = run_mmsctl(capsys, "scale", "nin", "--min-workers", "2", "--wait", "--timeout", "10")
    assert (r.code, r.stdout) == (0, "nin scaled to 2 workers (2 ready)\n")
    r = run_mmsctl(capsys, "scale", "nin", "--min-workers", "3")
    assert r.code == 0 and r.stdout.startswith("nin scaling to 3 workers")
    data = json.loads(run_mmsctl(capsys, "scale", "nin", "--min-workers", "1", "--wait", "-o", "json").stdout)
    assert (data["readyWorkers"], data["status"]) == (1, 202)


def test_scale_timeout_exit_7_and_usage_errors(server: StandIn, capsys) -> None:
    r = run_mmsctl(capsys, "scale", "nin", "--min-workers", "40", "--wait", "--timeout", "0.3")
    assert r.code == 7 and "gave up waiting for nin" in r.stderr
    r = run_mmsctl(capsys, "scale", "nin", "--min-workers", "3", "--max-workers", "1")
    assert r.code == 2 and "below --min-workers" in r.stderr


def test_register_on_torchserve_without_model_api(server: StandIn, capsys) -> None:
    r = run_mmsctl(capsys, "models", "register", "https://x.invalid/a.mar")
    assert r.code == 8
    assert "model API disabled (start it with --enable-model-api)" in r.stderr
    server.model_api = True
    r = run_mmsctl(capsys, "models", "register", "a.mar", "--model-name", "a", "--initial-workers", "1", "--batch-size", "4")
    assert r.code == 0 and r.stdout.startswith("a registered on 127.0.0.1:")
    post = [c[1] for c in server.calls if c[0] == "POST"][-1]
    assert "batch_size=4" in post and "initial_workers=1" in post and "synchronous=true" in post
    r = run_mmsctl(capsys, "models", "unregister", "a")
    assert r.code == 0 and r.stdout.startswith("a unregistered")


def test_bad_token_exit_6(server: StandIn, capsys, tmp_path, monkeypatch) -> None:
    bad = tmp_path / "bad"
    bad.write_text("nope")
    monkeypatch.setenv("MMSCTL_TOKEN_FILE", str(bad))
    r = run_mmsctl(capsys, "models", "list")
    assert r.code == 6 and "authentication failed" in r.stderr


def test_ping_detects_and_fails_cleanly(server: StandIn, capsys, monkeypatch) -> None:
    rows = json.loads(run_mmsctl(capsys, "ping", "-o", "json").stdout)
    assert [(r["healthy"], r["status"], r["server"]) for r in rows] == [(True, "Healthy", "torchserve")]
    port = free_port()
    monkeypatch.setenv("MMSCTL_INFERENCE_URL", f"http://127.0.0.1:{port}")
    r = run_mmsctl(capsys, "ping")
    assert r.code == 5
    assert "connection refused" in r.stdout and f"error: cannot connect to 127.0.0.1:{port}" in r.stderr


def test_ping_all_lists_every_context(server: StandIn, capsys, monkeypatch) -> None:
    for key in ("MMSCTL_INFERENCE_URL", "MMSCTL_MANAGEMENT_URL"):
        monkeypatch.delenv(key)
    token = os.environ["MMSCTL_TOKEN_FILE"]
    monkeypatch.delenv("MMSCTL_TOKEN_FILE")
    assert run_mmsctl(capsys, "context", "add", "ts", "--inference", server.inference_url,
                      "--management", server.management_url, "--token-file", token).code == 0
    rows = json.loads(run_mmsctl(capsys, "ping", "--all", "-o", "json", "--timeout", "2").stdout)
    by_url = {r["url"]: r for r in rows}
    assert by_url[server.inference_url]["healthy"] is True
    assert by_url["http://127.0.0.1:8080"]["healthy"] in (True, False)  # local: whatever runs there
    r = run_mmsctl(capsys, "--context", "ts", "ping", "-o", "json")
    assert r.code == 0 and json.loads(r.stdout)[0]["server"] == "torchserve"


def test_unreachable_server_is_one_line(capsys, monkeypatch) -> None:
    port = free_port()
    monkeypatch.setenv("MMSCTL_MANAGEMENT_URL", f"http://127.0.0.1:{port}")
    r = run_mmsctl(capsys, "models", "list")
    assert r.code == 5
    assert r.stderr.splitlines()[0] == f"error: cannot connect to 127.0.0.1:{port}: connection refused"
    # The hint names the command that really checks every context (plain `ping` checks only the current one).
    assert r.stderr.splitlines()[1] == "hint: is the server running? `mmsctl ping --all` checks every context"
