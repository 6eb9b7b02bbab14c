"""`mmsctl fleet tunnel` with real parts: a fleet in moto (server mode), a real sshd on 127.0.0.1,
the real OpenSSH client, and a real mmsctl server behind the tunnels.

moto's instances have addresses but no machines, so the ssh client is given a config file
(``MMSCTL_SSH_CONFIG``, passed as ``ssh -F``) that sends each member's address to the local sshd
(or to a closed port, for a member that must fail); the member's ports are the local server's
(``--remote-ports``). Everything stays on 127.0.0.1.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from mmsctl.cloud.instance import tunnels
from tests.cloud.conftest import REPO, run_cli
from tests.cloud.test_fleet import _asg, _create, aws, cli  # noqa: F401 - fixtures
from tests.support.cli import run_mmsctl
from tests.support._proc import any_free_port, free_port
from tests.support.mmsctl_server import make_noop_archive, running_mmsctl_server
from tests.support.signals import popen
from tests.support.sshd import keygen, running_sshd
from tests.support.waiting import wait_until


def _hosts(aws: dict[str, Any], name: str) -> list[tuple[str, str]]:
    """(instance id, the address mmsctl's ssh connects to) of each member, sorted by id as the command does."""
    ids = sorted(i["InstanceId"] for i in _asg(aws, name)["Instances"])
    found = {i["InstanceId"]: i for r in aws["ec2"].describe_instances(InstanceIds=ids)["Reservations"]
             for i in r["Instances"]}
    return [(iid, found[iid].get("PublicIpAddress") or found[iid]["PrivateIpAddress"]) for iid in ids]


def _ssh_config(path: Path, routes: dict[str, int], known_hosts: Path) -> Path:
    """An ssh config that sends each address to 127.0.0.1:PORT (and keeps host keys in the test's folder)."""
    blocks = [f"Host {address}\n    HostName 127.0.0.1\n    Port {port}\n" for address, port in routes.items()]
    path.write_text("\n".join(blocks) + f"\nHost *\n    UserKnownHostsFile {known_hosts}\n    LogLevel ERROR\n")
    return path


def _free_run(count: int) -> int:
    """The first of *count* consecutive free loopback ports."""
    for _ in range(200):
        first = free_port(20000, 30000)
        if all(_free(first + i) for i in range(count)):
            return first
    raise RuntimeError(f"no {count} consecutive free ports")


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _ssh_children(pid: int) -> list[psutil.Process]:
    try:
        return [p for p in psutil.Process(pid).children(recursive=True) if p.name() == "ssh"]
    except psutil.NoSuchProcess:
        return []


def _keys(folder: Path, key: Path, name: str = "me") -> Path:
    folder.mkdir(exist_ok=True)
    shutil.copy(key, folder / f"{name}.pem")
    (folder / f"{name}.pem").chmod(0o600)
    return folder


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
@pytest.mark.slow
def test_tunnels_reach_each_member_until_stopped_then_every_ssh_is_gone(
        aws: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str], stop: signal.Signals) -> None:
    """Ctrl+C (SIGINT) or SIGTERM, as kubectl port-forward: every tunnel closed, exit 0."""
    _create(aws, "prod", "-m", "squeezenet", "--min", "3", "--max", "3", "--key-name", "me")
    hosts = _hosts(aws, "prod")
    closed = any_free_port()  # nothing listens there: the third member's ssh is refused
    with running_sshd(tmp_path / "sshd") as sshd, running_mmsctl_server(
            tmp_path / "srv", models={"noop": str(make_noop_archive(tmp_path / "noop"))}) as srv:
        config = _ssh_config(tmp_path / "ssh_config", {hosts[0][1]: sshd.port, hosts[1][1]: sshd.port,
                                                       hosts[2][1]: closed}, tmp_path / "known_hosts")
        remote = ",".join(url.rsplit(":", 1)[1] for url in (srv.inference_url, srv.management_url, srv.metrics_url))
        first = _free_run(9)
        out, err = tmp_path / "tunnel.out", tmp_path / "tunnel.err"
        with open(out, "wb") as fo, open(err, "wb") as fe:
            proc = popen(  # SIGINT/SIGTERM at their defaults, however the suite was started (a background job)
                [sys.executable, "-m", "mmsctl", "fleet", "tunnel", "prod", "--local-port", str(first),
                 "--remote-ports", remote, "--identity-dir", str(_keys(tmp_path / "keys", sshd.client_key)),
                 "--user", sshd.user, "--timeout", "20"],
                stdout=fo, stderr=fe, cwd=REPO, env=aws["moto"].env(MMSCTL_SSH_CONFIG=str(config)))
        try:
            wait_until(lambda: "forwarding until Ctrl+C" in err.read_text(), timeout=60, what="the tunnels to open",
                       alive=lambda: f"exited {proc.returncode}: {err.read_text()}" if proc.poll() is not None
                       else None)
            stderr = err.read_text()
            assert (f"warning: {hosts[2][0]}: tunnel failed: ssh: connect to host 127.0.0.1 port {closed}: "
                    "Connection refused") in stderr
            # Observed: one ssh per open member, each local port answering.
            children = _ssh_children(proc.pid)
            assert len(children) == 2
            assert all(_accepts(first + i) for i in range(6)) and not _accepts(first + 6)
            for i in range(2):
                assert f"{hosts[i][0]}" in out.read_text() and f"http://127.0.0.1:{first + 3 * i + 1}" in out.read_text()

            listed = run_mmsctl(capsys, "--context", "prod-tunnel", "models", "list", "-o", "json")
            assert listed.code == 0, listed.stderr
            # the members serve noop, which the fleet's template (squeezenet) does not hold: said, with the way out
            assert ("served by members but not in fleet prod's launch template (instances launched later will not "
                    "serve them): noop;") in listed.stderr and "--persist" in listed.stderr
            assert [(d["member"], [m["modelName"] for m in d["models"]]) for d in json.loads(listed.stdout)] == [
                (f"127.0.0.1:{first + 1}", ["noop"]), (f"127.0.0.1:{first + 4}", ["noop"])]
            # fleet describe finds the context naming the fleet and asks every member the same
            described = run_mmsctl(capsys, "fleet", "describe", "prod", "-o", "json")
            assert described.code == 0, described.stderr
            assert json.loads(described.stdout)["beyond_template"] == {
                "checked": True, "context": "prod-tunnel", "reason": None,
                "models": {"noop": [f"127.0.0.1:{first + 1}", f"127.0.0.1:{first + 4}"]}}
            text = run_mmsctl(capsys, "fleet", "describe", "prod")
            assert (f"served by members but not in the launch template (instances launched later will not serve "
                    f"them): noop (on 127.0.0.1:{first + 1}, 127.0.0.1:{first + 4});") in text.stderr
            assert "--persist" in text.stderr
            pinged = run_mmsctl(capsys, "--context", "prod-tunnel", "ping")
            assert pinged.code == 0, pinged.stderr

            # A tunnel that dies is reported, its member's ports close, the others go on.
            children[0].terminate()
            wait_until(lambda: "tunnel closed: " in err.read_text(), timeout=20, what="the dead tunnel's report")
            assert len(_ssh_children(proc.pid)) == 1 and sum(_accepts(first + i) for i in range(6)) == 3

            proc.send_signal(stop)
            assert proc.wait(timeout=30) == 0, err.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        wait_until(lambda: not any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children),
                   timeout=10, what="every ssh to exit")
        assert not any(_accepts(first + i) for i in range(9))
        assert "closing 1 tunnel\n" in err.read_text()
    # The context stays, for the next run of the same command.
    from mmsctl.client.contexts import ContextStore

    ctx = ContextStore().get("prod-tunnel")
    assert ctx.members == (f"http://127.0.0.1:{first}=http://127.0.0.1:{first + 1}=http://127.0.0.1:{first + 2}",
                           f"http://127.0.0.1:{first + 3}=http://127.0.0.1:{first + 4}=http://127.0.0.1:{first + 5}")


def test_when_no_tunnel_opens_each_member_is_named_with_sshs_error(aws: dict[str, Any], tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    _create(aws, "prod", "-m", "squeezenet", "--min", "2", "--max", "2", "--key-name", "me")
    hosts = _hosts(aws, "prod")
    with running_sshd(tmp_path / "sshd") as sshd:
        config = _ssh_config(tmp_path / "ssh_config", {address: sshd.port for _, address in hosts},
                             tmp_path / "known_hosts")
        wrong = _keys(tmp_path / "keys", keygen(tmp_path / "not-authorized"))
        first = _free_run(6)
        proc = run_cli(aws["moto"], "fleet", "tunnel", "prod", "--local-port", str(first), "--identity-dir",
                       str(wrong), "--user", sshd.user, "--timeout", "20",
                       env={"MMSCTL_SSH_CONFIG": str(config)}, timeout=90)
    assert proc.returncode == 5, proc.stderr
    error = next(line for line in proc.stderr.splitlines() if line.startswith("error: "))
    assert error.startswith("error: no tunnel opened: ")
    for iid, _ in hosts:
        assert f"{iid}: {sshd.user}@127.0.0.1: Permission denied (publickey)." in error
    assert "hint: ssh needs the fleet's key (--key-name, --identity-dir)" in proc.stderr
    assert not any(_accepts(first + i) for i in range(6))
    assert "prod-tunnel" not in run_mmsctl(capsys, "context", "list").stdout


def test_session_manager_needs_the_aws_cli_and_its_plugin(aws: dict[str, Any], tmp_path: Path) -> None:
    _create(aws, "prod", "-m", "squeezenet", "--min", "1")
    empty = tmp_path / "bin"
    empty.mkdir()
    no_aws = run_cli(aws["moto"], "fleet", "tunnel", "prod", "--via", "ssm", env={"PATH": str(empty)})
    assert no_aws.returncode == 1
    assert "error: Session Manager tunnels run `aws ssm start-session`: the AWS CLI (aws) is not on PATH" in no_aws.stderr
    (empty / "aws").write_text("#!/bin/sh\nexit 0\n")  # present on PATH; never run (the plugin check comes first)
    (empty / "aws").chmod(0o755)
    no_plugin = run_cli(aws["moto"], "fleet", "tunnel", "prod", "--via", "ssm", env={"PATH": str(empty)})
    assert no_plugin.returncode == 1
    assert "Session Manager plugin (session-manager-plugin), which is not on PATH" in no_plugin.stderr
    assert "session-manager-working-with-install-plugin" in no_plugin.stderr


def test_the_command_lines_and_the_port_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    targets = tunnels.plan([("i-1", "203.0.113.5", "me"), ("i-2", "i-2", None)], 18080, (8080, 8081))
    assert [(f.name, f.local, f.remote) for t in targets for f in t.forwards] == [
        ("inference", 18080, 8080), ("management", 18081, 8081), ("inference", 18082, 8080),
        ("management", 18083, 8081)]
    monkeypatch.setenv("MMSCTL_SSH_CONFIG", "/tmp/cfg")
    argv = tunnels.ssh_command(targets[0], tunnels.SshOptions(identity_dir="/keys"))
    assert argv[:2] == ["ssh", "-N"] and argv[-4:] == ["-l", "ubuntu", "--", "203.0.113.5"]
    for option in ("ExitOnForwardFailure=yes", "BatchMode=yes", "StrictHostKeyChecking=accept-new"):
        assert argv[argv.index(option) - 1] == "-o"
    assert argv[argv.index("-F") + 1] == "/tmp/cfg" and argv[argv.index("-i") + 1] == "/keys/me.pem"
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "-L"] == ["127.0.0.1:18080:127.0.0.1:8080",
                                                                       "127.0.0.1:18081:127.0.0.1:8081"]
    assert tunnels.ssm_command(targets[1], targets[1].forwards[1]) == [
        "aws", "ssm", "start-session", "--target", "i-2", "--document-name", "AWS-StartPortForwardingSession",
        "--parameters", "portNumber=8081,localPortNumber=18083"]
    with pytest.raises(tunnels.UsageError, match="no room for 2 members"):
        tunnels.plan([("a", "h", None), ("b", "h", None)], 65531)
    for bad in ("8080", "8080,x", "1,2,3,4", "0,8081"):
        with pytest.raises(tunnels.UsageError):
            tunnels.parse_ports(bad)
    assert tunnels.parse_ports(" 80, 81 ") == (80, 81)
    with socket.socket() as busy:  # another program's port: refused before any tunnel starts
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(tunnels.LocalPortBusy, match=f"local port {port} \\(i-1's inference API\\) is in use"):
            tunnels.TunnelSet.start(tunnels.plan([("i-1", "h", None)], port, (1, 2)), "ssh")
