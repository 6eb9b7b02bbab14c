"""Fan-out management on a fleet context, against real servers on loopback, one member down.

    test_fleet_of_mmsctl_servers     two mmsctl servers and a closed port (always runs)
    test_mixed_fleet_with_real_mms   an mmsctl server, a real MMS 1.1.11 and a closed port (interop)
    test_health_check_path_choice    why a fleet's target group checks /ping/MODEL (interop)

Every command prints one row per member; the down member's row says why, and the
command exits 4 naming it (5 when every member is unreachable).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.support.cli import run_mmsctl
from tests.support._proc import any_free_port, http_request
from tests.support.waiting import wait_until
from tests.support.cli import one_error_line
from tests.support.fixtures_mms import mms_server  # noqa: F401 - a fixture
from tests.support.mms import MmsInstance, build_noop_mar
from tests.support.mmsctl_server import ServerInfo, make_noop_archive, running_mmsctl_server

# One worker for the module (its servers are shared), with the other tests that start MMS.
pytestmark = [pytest.mark.xdist_group("mms")]


@dataclass
class Ours:
    servers: list[ServerInfo]
    stores: list[Path]


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ours]:
    """Two mmsctl servers whose stores hold the echo model as a folder (`noop`)."""
    root = tmp_path_factory.mktemp("fanout")
    stores = [root / "store-a", root / "store-b"]
    for store in stores:
        make_noop_archive(store / "noop", "noop")
    with running_mmsctl_server(root / "a", model_store=stores[0]) as a, \
            running_mmsctl_server(root / "b", model_store=stores[1]) as b:
        yield Ours([a, b], stores)


@pytest.fixture
def dead() -> str:
    """A management URL nothing listens on."""
    return f"http://127.0.0.1:{any_free_port()}"


def _member(server: Any) -> str:
    return f"{server.inference_url}={server.management_url}"


def _name(url: str) -> str:
    return url.split("://", 1)[1]


def _json(result: Any) -> Any:
    return json.loads(result.stdout)


@pytest.mark.slow
def test_fleet_of_mmsctl_servers(ours: Ours, dead: str, capsys, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = ours.servers
    members = ",".join([_member(a), _member(b), dead])
    added = run_mmsctl(capsys, "context", "add", "lab", "--members", members, "--use")
    assert added.code == 0 and "context 'lab' added (3 members) and in use" in added.stderr
    names = [_name(a.management_url), _name(b.management_url), _name(dead)]

    r = run_mmsctl(capsys, "models", "register", "noop", "--initial-workers", "1")
    assert r.code == 4, r.stderr
    rows = [line.split() for line in r.stdout.splitlines()]
    assert rows[0][:3] == ["MEMBER", "STATUS", "MESSAGE"]
    assert [(row[0], row[1]) for row in rows[1:]] == [(names[0], "registered"), (names[1], "registered"),
                                                      (names[2], "failed")]
    assert one_error_line(r).startswith(f"error: models register noop failed on 1 of 3 members: {names[2]} (")

    # The bound is a setting; one member at a time gives the same answers.
    monkeypatch.setenv("MMSCTL_FANOUT_CONCURRENCY", "1")
    listed = run_mmsctl(capsys, "models", "list", "-o", "json")
    monkeypatch.delenv("MMSCTL_FANOUT_CONCURRENCY")
    assert listed.code == 4
    data = _json(listed)
    assert [(d["member"], d["ok"], [m["modelName"] for m in d["models"]]) for d in data] == [
        (names[0], True, ["noop"]), (names[1], True, ["noop"]), (names[2], False, [])]
    assert "cannot connect" in data[2]["error"] or "refused" in data[2]["error"]

    scaled = run_mmsctl(capsys, "scale", "noop", "--min-workers", "2", "--wait", "--timeout", "60", "-o", "json")
    assert scaled.code == 4, scaled.stderr
    assert [(d["status"], (d["scale"] or {}).get("readyWorkers")) for d in _json(scaled)] == [
        ("scaled", 2), ("scaled", 2), ("failed", None)]
    described = run_mmsctl(capsys, "models", "describe", "noop")
    assert described.code == 4
    table = {line.split()[0]: line.split() for line in described.stdout.splitlines()[1:]}
    assert table[names[0]][1:4] == ["ok", "1.0", "2/2"] and table[names[2]][1] == "error"

    pinged = run_mmsctl(capsys, "ping", "-o", "json")
    assert pinged.code == 4
    assert [(p["member"], p["healthy"], p["server"]) for p in _json(pinged)] == [
        (names[0], True, "mmsctl"), (names[1], True, "mmsctl"), (names[2], False, "unknown")]

    # predict goes to the context's inference URL (the balancer's place), not to every member.
    body = tmp_path / "hello.txt"
    body.write_text("hello fleet")
    predicted = run_mmsctl(capsys, "predict", "noop", str(body), "--context", "lab", "-o", "json")
    assert (predicted.code, predicted.stdout) == (0, "hello fleet\n")
    run_mmsctl(capsys, "context", "add", "via-dead", "--members", _member(a), "--inference", dead)
    assert run_mmsctl(capsys, "predict", "noop", str(body), "--context", "via-dead").code == 5
    # ping checks that URL too, beside the members, when it is not one of them.
    pinged = run_mmsctl(capsys, "ping", "--context", "via-dead", "-o", "json")
    assert pinged.code == 4
    assert [(p["member"], p["url"], p["healthy"]) for p in _json(pinged)] == [
        (names[0], a.inference_url, True), ("(balancer)", dead, False)]

    gone = run_mmsctl(capsys, "models", "unregister", "noop")
    assert gone.code == 4 and [line.split()[1] for line in gone.stdout.splitlines()[1:]] == [
        "unregistered", "unregistered", "failed"]
    left = _json(run_mmsctl(capsys, "models", "list", "-o", "json"))
    assert [d["models"] for d in left[:2]] == [[], []]

    # A one-server context is untouched by all this (unregister now also takes -o json).
    run_mmsctl(capsys, "context", "add", "one", "--inference", a.inference_url, "--management", a.management_url)
    assert run_mmsctl(capsys, "models", "register", "noop", "--context", "one").code == 0
    single = run_mmsctl(capsys, "models", "unregister", "noop", "--context", "one", "-o", "json")
    assert single.code == 0 and {k: v for k, v in _json(single).items() if k != "message"} == {
        "status": 200, "modelName": "noop", "version": None}

    # Every member unreachable: the unreachable exit code, and the message says so.
    run_mmsctl(capsys, "context", "add", "down", "--members", dead)
    down = run_mmsctl(capsys, "models", "list", "--context", "down")
    assert down.code == 5
    assert one_error_line(down).startswith(f"error: models list failed on the only member: {names[2]} (")
    bad = run_mmsctl(capsys, "context", "add", "x", "--members", "10.0.0.5:8081")
    assert bad.code == 2 and one_error_line(bad) == (
        "error: bad member URL '10.0.0.5:8081': expected http(s)://HOST:PORT")
    monkeypatch.setenv("MMSCTL_FANOUT_CONCURRENCY", "0")
    assert one_error_line(run_mmsctl(capsys, "models", "list")) == "error: fanout_concurrency must be 1 to 256, not 0"


@pytest.mark.interop
@pytest.mark.slow
def test_mixed_fleet_with_real_mms(ours: Ours, mms_server: MmsInstance,  # noqa: F811
                                   dead: str, capsys, tmp_path: Path) -> None:
    """One archive, built by MMS's own model-archiver, registered on an mmsctl server and on MMS."""
    a = ours.servers[0]
    shutil.copy(mms_server.model_store / "noop.mar", ours.stores[0] / "noop.mar")
    members = ",".join([_member(a), _member(mms_server), dead])
    assert run_mmsctl(capsys, "context", "add", "mixed", "--members", members,
                      "--inference", mms_server.inference_url, "--use").code == 0
    names = [_name(a.management_url), _name(mms_server.management_url), _name(dead)]
    try:
        r = run_mmsctl(capsys, "models", "register", "noop.mar", "--model-name", "mixed", "--initial-workers", "1", "-o", "json")
        assert r.code == 4, r.stderr
        assert [(d["member"], d["status"]) for d in _json(r)] == [
            (names[0], "registered"), (names[1], "registered"), (names[2], "failed")]
        described = _json(run_mmsctl(capsys, "models", "describe", "mixed", "-o", "json"))
        assert [d["describe"]["modelName"] for d in described[:2]] == ["mixed", "mixed"]
        assert all(len(d["describe"]["workers"]) == 1 for d in described[:2])
        pinged = run_mmsctl(capsys, "ping", "-o", "json")
        assert pinged.code == 4
        assert [(p["member"], p["healthy"], p["server"]) for p in _json(pinged)] == [
            (names[0], True, "mmsctl"), (names[1], True, "mms"), (names[2], False, "unknown")]
        # The context's inference URL is MMS (a stand-in for the balancer): predict is answered there.
        body = tmp_path / "in.txt"
        body.write_text("via mms")
        wait_until(lambda: http_request("POST", f"{mms_server.inference_url}/predictions/mixed", body=b"x",
                                        timeout=10).status == 200, timeout=60, what="MMS worker")
        predicted = run_mmsctl(capsys, "predict", "mixed", str(body), "--context", "mixed", "-o", "json")
        assert (predicted.code, predicted.stdout) == (0, "via mms\n")
    finally:
        gone = run_mmsctl(capsys, "models", "unregister", "mixed", "-o", "json")
    assert [d["status"] for d in _json(gone)] == ["unregistered", "unregistered", "failed"]


@pytest.mark.interop
def test_health_check_path_choice(ours: Ours, mms_server: MmsInstance) -> None:  # noqa: F811
    """A load balancer only sees status codes. MMS 1.1.11 answers /ping and /ping/MODEL with 200
    even when it reports itself Unhealthy; mmsctl answers /ping/MODEL with 503 while the model
    has no ready worker. So `fleet create` checks /ping/FIRST_MODEL (docs/fleet.md)."""
    a = ours.servers[0]
    build_noop_mar(mms_server.model_store, "broken",
                   handler_source="raise RuntimeError('no weights')\n\ndef handle(data, context):\n    return data\n")
    reply = http_request("POST", f"{mms_server.management_url}/models?url=broken.mar&initial_workers=1"
                         "&synchronous=false", timeout=30)
    assert reply.status in (200, 202), reply.body
    try:
        pings: list[Any] = []

        def unhealthy() -> bool:
            pings.append(http_request("GET", f"{mms_server.inference_url}/ping", timeout=5))
            return b"Unhealthy" in pings[-1].body

        wait_until(unhealthy, timeout=60, what="MMS reporting Unhealthy")
        assert pings[-1].status == 200
        per_model = http_request("GET", f"{mms_server.inference_url}/ping/broken", timeout=5)
        assert (per_model.status, json.loads(per_model.body)) == (200, {"status": "Unhealthy"})
    finally:
        http_request("DELETE", f"{mms_server.management_url}/models/broken", timeout=60)
    # mmsctl: a model without a ready worker fails its own ping; /ping stays 200.
    reply = http_request("POST", f"{a.management_url}/models?url=noop&model_name=idle&initial_workers=0", timeout=60)
    assert reply.status == 200, reply.body
    try:
        idle = http_request("GET", f"{a.inference_url}/ping/idle", timeout=5)
        assert idle.status == 503 and json.loads(idle.body)["type"] == "ServiceUnavailableException"
        assert http_request("GET", f"{a.inference_url}/ping", timeout=5).status == 200
    finally:
        http_request("DELETE", f"{a.management_url}/models/idle", timeout=60)


def test_top_on_a_fleet_whose_only_member_is_down_is_one_line(capsys) -> None:
    """`top` watches fleets (tests/tui/test_fleet_live.py); with no member answering it exits 5."""
    assert run_mmsctl(capsys, "context", "add", "lab", "--members", "http://127.0.0.1:1").code == 0
    r = run_mmsctl(capsys, "top", "--once", "--context", "lab", "--interval", "0.1")
    assert r.code == 5 and r.stdout == ""
    assert one_error_line(r).startswith("error: top failed on the only member: 127.0.0.1:1 (cannot connect to")


def test_context_add_needs_both_urls_unless_it_is_a_fleet(capsys) -> None:
    r = run_mmsctl(capsys, "context", "add", "x", "--inference", "http://h:8080")
    assert r.code == 2 and one_error_line(r) == (
        "error: a new context needs --inference and --management (or --members / --fleet for a fleet); "
        "'x' does not exist yet")
    r = run_mmsctl(capsys, "context", "add", "x", "--members", "http://h:8081", "--region", "us-east-1")
    assert r.code == 2 and one_error_line(r) == "error: --region goes with --fleet"
    r = run_mmsctl(capsys, "context", "add", "lab", "--members", "http://a:9081,http://b=http://b:9081")
    assert r.code == 0
    listed = run_mmsctl(capsys, "context", "list", "-o", "json")
    lab = next(c for c in json.loads(listed.stdout) if c["name"] == "lab")
    assert (lab["inference_url"], lab["members"]) == ("http://a:8080", ["http://a:9081", "http://b=http://b:9081"])
    assert "2 members" in run_mmsctl(capsys, "context", "list").stdout
