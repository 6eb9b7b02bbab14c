"""The mmsctl CLI against a real TorchServe 0.12: what a TorchServe user types, and what they get.

One TorchServe per module (token auth on, as TorchServe ships; model API enabled;
``noop`` loaded), reached through a context added with ``--token-file
key_file.json``. The model-API-disabled case starts a second, short-lived one.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mmsctl.client.contexts import resolve_context
from mmsctl.client.management import ManagementClient
from tests.support.cli import run_mmsctl
from tests.support.cli import one_error_line
from tests.support.fixtures_mms import torchserve_server  # noqa: F401
from tests.support.torchserve import TorchServeInstance, running_torchserve

pytestmark = [pytest.mark.interop, pytest.mark.xdist_group("mms")]


@pytest.fixture
def ts(torchserve_server: TorchServeInstance, capsys) -> TorchServeInstance:
    """The module's TorchServe as context ``ts``, its key_file.json given with `context add --token-file`."""
    server = torchserve_server
    r = run_mmsctl(capsys, "context", "add", "ts", "--inference", server.inference_url,
                   "--management", server.management_url, "--metrics", server.metrics_url,
                   "--token-file", str(server.key_file), "--use")
    assert r.code == 0, r.stderr
    # /ping answers before noop's worker has loaded (TorchServe describes it as UNLOADING until then)
    with ManagementClient(resolve_context("ts")) as client:
        client.wait_for_workers("noop", 1, timeout=90, poll_interval=0.2)
    return server


def host(url: str) -> str:
    return url.removeprefix("http://")


@pytest.mark.slow
def test_ping_list_describe(ts: TorchServeInstance, capsys) -> None:
    r = run_mmsctl(capsys, "ping", "-o", "json")
    assert r.code == 0, r.stderr
    (row,) = json.loads(r.stdout)
    assert (row["healthy"], row["server"], row["version"]) == (True, "torchserve", "0.12.0")

    r = run_mmsctl(capsys, "models", "list")
    assert r.code == 0 and r.stdout.split() == ["NAME", "URL", "noop", "noop.mar"]
    assert json.loads(run_mmsctl(capsys, "models", "list", "-o", "json").stdout) == [
        {"modelName": "noop", "modelUrl": "noop.mar"}]

    # TorchServe's describe is a list of versions; the table shows the default one
    table = run_mmsctl(capsys, "models", "describe", "noop")
    assert table.code == 0, table.stderr
    fields = {line.split(None, 1)[0]: line.split(None, 1)[1].strip()
              for line in table.stdout.splitlines()[1:8] if line.strip()}
    assert (fields["Name"], fields["Version"], fields["URL"]) == ("noop", "1.0", "noop.mar")
    assert "1 ready / 1 (min 1, max 1)" in table.stdout and "READY" in table.stdout
    doc = json.loads(run_mmsctl(capsys, "models", "describe", "noop", "-o", "json").stdout)
    assert isinstance(doc, dict) and (doc["modelName"], doc["modelVersion"]) == ("noop", "1.0")
    every = json.loads(run_mmsctl(capsys, "models", "describe", "noop", "--model-version", "all", "-o", "json").stdout)
    assert [d["modelVersion"] for d in every] == ["1.0"]

    r = run_mmsctl(capsys, "models", "describe", "ghost")
    assert r.code == 3 and one_error_line(r) == f"error: model ghost not found on {host(ts.management_url)}"
    r = run_mmsctl(capsys, "models", "describe", "noop", "--model-version", "9.9")
    assert r.code == 3 and "9.9" in one_error_line(r)


def test_scale_wait_and_predict_with_the_inference_key(ts: TorchServeInstance, capsys, tmp_path: Path) -> None:
    r = run_mmsctl(capsys, "scale", "noop", "--min-workers", "2", "--wait", "--timeout", "90")
    assert (r.code, r.stdout) == (0, "noop scaled to 2 workers (2 ready)\n"), r.stderr
    doc = json.loads(run_mmsctl(capsys, "models", "describe", "noop", "-o", "json").stdout)
    assert [w["status"] for w in doc["workers"]] == ["READY", "READY"]
    r = run_mmsctl(capsys, "scale", "noop", "--min-workers", "1", "--wait", "--timeout", "90", "-o", "json")
    assert r.code == 0 and (json.loads(r.stdout)["readyWorkers"], json.loads(r.stdout)["workers"]) == (1, 1)

    body = tmp_path / "input.json"
    body.write_text('{"echo": [1, 2]}')
    r = run_mmsctl(capsys, "predict", "noop", str(body), "--context", "ts", "-o", "json")
    assert r.code == 0 and json.loads(r.stdout) == {"echo": [1, 2]}, r.stderr
    r = run_mmsctl(capsys, "predict", "noop", str(body), "--context", "ts", "--model-version", "1.0", "-o", "json")
    assert r.code == 0 and json.loads(r.stdout) == {"echo": [1, 2]}, r.stderr


def test_register_and_unregister_with_the_model_api(ts: TorchServeInstance, capsys) -> None:
    r = run_mmsctl(capsys, "models", "register", "noop.mar", "--model-name", "noop2", "--initial-workers", "1",
                   "--response-timeout", "7")
    assert r.code == 0 and r.stdout.startswith(f"noop2 registered on {host(ts.management_url)}"), r.stderr
    try:
        described = json.loads(run_mmsctl(capsys, "models", "describe", "noop2", "-o", "json").stdout)
        assert described["responseTimeout"] == 7  # TorchServe counts seconds: sent as given
        assert [m["modelName"] for m in json.loads(run_mmsctl(capsys, "models", "list", "-o", "json").stdout)] == [
            "noop", "noop2"]
        r = run_mmsctl(capsys, "models", "register", "noop.mar", "--model-name", "noop2")
        assert r.code == 8 and "409" in one_error_line(r)
    finally:
        r = run_mmsctl(capsys, "models", "unregister", "noop2")
    assert r.code == 0 and r.stdout == f"noop2 unregistered on {host(ts.management_url)}\n", r.stderr
    r = run_mmsctl(capsys, "models", "register", "missing.mar")
    assert r.code == 3 and one_error_line(r).startswith(f"error: register failed on {host(ts.management_url)}")


def test_a_wrong_key_is_authentication_failed(ts: TorchServeInstance, capsys, tmp_path: Path) -> None:
    keys = json.loads(Path(ts.key_file).read_text())  # type: ignore[arg-type]
    for entry in keys.values():
        entry["key"] = "wrong" + entry["key"]
    wrong = tmp_path / "key_file.json"
    wrong.write_text(json.dumps(keys))
    run_mmsctl(capsys, "context", "add", "ts-wrong", "--inference", ts.inference_url,
               "--management", ts.management_url, "--token-file", str(wrong))
    r = run_mmsctl(capsys, "--context", "ts-wrong", "models", "list")
    assert (r.code, r.stdout) == (6, "")
    assert one_error_line(r).startswith(f"error: authentication failed on {host(ts.management_url)}")
    assert "hint: " in r.stderr and "key_file.json" in r.stderr
    r = run_mmsctl(capsys, "--context", "ts-wrong", "scale", "noop", "--min-workers", "1")
    assert r.code == 6
    r = run_mmsctl(capsys, "--context", "ts-wrong", "ping")  # TorchServe guards /ping too
    assert r.code == 6 and "authentication failed" in r.stdout
    r = run_mmsctl(capsys, "predict", "noop", str(wrong), "--context", "ts-wrong")
    assert r.code == 6 and one_error_line(r).startswith(f"error: authentication failed on {host(ts.inference_url)}")


@pytest.mark.slow
def test_model_api_disabled_is_a_clear_405(ts: TorchServeInstance, capsys, tmp_path: Path) -> None:
    """TorchServe's default: register/unregister answer 405; scaling still works."""
    store = tmp_path / "store"
    store.mkdir()
    shutil.copy(ts.model_store / "noop.mar", store / "noop.mar")
    with running_torchserve(tmp_path / "run", model_store=store, models={"noop": "noop.mar"}) as locked:
        run_mmsctl(capsys, "context", "add", "locked", "--inference", locked.inference_url,
                   "--management", locked.management_url, "--token-file", str(locked.key_file), "--use")
        server = host(locked.management_url)
        r = run_mmsctl(capsys, "models", "register", "noop.mar", "--model-name", "again")
        assert (r.code, r.stdout) == (8, "")
        assert one_error_line(r) == (f"error: {server} refused to register: this server has its model API "
                                     "disabled (start it with --enable-model-api)")
        r = run_mmsctl(capsys, "models", "unregister", "noop")
        assert r.code == 8 and f"{server} refused to unregister" in one_error_line(r)
        assert run_mmsctl(capsys, "models", "list").stdout.split() == ["NAME", "URL", "noop", "noop.mar"]
        r = run_mmsctl(capsys, "scale", "noop", "--min-workers", "1", "--wait", "--timeout", "60")
        assert (r.code, r.stdout) == (0, "noop scaled to 1 worker (1 ready)\n"), r.stderr
