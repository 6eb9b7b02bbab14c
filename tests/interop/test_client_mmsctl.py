"""The remote commands against mmsctl's own server: the same CLI and client that manage MMS and TorchServe.

One real ``python -m mmsctl.server`` per module (token auth on, the real
SqueezeNet loaded at start-up when ../shared is there, ``noop`` in the model
store); every command goes through the real ``mmsctl`` entry point in-process.
The last test starts a second server with ``mmsctl serve start`` to show that the
default context finds it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import httpx
import pytest
import yaml

from mmsctl import __version__
from mmsctl.client.contexts import Context, ContextStore, resolve_context
from mmsctl.client.management import ManagementClient
from mmsctl.client.metrics import MetricsClient
from tests.support.cli import CliResult, run_mmsctl
from tests.support.mmsctl_server import ServerInfo, free_port, make_noop_archive, running_mmsctl_server
from tests.support.paths import KITTEN_JPG, KITTEN_PNG, SQUEEZENET_DIR

# One server for the whole module: keep its tests on one xdist worker.
pytestmark = [pytest.mark.xdist_group("mmsctl-client")]

TOKEN = "s3cret-token"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The server's model store: ``noop`` (echo), ``broken`` (fails to load), ``squeezenet.mar`` (real)."""
    store = tmp_path_factory.mktemp("mmsctl-store")
    make_noop_archive(store / "noop")
    make_noop_archive(store / "broken", "broken", failing=True)
    _zip(make_noop_archive(store / "onnxsq-src", "onnxsq"), store / "onnxsq.mar")
    if SQUEEZENET_DIR.exists():
        from mmsctl.archive import create_archive

        create_archive(SQUEEZENET_DIR, model_name="squeezenet", export_path=store)
    return store


def _zip(folder: Path, mar: Path) -> None:
    import zipfile

    with zipfile.ZipFile(mar, "w") as zf:
        for path in sorted(folder.rglob("*")):
            zf.write(path, path.relative_to(folder).as_posix())


@pytest.fixture(scope="module")
def server(store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    models = {"squeezenet": "squeezenet.mar"} if (store / "squeezenet.mar").exists() else {}
    root = tmp_path_factory.mktemp("mmsctl-srv")
    with running_mmsctl_server(root, model_store=store, models=models, workers=1, token=TOKEN) as srv:
        yield srv


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


@pytest.fixture
def srv(server: ServerInfo, token_file: Path, capsys: pytest.CaptureFixture[str]) -> ServerInfo:
    """The module's server as context ``srv``, added with `mmsctl context add … --token-file`."""
    r = run_mmsctl(capsys, "context", "add", "srv", "--inference", server.inference_url,
                   "--management", server.management_url, "--metrics", server.metrics_url,
                   "--token-file", str(token_file))
    assert r.code == 0, r.stderr
    return server


def mmsctl(capsys: pytest.CaptureFixture[str], *args: str) -> CliResult:
    return run_mmsctl(capsys, "--context", "srv", *args)


def one_error_line(r: CliResult) -> str:
    """The single ``error:`` line of a failed command (a hint line may follow, never a traceback)."""
    assert "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert lines and lines[0].startswith("error: ") and all(x.startswith("hint: ") for x in lines[1:]), r.stderr
    return lines[0]


def test_ping_names_mmsctl_and_its_version(srv: ServerInfo, capsys) -> None:
    r = mmsctl(capsys, "ping", "-o", "json")
    assert r.code == 0, r.stderr
    (row,) = json.loads(r.stdout)
    assert (row["healthy"], row["status"], row["server"], row["version"]) == (True, "Healthy", "mmsctl", __version__)
    r = mmsctl(capsys, "ping")
    assert r.code == 0 and r.stdout.splitlines()[1].split()[:4] == ["srv", srv.inference_url, "Healthy", "mmsctl"]
    with MetricsClient(resolve_context("srv")) as metrics:  # what `mmsctl top` reads, token included
        assert "mmsctl_requests_total" in {sample.name for sample in metrics.fetch()}


def test_register_without_waiting(srv: ServerInfo, capsys) -> None:
    r = mmsctl(capsys, "models", "register", "noop", "--model-name", "lazy", "--initial-workers", "1", "--no-synchronous")
    assert r.code == 0 and r.stdout.startswith("lazy accepted, loading in the background on "), r.stderr
    try:
        r = mmsctl(capsys, "scale", "lazy", "--min-workers", "1", "--wait", "--timeout", "60")
        assert (r.code, r.stdout) == (0, "lazy scaled to 1 worker (1 ready)\n"), r.stderr
    finally:
        assert mmsctl(capsys, "models", "unregister", "lazy").code == 0


def test_register_names_the_model_and_takes_the_response_timeout_in_seconds(srv: ServerInfo, capsys) -> None:
    """`--response-timeout` is seconds everywhere; mmsctl's server counts plain numbers in minutes
    (as MMS does), so the client sends `7s`, and describe shows 7, not 420."""
    host = srv.management_url.removeprefix("http://")
    r = mmsctl(capsys, "models", "register", "onnxsq.mar", "--response-timeout", "7", "--initial-workers", "0")
    assert (r.code, r.stdout) == (0, f"onnxsq registered on {host} (from onnxsq.mar)\n"), r.stderr
    try:
        assert json.loads(mmsctl(capsys, "models", "describe", "onnxsq", "-o", "json").stdout)["responseTimeout"] == 7
        table = mmsctl(capsys, "models", "describe", "onnxsq").stdout
        assert re.search(r"^Response timeout\s+7 s$", table, re.M), table
    finally:
        assert mmsctl(capsys, "models", "unregister", "onnxsq").code == 0


def test_register_describe_scale_unregister(srv: ServerInfo, token_file: Path, capsys) -> None:
    host = srv.management_url.removeprefix("http://")
    r = mmsctl(capsys, "models", "register", "noop", "--model-name", "echo", "--initial-workers", "1")
    assert (r.code, r.stdout) == (0, f"echo registered on {host} (from noop)\n"), r.stderr
    try:
        r = mmsctl(capsys, "models", "register", "noop", "--model-name", "echo")
        assert r.code == 8 and "already registered" in one_error_line(r) and "409" in r.stderr

        # describe in every format: json/yaml are the server's own document, table/wide are for people
        doc = json.loads(mmsctl(capsys, "models", "describe", "echo", "-o", "json").stdout)
        assert (doc["modelName"], doc["modelUrl"], doc["minWorkers"]) == ("echo", "noop", 1)
        assert [w["status"] for w in doc["workers"]] == ["READY"]
        as_yaml = yaml.safe_load(mmsctl(capsys, "models", "describe", "echo", "-o", "yaml").stdout)
        assert as_yaml["modelName"] == "echo" and list(as_yaml) == list(doc)
        table = mmsctl(capsys, "models", "describe", "echo").stdout
        assert "1 ready / 1 (min 1, max 1)" in table and "READY" in table and "PID" not in table
        wide = mmsctl(capsys, "models", "describe", "echo", "-o", "wide").stdout
        assert "PID" in wide and str(doc["workers"][0]["pid"]) in wide

        # scale --wait returns once the server describes 2 READY workers
        r = mmsctl(capsys, "scale", "echo", "--min-workers", "2", "--wait", "--timeout", "60")
        assert (r.code, r.stdout) == (0, "echo scaled to 2 workers (2 ready)\n"), r.stderr
        doc = json.loads(mmsctl(capsys, "models", "describe", "echo", "-o", "json").stdout)
        assert [w["status"] for w in doc["workers"]] == ["READY", "READY"] and doc["minWorkers"] == 2
        assert len({w["pid"] for w in doc["workers"]}) == 2
        r = mmsctl(capsys, "models", "list", "-o", "wide")
        rows = [line.split()[:3] for line in r.stdout.splitlines() if line.startswith("echo")]
        assert rows == [["echo", "1.0", "2/2"]]

        # without --wait the server answers 202 and scales in the background
        r = mmsctl(capsys, "scale", "echo", "--min-workers", "1", "-o", "json")
        assert r.code == 0 and json.loads(r.stdout)["status"] == 202
        assert json.loads(r.stdout)["readyWorkers"] is None
        r = mmsctl(capsys, "scale", "echo", "--replicas", "1")
        assert r.stdout == "echo scaling to 1 worker (the server is starting them; --wait waits)\n"
        with ManagementClient(Context("srv", srv.inference_url, srv.management_url, token_file=str(token_file))) as m:
            assert len(m.wait_for_workers("echo", 1, timeout=60, poll_interval=0.2).workers) == 1
    finally:
        r = mmsctl(capsys, "models", "unregister", "echo")
    assert (r.code, r.stdout) == (0, f"echo unregistered on {host}\n"), r.stderr
    r = mmsctl(capsys, "models", "describe", "echo")
    assert r.code == 3 and one_error_line(r) == f"error: model echo not found on {host}"


def test_list_follows_every_page(srv: ServerInfo, token_file: Path, capsys) -> None:
    """101 models: more than the server's largest page (100), so even the default list needs two pages."""
    names = [f"m{i:03d}" for i in range(101)]
    ctx = Context("srv", srv.inference_url, srv.management_url, token_file=str(token_file))
    with ManagementClient(ctx) as m:
        before = {x.name for x in m.list_models()}
        for name in names:
            m.register("noop", model_name=name, initial_workers=0)
        try:
            page = httpx.get(f"{srv.management_url}/models", headers={"Authorization": f"Bearer {TOKEN}"}).json()
            assert len(page["models"]) == 100 and page["nextPageToken"]  # the server really pages
            listed = [row["modelName"] for row in json.loads(mmsctl(capsys, "models", "list", "-o", "json").stdout)]
            assert [n for n in listed if n not in before] == names
            small = json.loads(mmsctl(capsys, "models", "list", "--page-size", "7", "-o", "json").stdout)
            assert [row["modelName"] for row in small] == listed
            table = mmsctl(capsys, "models", "list").stdout.splitlines()
            assert table[0].split() == ["NAME", "URL"] and len(table) == 1 + len(listed)
            assert [x.name for x in m.list_models(limit=3)] == listed
            r = mmsctl(capsys, "models", "list", "--page-size", "0")
            assert r.code == 2 and "Traceback" not in r.stderr
        finally:
            for name in names:
                m.unregister(name)
        assert {x.name for x in m.list_models()} == before


def test_unknown_model_is_one_line_and_exit_3(srv: ServerInfo, capsys) -> None:
    host = srv.management_url.removeprefix("http://")
    for args in (("models", "describe", "ghost"), ("models", "unregister", "ghost"),
                 ("scale", "ghost", "--min-workers", "1"), ("scale", "ghost", "--min-workers", "1", "--wait")):
        r = mmsctl(capsys, *args)
        assert (r.code, r.stdout) == (3, ""), args
        assert one_error_line(r) == f"error: model ghost not found on {host}", args
    r = mmsctl(capsys, "models", "register", "missing.mar")
    assert r.code == 3 and "missing.mar" in one_error_line(r)


def test_scale_wait_gives_up_with_exit_7_when_workers_never_start(srv: ServerInfo, capsys) -> None:
    r = mmsctl(capsys, "models", "register", "broken", "--initial-workers", "0")
    assert r.code == 0, r.stderr
    try:
        r = mmsctl(capsys, "scale", "broken", "--min-workers", "1", "--wait", "--timeout", "2")
        assert r.code == 7 and "gave up waiting for broken" in one_error_line(r)
        assert "0 of 1 workers ready" in r.stderr
    finally:
        assert mmsctl(capsys, "models", "unregister", "broken").code == 0


def test_bearer_token(srv: ServerInfo, capsys, tmp_path: Path) -> None:
    assert mmsctl(capsys, "models", "list").code == 0
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-token")
    host = srv.management_url.removeprefix("http://")
    run_mmsctl(capsys, "context", "add", "bad", "--inference", srv.inference_url, "--management", srv.management_url,
               "--token-file", str(wrong))
    run_mmsctl(capsys, "context", "add", "anon", "--inference", srv.inference_url, "--management", srv.management_url)
    for ctx in ("bad", "anon"):
        r = run_mmsctl(capsys, "--context", ctx, "models", "list")
        assert (r.code, r.stdout) == (6, "")
        assert one_error_line(r).startswith(f"error: authentication failed on {host}")
        r = run_mmsctl(capsys, "models", "describe", "noop", "--context", ctx)
        assert r.code == 6
    if SQUEEZENET_DIR.exists() and KITTEN_JPG.exists():
        r = run_mmsctl(capsys, "predict", "squeezenet", str(KITTEN_JPG), "--context", "bad")
        assert r.code == 6 and "authentication failed" in one_error_line(r)


# --- remote predict: the same command and output as local predict ---


@pytest.fixture
def squeezenet_mar(srv: ServerInfo, store: Path) -> Path:
    if not SQUEEZENET_DIR.exists():
        pytest.skip(f"test data not found: {SQUEEZENET_DIR} (the ../shared folder beside the repo is absent)")
    for image in (KITTEN_JPG, KITTEN_PNG):
        if not image.exists():
            pytest.skip(f"test data not found: {image}")
    return store / "squeezenet.mar"


def test_predict_with_context_answers_like_local_predict(squeezenet_mar: Path, capsys) -> None:
    remote = mmsctl(capsys, "predict", "squeezenet", str(KITTEN_PNG), "-o", "json")
    assert remote.code == 0, remote.stderr
    top = json.loads(remote.stdout)
    assert top[0]["class"] == "n02123045 tabby, tabby cat" and top[0]["probability"] > 0.9
    local = run_mmsctl(capsys, "predict", str(squeezenet_mar), str(KITTEN_PNG), "-o", "json")
    assert local.code == 0, local.stderr
    assert [r["class"] for r in json.loads(local.stdout)] == [r["class"] for r in top]
    expected = pytest.approx([r["probability"] for r in top], abs=1e-5)
    assert [r["probability"] for r in json.loads(local.stdout)] == expected

    table = mmsctl(capsys, "predict", "squeezenet", str(KITTEN_PNG), "-k", "2").stdout.splitlines()
    assert table[0].split() == ["INPUT", "RANK", "CLASS", "PROBABILITY"] and len(table) == 3
    assert table[1].split()[1:4] == ["1", "n02123045", "tabby,"]

    r = run_mmsctl(capsys, "predict", "squeezenet", str(KITTEN_JPG), str(KITTEN_PNG), "--context", "srv", "-o", "jsonl")
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert r.code == 0 and [(x["input"], x["status"]) for x in rows] == [(str(KITTEN_JPG), 200), (str(KITTEN_PNG), 200)]
    assert len(rows[0]["result"]) == 5


def test_predict_with_context_failures(squeezenet_mar: Path, capsys, tmp_path: Path) -> None:
    r = mmsctl(capsys, "predict", "ghost", str(KITTEN_PNG))
    assert (r.code, r.stdout) == (3, "") and one_error_line(r).startswith("error: model ghost not found on 127.0.0.1:")
    r = mmsctl(capsys, "predict", "squeezenet", str(KITTEN_PNG), str(tmp_path / "missing.jpg"), "-o", "json")
    assert r.code == 4 and "1 of 2 inputs failed" in r.stderr
    rows = json.loads(r.stdout)
    assert rows[0]["status"] == 200 and "error" in rows[1]
    junk = tmp_path / "junk.jpg"
    junk.write_bytes(b"this is not an image")
    r = mmsctl(capsys, "predict", "squeezenet", str(junk))
    assert r.code == 8 and r.stdout == "" and "400" in one_error_line(r)


# --- which server a command talks to when none is named ---


def talks_to_srv(capsys: pytest.CaptureFixture[str], *flags: str) -> bool:
    """Whether `models list` reached the module's server (it needs the token; it has no localnoop)."""
    r = run_mmsctl(capsys, *flags, "models", "list", "-o", "json")
    assert r.code == 0, r.stderr
    return "localnoop" not in [m["modelName"] for m in json.loads(r.stdout)]


def _serve(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mmsctl", *args], check=False, capture_output=True,
                          text=True, env=env, timeout=180, cwd=str(REPO))


def test_default_context_is_the_running_local_server_then_file_env_flag_win(
    srv: ServerInfo, capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    noop = make_noop_archive(tmp_path / "local-noop", "localnoop")
    ports = [free_port() for _ in range(3)]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    started = _serve(env, "serve", "start", "--name", "default", "--models", f"localnoop={noop}",
                     "--inference-address", f"http://127.0.0.1:{ports[0]}",
                     "--management-address", f"http://127.0.0.1:{ports[1]}",
                     "--metrics-address", f"http://127.0.0.1:{ports[2]}", "--timeout", "120")
    try:
        assert started.returncode == 0, started.stderr
        current = json.loads(run_mmsctl(capsys, "context", "current", "-o", "json").stdout)
        assert (current["name"], current["source"]) == ("local", "instance")
        assert current["management_url"] == f"http://127.0.0.1:{ports[1]}"
        r = run_mmsctl(capsys, "models", "list", "-o", "json")  # no flag, no env, no file: the local server
        assert r.code == 0 and [m["modelName"] for m in json.loads(r.stdout)] == ["localnoop"]

        # contexts.toml's current beats the local server
        dead = f"http://127.0.0.1:{free_port()}"
        ContextStore().add(Context("dead", dead, dead))
        assert run_mmsctl(capsys, "context", "use", "srv").code == 0
        assert talks_to_srv(capsys)
        # MMSCTL_CONTEXT beats the file
        monkeypatch.setenv("MMSCTL_CONTEXT", "dead")
        r = run_mmsctl(capsys, "models", "list")
        assert r.code == 5 and "cannot connect to" in one_error_line(r)
        # MMSCTL_MANAGEMENT_URL overrides one field of whatever context was chosen
        monkeypatch.setenv("MMSCTL_MANAGEMENT_URL", f"http://127.0.0.1:{ports[1]}")
        assert json.loads(run_mmsctl(capsys, "models", "list", "-o", "json").stdout) == [
            {"modelName": "localnoop", "modelUrl": str(noop)}]
        # a context named on the command beats every variable
        assert talks_to_srv(capsys, "--context", "srv")
        assert run_mmsctl(capsys, "models", "list", "--context", "dead").code == 5
        assert run_mmsctl(capsys, "models", "list", "--context", "local", "-o", "json").stdout.count("localnoop") == 1
    finally:
        stopped = _serve(env, "serve", "stop", "--name", "default")
    assert stopped.returncode == 0, stopped.stderr
    monkeypatch.delenv("MMSCTL_CONTEXT")
    monkeypatch.delenv("MMSCTL_MANAGEMENT_URL")
    run_mmsctl(capsys, "context", "use", "local")
    current = json.loads(run_mmsctl(capsys, "context", "current", "-o", "json").stdout)
    assert (current["source"], current["management_url"]) == ("default", "http://127.0.0.1:8081")
