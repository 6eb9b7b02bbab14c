"""A real OpenSSH server on 127.0.0.1 for a test, as the current user, with throwaway keys.

    with running_sshd(tmp_path) as sshd:
        ssh -i sshd.client_key -p sshd.port sshd.user@127.0.0.1 …

Everything (host key, authorized_keys, sshd_config, pid file, log) lives under the test's folder;
only public-key logins of :attr:`Sshd.client_key` are accepted. A test that needs it skips with
the reason when sshd, ssh or ssh-keygen is missing (.ci/run installs openssh-server as root).
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests.support._proc import free_port
from tests.support.waiting import wait_until

__all__ = ["Sshd", "keygen", "running_sshd"]

SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if os.access("/usr/sbin/sshd", os.X_OK) else None)
#: sshd started by root insists on its privilege-separation folder (the package's service makes it).
PRIVSEP_DIR = Path("/run/sshd")


@dataclass
class Sshd:
    port: int
    user: str
    client_key: Path  # private key whose public half is authorized
    log: Path


def keygen(path: Path) -> Path:
    """A new passwordless ed25519 key pair at *path* (and *path*.pub)."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "mmsctl-test", "-f", str(path)],
                   check=True, timeout=30, capture_output=True)
    path.chmod(0o600)
    return path


def _require_tools() -> str:
    missing = [name for name, found in (("sshd (openssh-server)", SSHD), ("ssh", shutil.which("ssh")),
                                        ("ssh-keygen", shutil.which("ssh-keygen"))) if not found]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (.ci/run installs openssh-server as root)")
    if os.geteuid() == 0 and not PRIVSEP_DIR.is_dir():
        try:
            PRIVSEP_DIR.mkdir(mode=0o755)
        except OSError as exc:
            pytest.skip(f"sshd as root needs {PRIVSEP_DIR}, which cannot be made: {exc}")
    return str(SSHD)


@contextmanager
def running_sshd(folder: Path) -> Iterator[Sshd]:
    """sshd -D on a free loopback port until the block ends (then SIGTERM, bounded)."""
    sshd = _require_tools()
    folder.mkdir(parents=True, exist_ok=True)
    host_key = keygen(folder / "host_key")
    client_key = keygen(folder / "client_key")
    authorized = folder / "authorized_keys"
    authorized.write_text((folder / "client_key.pub").read_text())
    port = free_port()  # below the ephemeral range: no outgoing connection takes it before sshd binds
    config = folder / "sshd_config"
    config.write_text("\n".join([
        "ListenAddress 127.0.0.1", f"Port {port}", f"HostKey {host_key}", f"AuthorizedKeysFile {authorized}",
        f"PidFile {folder / 'sshd.pid'}", "UsePAM no", "StrictModes no", "PasswordAuthentication no",
        "KbdInteractiveAuthentication no", "PermitRootLogin prohibit-password", "AllowTcpForwarding yes",
        "AllowAgentForwarding no", "X11Forwarding no", "PrintMotd no", "",
    ]))
    log = folder / "sshd.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen([sshd, "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err)
    try:
        def accepts() -> bool:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True

        wait_until(accepts, timeout=20, what="sshd to listen",
                   alive=lambda: f"sshd exited: {log.read_text()[-1000:]}" if proc.poll() is not None else None)
        yield Sshd(port, getpass.getuser(), client_key, log)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
