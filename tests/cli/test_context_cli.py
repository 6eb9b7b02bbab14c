"""`mmsctl context add|use|list|current|remove` through the real entry point."""

from __future__ import annotations

import json

from mmsctl.client.contexts import contexts_file
from tests.support.cli import run_mmsctl


def test_context_lifecycle(capsys, tmp_path, monkeypatch) -> None:
    token = tmp_path / "tok"
    token.write_text("t0k")
    r = run_mmsctl(capsys, "context", "add", "prod", "--inference", "http://10.0.0.5:8080",
                   "--management", "http://10.0.0.5:8081", "--metrics", "http://10.0.0.5:8082", "--token-file", str(token))
    assert r.code == 0 and r.stdout == "" and "context 'prod' added" in r.stderr
    assert run_mmsctl(capsys, "context", "current").stdout == "local\n"
    assert run_mmsctl(capsys, "context", "use", "prod").code == 0
    assert run_mmsctl(capsys, "context", "current").stdout == "prod\n"
    current = json.loads(run_mmsctl(capsys, "context", "current", "-o", "json").stdout)
    assert current["management_url"] == "http://10.0.0.5:8081" and current["token_file"] == str(token)
    lines = run_mmsctl(capsys, "context", "list").stdout.splitlines()
    assert lines[0].split() == ["CURRENT", "NAME", "INFERENCE", "MANAGEMENT"]
    assert lines[2].split()[:2] == ["*", "prod"] and lines[1].split()[0] == "local"
    assert "t0k" not in contexts_file().read_text()  # the file keeps the path, never the secret
    monkeypatch.setenv("MMSCTL_CONTEXT", "local")
    assert run_mmsctl(capsys, "context", "current").stdout == "local\n"
    assert run_mmsctl(capsys, "--context", "prod", "context", "current").stdout == "prod\n"
    monkeypatch.delenv("MMSCTL_CONTEXT")
    assert run_mmsctl(capsys, "context", "remove", "prod").code == 0
    assert run_mmsctl(capsys, "context", "current").stdout == "local\n"


def test_context_add_changes_only_the_fields_given_like_set_context(capsys, tmp_path) -> None:
    token = tmp_path / "tok"
    token.write_text("t0k")
    new = run_mmsctl(capsys, "context", "add", "prod", "--inference", "http://10.0.0.5:8080")
    assert new.code == 2 and "a new context needs --inference and --management" in new.stderr
    assert run_mmsctl(capsys, "context", "add", "prod", "--inference", "http://10.0.0.5:8080",
                      "--management", "http://10.0.0.5:8081", "--token-file", str(token)).code == 0
    moved = run_mmsctl(capsys, "context", "add", "prod", "--inference", "http://10.0.0.9:8080")
    assert moved.code == 0 and "context 'prod' updated (inference)" in moved.stderr
    ctx = json.loads(run_mmsctl(capsys, "--context", "prod", "context", "current", "-o", "json").stdout)
    assert (ctx["inference_url"], ctx["management_url"], ctx["token_file"]) == (
        "http://10.0.0.9:8080", "http://10.0.0.5:8081", str(token))
    assert run_mmsctl(capsys, "context", "add", "prod", "--metrics", "http://10.0.0.9:8082", "--token-file", "").code == 0
    ctx = json.loads(run_mmsctl(capsys, "--context", "prod", "context", "current", "-o", "json").stdout)
    assert (ctx["metrics_url"], ctx["token_file"], ctx["inference_url"]) == (
        "http://10.0.0.9:8082", None, "http://10.0.0.9:8080")


def test_context_errors_are_one_line(capsys, tmp_path) -> None:
    r = run_mmsctl(capsys, "context", "use", "nope")
    assert r.code == 3 and r.stderr.startswith("error: context 'nope' not found")
    r = run_mmsctl(capsys, "context", "add", "x", "--inference", "localhost:8080", "--management", "http://h:1")
    assert r.code == 2 and "bad inference URL 'localhost:8080'" in r.stderr
    r = run_mmsctl(capsys, "context", "add", "x", "--inference", "http://h:1", "--management", "http://h:2",
                   "--token-file", str(tmp_path / "missing"))
    assert r.code == 3 and "token file" in r.stderr
    r = run_mmsctl(capsys, "models", "list", "--context", "nope")
    assert r.code == 3 and "Traceback" not in r.stderr


def test_local_context_cannot_be_removed(capsys) -> None:
    # `context list` always shows `local`; removing it is refused as built in, not "not found".
    r = run_mmsctl(capsys, "context", "remove", "local")
    assert r.code == 2 and r.stderr.splitlines()[0] == (
        "error: 'local' is the built-in context of the local server; it cannot be removed"
    )


def test_bad_port_and_env_url_messages(capsys, monkeypatch) -> None:
    r = run_mmsctl(capsys, "context", "add", "x", "--inference", "http://h:99999", "--management", "http://h:2")
    assert r.code == 2 and r.stderr.splitlines()[0] == (
        "error: bad inference URL 'http://h:99999': the port must be a number from 1 to 65535"
    )
    monkeypatch.setenv("MMSCTL_MANAGEMENT_URL", "h:8081")
    r = run_mmsctl(capsys, "context", "current")
    assert r.code == 2 and r.stderr.splitlines()[0] == (
        "error: bad MMSCTL_MANAGEMENT_URL 'h:8081': expected http(s)://HOST:PORT"
    )


def test_local_instance_name_from_context_list_is_accepted(capsys) -> None:
    """The name `context list` shows for a running `mmsctl serve --name qa` (local:qa) works as --context."""
    import os

    from mmsctl.local_servers import Instance, InstanceState, process_start_time

    Instance("qa").write_state(InstanceState(
        name="qa", pid=os.getpid(), status="ready", inference_url="http://127.0.0.1:18080",
        management_url="http://127.0.0.1:18081", metrics_url="http://127.0.0.1:18082",
        process_start=process_start_time(os.getpid()),
    ))
    listed = json.loads(run_mmsctl(capsys, "context", "list", "-o", "json").stdout)
    assert [c["name"] for c in listed] == ["local", "local:qa"]  # the one server is `local`, and local:qa
    assert listed[0]["management_url"] == listed[1]["management_url"] == "http://127.0.0.1:18081"
    r = run_mmsctl(capsys, "--context", "local:qa", "context", "current", "-o", "json")
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout)["management_url"] == "http://127.0.0.1:18081"
    assert run_mmsctl(capsys, "context", "use", "local:qa").code == 0
    assert run_mmsctl(capsys, "context", "current").stdout == "local:qa\n"
    Instance("qa").update(status="stopped")  # the context in use is gone: say so, and still list the rest
    r = run_mmsctl(capsys, "models", "list")
    assert r.code == 3 and r.stderr.splitlines()[-1].endswith("`mmsctl context use local` switches back to the local one")
    listed = json.loads(run_mmsctl(capsys, "context", "list", "-o", "json").stdout)
    assert [(c["name"], c["current"]) for c in listed] == [("local", False)]
    r = run_mmsctl(capsys, "--context", "local:other", "context", "current")
    assert r.code == 3 and r.stderr.startswith("error: no mmsctl server named 'other' is running here")


def _fake_instance(name: str, port: int) -> None:
    """A running `mmsctl serve` instance as the registry shows it (this process stands in for its pid)."""
    import os

    from mmsctl.local_servers import Instance, InstanceState, process_start_time

    Instance(name).write_state(InstanceState(
        name=name, pid=os.getpid(), status="ready", inference_url=f"http://127.0.0.1:{port}",
        management_url=f"http://127.0.0.1:{port + 1}", metrics_url=f"http://127.0.0.1:{port + 2}",
        process_start=process_start_time(os.getpid())))


def test_local_with_two_servers_is_ambiguous_everywhere_and_each_is_local_name(capsys, tmp_path) -> None:
    from tests.support.mmsctl_server import free_port

    image = tmp_path / "x.jpg"
    image.write_bytes(b"not looked at")
    a, b = free_port(), free_port()
    _fake_instance("a", a)
    _fake_instance("b", b)
    for args in (["models", "list"], ["context", "current"], ["scale", "m", "--min-workers", "1"],
                 ["serve", "stop"], ["predict", "m", str(image), "--context", "local"]):
        r = run_mmsctl(capsys, *args)
        assert r.code == 2, (args, r.stderr)
        assert r.stderr.startswith(f"error: 2 mmsctl servers are running here: a (http://127.0.0.1:{a}), "
                                   f"b (http://127.0.0.1:{b})"), (args, r.stderr)
    listed = [c["name"] for c in json.loads(run_mmsctl(capsys, "context", "list", "-o", "json").stdout)]
    assert listed == ["local", "local:a", "local:b"]
    pinged = run_mmsctl(capsys, "ping", "--all", "-o", "json", "--timeout", "2")
    assert pinged.code == 5  # nothing listens there: unreachable
    assert [row["context"] for row in json.loads(pinged.stdout)] == ["local:a", "local:b"]
    current = json.loads(run_mmsctl(capsys, "--context", "local:b", "context", "current", "-o", "json").stdout)
    assert current["inference_url"] == f"http://127.0.0.1:{b}"
