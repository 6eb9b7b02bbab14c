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
