"""Port-forwarding tunnels to instances' private APIs, as ``kubectl port-forward`` opens them.

A fleet member's management API listens on its private address, which only the VPC reaches.
From elsewhere, mmsctl runs one tunnel per member that forwards the member's ports to
``127.0.0.1`` here, with a real client, not a reimplementation:

* ``ssh``: the OpenSSH client, ``ssh -N -L 127.0.0.1:LOCAL:127.0.0.1:REMOTE … HOST``, one
  process per member (every port in it), batch mode (never a password prompt), new host keys
  accepted and changed ones refused;
* ``ssm``: ``aws ssm start-session --document-name AWS-StartPortForwardingSession``, one
  process per port (the document forwards one), the instance id as target; it needs the AWS
  CLI and its Session Manager plugin.

The ``ssh_config`` setting (``MMSCTL_SSH_CONFIG`` or ``ssh_config`` in config.toml) names a
file ssh reads instead of ``~/.ssh/config`` (``ssh -F FILE``): a jump host, another port, or
the tests' local sshd.

A tunnel is open when every local port accepts a connection (observed, never a sleep); one whose
process exits is reported with the client's own last error line. Every process runs in its own
process group (a terminal's Ctrl+C reaches mmsctl only, which then closes them in order) and,
on Linux, gets SIGTERM if mmsctl itself dies, so no tunnel outlives it.

:func:`ssh_host_block` writes the same forwards as ``~/.ssh/config`` entries instead
(``ec2 ssh-config``, ``fleet ssh-config``), for users who run ssh themselves.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import IO, Callable, Literal, Optional, Sequence

from mmsctl import exit_codes as codes
from mmsctl.errors import MmsError, UsageError

__all__ = [
    "DEFAULT_REMOTE_PORTS",
    "PORT_NAMES",
    "Forward",
    "LocalPortBusy",
    "SshOptions",
    "Target",
    "Tunnel",
    "TunnelSet",
    "TunnelToolMissing",
    "TunnelsFailed",
    "Via",
    "check_tools",
    "parse_ports",
    "plan",
    "ssh_command",
    "ssh_host_block",
    "ssm_command",
]

Via = Literal["ssh", "ssm"]
#: A member's inference, management and metrics ports (what `fleet create`'s instances listen on).
DEFAULT_REMOTE_PORTS = (8080, 8081, 8082)
PORT_NAMES = ("inference", "management", "metrics")
SSM_DOCUMENT = "AWS-StartPortForwardingSession"
_CLI_INSTALL = "https://docs.aws.amazon.com/cli/latest/userguide/getting-started-install.html"
_PLUGIN_INSTALL = ("https://docs.aws.amazon.com/systems-manager/latest/userguide/"
                   "session-manager-working-with-install-plugin.html")


class TunnelToolMissing(MmsError):
    """The program that runs the tunnels (ssh, or aws and its Session Manager plugin) is not on PATH."""

    reference = "tunnel-tool-missing"


class LocalPortBusy(UsageError):
    """A local port a tunnel would listen on is taken by another program."""

    reference = "local-port-busy"


class TunnelsFailed(MmsError):
    """No tunnel opened; the message names each member and its client's error line."""

    exit_code = codes.UNREACHABLE
    reference = "tunnels-failed"

    def __init__(self, message: str, *, failed: dict[str, str], hint: Optional[str] = None) -> None:
        super().__init__(message, hint=hint)
        self.failed = failed


@dataclass(frozen=True)
class Forward:
    """127.0.0.1:*local* here to port *remote* on the instance's loopback; *name* says which API."""

    name: str
    local: int
    remote: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.local}"


@dataclass(frozen=True)
class Target:
    """One instance to tunnel to: *host* is where ssh connects (the instance id for ssm)."""

    member: str
    host: str
    forwards: tuple[Forward, ...]
    key_name: Optional[str] = None

    def url(self, name: str) -> Optional[str]:
        return next((f.url for f in self.forwards if f.name == name), None)


@dataclass(frozen=True)
class SshOptions:
    """How ssh logs in: the user, the key (``IDENTITY_DIR/KEY.pem``; none: ssh's own), a config file."""

    user: str = "ubuntu"
    identity_dir: str = "~/.ssh"
    key_name: Optional[str] = None  # overrides each instance's own key pair
    config_file: Optional[str] = None  # ``ssh -F``; default: the ssh_config setting
    connect_timeout_s: int = 15


def parse_ports(text: str) -> tuple[int, ...]:
    """``INFERENCE,MANAGEMENT[,METRICS]`` as numbers 1-65535.

    Raises:
        UsageError: not two or three port numbers.
    """
    parts = [p.strip() for p in text.split(",")]
    try:
        ports = tuple(int(p) for p in parts)
    except ValueError:
        ports = ()
    if not 2 <= len(ports) <= 3 or not all(1 <= p <= 65535 for p in ports):
        raise UsageError(f"remote ports {text!r}: expected INFERENCE,MANAGEMENT[,METRICS], numbers 1 to 65535",
                         param="remote_ports")
    return ports


def plan(members: Sequence[tuple[str, str, Optional[str]]], first_local: int,
         remote_ports: Sequence[int] = DEFAULT_REMOTE_PORTS) -> list[Target]:
    """One target per ``(member, host, key name)``: member *i*'s *j*-th port is local ``first_local + n·i + j``.

    Raises:
        UsageError: the local ports would pass 65535.
    """
    width = len(remote_ports)
    last = first_local + width * len(members) - 1
    if last > 65535:
        raise UsageError(f"local ports from {first_local} leave no room for {len(members)} members "
                         f"({width} ports each, up to {last})", param="local_port")
    return [Target(member, host, tuple(Forward(PORT_NAMES[j], first_local + width * i + j, remote)
                                       for j, remote in enumerate(remote_ports)), key_name=key)
            for i, (member, host, key) in enumerate(members)]


def _ssh_config_file() -> Optional[str]:
    from mmsctl.config import setting

    return setting("ssh_config")


def ssh_command(target: Target, options: SshOptions) -> list[str]:
    """The ``ssh`` command line that forwards every port of *target* and runs nothing else."""
    argv = ["ssh", "-N", "-o", "ExitOnForwardFailure=yes", "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=accept-new", "-o", f"ConnectTimeout={options.connect_timeout_s}",
            "-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=3"]
    config = options.config_file or _ssh_config_file()
    if config:
        argv += ["-F", os.path.expanduser(config)]
    key = options.key_name or target.key_name
    if key:
        argv += ["-i", os.path.join(os.path.expanduser(options.identity_dir), f"{key}.pem")]
    for f in target.forwards:
        argv += ["-L", f"127.0.0.1:{f.local}:127.0.0.1:{f.remote}"]
    # "--": a host (it comes from the EC2 API) is never read as an option of ssh.
    return [*argv, "-l", options.user, "--", target.host]


def ssm_command(target: Target, forward: Forward) -> list[str]:
    """The ``aws ssm start-session`` command line that forwards one port of *target* (region and
    profile come from the environment: AWS_REGION, AWS_PROFILE)."""
    return ["aws", "ssm", "start-session", "--target", target.host, "--document-name", SSM_DOCUMENT,
            "--parameters", f"portNumber={forward.remote},localPortNumber={forward.local}"]


def check_tools(via: Via) -> None:
    """Raise :class:`TunnelToolMissing` unless the programs *via* needs are on PATH."""
    if via == "ssh":
        if shutil.which("ssh") is None:
            raise TunnelToolMissing("ssh tunnels need the OpenSSH client (ssh), which is not on PATH",
                                    hint="install it (Debian/Ubuntu: apt-get install openssh-client)")
        return
    if shutil.which("aws") is None:
        raise TunnelToolMissing("Session Manager tunnels run `aws ssm start-session`: the AWS CLI (aws) is not "
                                "on PATH", hint=f"install it: {_CLI_INSTALL}")
    if shutil.which("session-manager-plugin") is None:
        raise TunnelToolMissing("Session Manager tunnels need the AWS CLI's Session Manager plugin "
                                "(session-manager-plugin), which is not on PATH",
                                hint=f"install it: {_PLUGIN_INSTALL}")


def check_local_ports(targets: Sequence[Target]) -> None:
    """Raise :class:`LocalPortBusy` if another program listens on a local port of *targets*."""
    for target in targets:
        for f in target.forwards:
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", f.local))
                except OSError:
                    raise LocalPortBusy(f"local port {f.local} ({target.member}'s {f.name} API) is in use",
                                        param="local_port") from None


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the kernel sends SIGTERM to the tunnel when mmsctl dies, however it dies."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _last_error_line(text: str) -> str:
    """The client's own reason: its last line that is not a host-key notice."""
    lines = [ln.strip() for ln in text.splitlines()
             if ln.strip() and not ln.startswith("Warning: Permanently added")]
    return lines[-1][:300] if lines else ""


@dataclass
class Tunnel:
    """The processes forwarding one target's ports, and what became of them."""

    target: Target
    processes: list["subprocess.Popen[bytes]"] = field(default_factory=list)
    logs: list[IO[bytes]] = field(default_factory=list)
    state: str = "starting"  # starting | open | failed | exited | closed
    error: Optional[str] = None

    @property
    def member(self) -> str:
        return self.target.member

    def exit_reason(self) -> Optional[str]:
        """Why a process of the tunnel exited (its last stderr line, else its exit status); None while all run."""
        for proc, log in zip(self.processes, self.logs):
            code = proc.poll()
            if code is None:
                continue
            log.seek(0)
            line = _last_error_line(log.read().decode("utf-8", "replace"))
            return line or f"{os.path.basename(str(proc.args[0]))} exited with status {code}"  # type: ignore[index]
        return None

    def ports_accept(self) -> bool:
        for f in self.target.forwards:
            try:
                with socket.create_connection(("127.0.0.1", f.local), timeout=0.5):
                    pass
            except OSError:
                return False
        return True

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM each process group, SIGKILL what is left after *timeout* s, reap them all."""
        for proc in self.processes:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + timeout
        for proc in self.processes:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(5)
        for log in self.logs:
            log.close()
        self.logs = []


class TunnelSet:
    """The tunnels of one command run; leaving the ``with`` block closes every one."""

    def __init__(self, tunnels: list[Tunnel]) -> None:
        self.tunnels = tunnels

    @classmethod
    def start(cls, targets: Sequence[Target], via: Via, *, ssh: Optional[SshOptions] = None,
              env: Optional[dict[str, str]] = None) -> "TunnelSet":
        """Start every target's processes (their stderr kept to name a failure)."""
        check_local_ports(targets)
        opened = cls([])
        try:
            for target in targets:
                tunnel = Tunnel(target)
                opened.tunnels.append(tunnel)
                commands = ([ssh_command(target, ssh or SshOptions())] if via == "ssh"
                            else [ssm_command(target, f) for f in target.forwards])
                for argv in commands:
                    log = tempfile.TemporaryFile()
                    tunnel.logs.append(log)
                    tunnel.processes.append(subprocess.Popen(
                        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                        env={**os.environ, **(env or {})}, start_new_session=True,
                        preexec_fn=_die_with_parent if sys.platform == "linux" else None))
        except BaseException:
            opened.close()
            raise
        return opened

    def __enter__(self) -> "TunnelSet":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def open(self) -> list[Tunnel]:
        return [t for t in self.tunnels if t.state == "open"]

    @property
    def failed(self) -> list[Tunnel]:
        return [t for t in self.tunnels if t.state == "failed"]

    def wait_open(self, timeout: float = 30.0, *, interval: float = 0.1,
                  clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        """Wait until each tunnel's local ports accept connections, or its process exits, or *timeout*
        passes; a tunnel that did not open is stopped and marked failed with the reason."""
        deadline = clock() + timeout
        while True:
            for tunnel in (t for t in self.tunnels if t.state == "starting"):
                reason = tunnel.exit_reason()
                if reason is not None:
                    tunnel.state, tunnel.error = "failed", reason
                    tunnel.stop()
                elif tunnel.ports_accept():
                    tunnel.state = "open"
            waiting = [t for t in self.tunnels if t.state == "starting"]
            if not waiting:
                return
            if clock() >= deadline:
                for tunnel in waiting:
                    tunnel.error = tunnel.exit_reason() or f"its ports did not open within {timeout:g} s"
                    tunnel.state = "failed"
                    tunnel.stop()
                return
            sleep(interval)

    def raise_if_none_open(self) -> None:
        """Raise :class:`TunnelsFailed` (each member and its reason) when no tunnel is open."""
        if self.open:
            return
        failed = {t.member: t.error or "did not open" for t in self.tunnels}
        raise TunnelsFailed("no tunnel opened: " + "; ".join(f"{m}: {why}" for m, why in failed.items()),
                            failed=failed)

    def watch(self, on_exit: Callable[[Tunnel], None], *, stop: Callable[[], bool] = lambda: False,
              interval: float = 0.5, sleep: Callable[[float], None] = time.sleep) -> None:
        """Until *stop* says so or no tunnel is open, check the open ones; a tunnel whose process
        exited is stopped (the rest of its processes too), marked ``exited`` and passed to *on_exit*."""
        while self.open and not stop():  # bounded: runs until Ctrl+C/SIGTERM or every tunnel exits, as port-forward
            for tunnel in self.open:
                reason = tunnel.exit_reason()
                if reason is not None:
                    tunnel.stop()
                    tunnel.state, tunnel.error = "exited", reason
                    on_exit(tunnel)
            sleep(interval)

    def close(self, timeout: float = 5.0) -> None:
        """Stop every process of every tunnel (idempotent)."""
        for tunnel in self.tunnels:
            tunnel.stop(timeout)
            if tunnel.state in ("open", "starting"):
                tunnel.state = "closed"


def ssh_host_block(alias: str, host: str, *, key: Optional[str], identity_dir: str,
                   forwards: list[tuple[int, int]], note: str = "", user: str = "ubuntu") -> str:
    """One ``~/.ssh/config`` entry; each forward ``(local, remote)`` maps localhost:local to the host's remote port."""
    lines = [f"Host {alias}", f"    HostName {host}", f"    User {user}"]
    if key:
        lines.append(f"    IdentityFile {identity_dir}/{key}.pem")
    if note:
        lines.append(f"    # {note}")
    lines += [f"    LocalForward {local} 127.0.0.1:{remote}" for local, remote in forwards]
    lines.append("    StrictHostKeyChecking accept-new")
    return "\n".join(lines)
