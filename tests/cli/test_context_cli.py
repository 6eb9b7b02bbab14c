"""`mmsctl context add|use|list|current|remove` through the real entry point."""

from __future__ import annotations

import json

from mmsctl.client.contexts import contexts_file
from tests.client.clirun import invoke


def test_context_lifecycle(capsys, tmp_path, monkeypatch) -> None:
    token = tmp_path / "tok"
    token.write_text("t0k")
    r = invoke(capsys, "context", "add", "prod", "--inference", "http://10.0.0.5:8080",
               "--management", "http://10.0.0.5:8081", "--metrics", "http://10.0.0.5:8082", "--token-file", str(token))
    assert r.code == 0 and r.stdout == "" and "context 'prod' added" in r.stderr
    assert invoke(capsys, "context", "current").stdout == "local\n"
    assert invoke(capsys, "context", "use", "prod").code == 0
    assert invoke(capsys, "context", "current").stdout == "prod\n"
    current = json.loads(invoke(capsys, "context", "current", "-o", "json").stdout)
    assert current["management_url"] == "http://10.0.0.5:8081" and current["token_file"] == str(token)
    lines = invoke(capsys, "context", "list").stdout.splitlines()
    assert lines[0].split() == ["CURRENT", "NAME", "INFERENCE", "MANAGEMENT"]
    assert lines[2].split()[:2] == ["*", "prod"] and lines[1].split()[0] == "local"
    assert "t0k" not in contexts_file().read_text()  # the file keeps the path, never the secret
    monkeypatch.setenv("MMSCTL_CONTEXT", "local")
    assert invoke(capsys, "context", "current").stdout == "local\n"
    assert invoke(capsys, "--context", "prod", "context", "current").stdout == "prod\n"
    monkeypatch.delenv("MMSCTL_CONTEXT")
    assert invoke(capsys, "context", "remove", "prod").code == 0
    assert invoke(capsys, "context", "current").stdout == "local\n"


def test_context_errors_are_one_line(capsys, tmp_path) -> None:
    r = invoke(capsys, "context", "use", "nope")
    assert r.code == 3 and r.stderr.startswith("error: context 'nope' not found")
    r = invoke(capsys, "context", "add", "x", "--inference", "localhost:8080", "--management", "http://h:1")
    assert r.code == 2 and "bad inference URL 'localhost:8080'" in r.stderr
    r = invoke(capsys, "context", "add", "x", "--inference", "http://h:1", "--management", "http://h:2",
               "--token-file", str(tmp_path / "missing"))
    assert r.code == 3 and "token file" in r.stderr
    r = invoke(capsys, "models", "list", "--context", "nope")
    assert r.code == 3 and "Traceback" not in r.stderr


def test_local_context_cannot_be_removed(capsys) -> None:
    # `context list` always shows `local`; removing it is refused as built in, not "not found".
    r = invoke(capsys, "context", "remove", "local")
    assert r.code == 2 and r.stderr.splitlines()[0] == (
        "error: 'local' is the built-in context of the local server; it cannot be removed"
    )


def test_bad_port_and_env_url_messages(capsys, monkeypatch) -> None:
    r = invoke(capsys, "context", "add", "x", "--inference", "http://h:99999", "--management", "http://h:2")
    assert r.code == 2 and r.stderr.splitlines()[0] == (
        "error: bad inference URL 'http://h:99999': the port must be a number from 1 to 65535"
    )
    monkeypatch.setenv("MMSCTL_MANAGEMENT_URL", "h:8081")
    r = invoke(capsys, "context", "current")
    assert r.code == 2 and r.stderr.splitlines()[0] == (
        "error: bad MMSCTL_MANAGEMENT_URL 'h:8081': expected http(s)://HOST:PORT"
    )


def test_local_instance_name_from_context_list_is_accepted(capsys) -> None:
    """The name `context list` shows for a running `mmsctl serve --name qa` (local:qa) works as --context."""
    import os

    from mmsctl.instances import Instance, InstanceState, process_start_time

    Instance("qa").write_state(InstanceState(
        name="qa", pid=os.getpid(), status="ready", inference_url="http://127.0.0.1:18080",
        management_url="http://127.0.0.1:18081", metrics_url="http://127.0.0.1:18082",
        process_start=process_start_time(os.getpid()),
    ))
    listed = json.loads(invoke(capsys, "context", "list", "-o", "json").stdout)
    assert [c["name"] for c in listed] == ["local:qa"]
    r = invoke(capsys, "--context", "local:qa", "context", "current", "-o", "json")
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout)["management_url"] == "http://127.0.0.1:18081"
    assert invoke(capsys, "context", "use", "local:qa").code == 0
    assert invoke(capsys, "context", "current").stdout == "local:qa\n"
    r = invoke(capsys, "--context", "local:other", "context", "current")
    assert r.code == 3 and r.stderr.startswith("error: context 'local:other' not found")
