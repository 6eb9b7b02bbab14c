"""Shared plumbing for the reference-server helpers: free ports, short temp dirs, HTTP polls, stops.

Both MMS and TorchServe are a Python launcher that starts a JVM, which in turn
starts Python workers talking over Unix sockets named ``<java.io.tmpdir>/.mms.sock.9000``
(``.ts.sock.`` for TorchServe). Giving every run its own short ``TEMP``/``TMPDIR``
keeps those sockets (and the launcher's ``.model_server.pid``) private to the run,
so two runs on one machine cannot step on each other.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Optional

__all__ = [
    "HttpReply",
    "any_free_port",
    "free_port",
    "free_ports",
    "http_request",
    "remove_tree",
    "short_tmp_dir",
    "stop_process_group",
    "port_block",
    "tail",
]


def free_port(low: int = 20000, high: int = 32000) -> int:
    """A free loopback TCP port below 32768 (MMS refuses larger ones; the kernel's ephemeral range starts there)."""
    rng = random.SystemRandom()
    for _ in range(500):
        port = rng.randint(low, high)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {low}..{high}")


def any_free_port() -> int:
    """A TCP port the kernel just handed out on 127.0.0.1 (for servers without MMS's port limit)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_block() -> int:
    """A free port N with N+1 and N+2 free too (``serve start --port N``: inference, management, metrics)."""
    for _ in range(50):
        base = free_port()
        with socket.socket() as s1, socket.socket() as s2:
            try:
                s1.bind(("127.0.0.1", base + 1))
                s2.bind(("127.0.0.1", base + 2))
            except OSError:
                continue
        return base
    raise RuntimeError("no three free ports in a row")


def free_ports(count: int, pick: Callable[[], int] = free_port) -> list[int]:
    """*count* distinct free ports, each from *pick*."""
    ports: list[int] = []
    for _ in range(100 * count + 1):
        if len(ports) == count:
            return ports
        port = pick()
        if port not in ports:
            ports.append(port)
    raise RuntimeError(f"{count} distinct free ports not found")


def short_tmp_dir(prefix: str) -> Path:
    """A private temp folder with a short path (Unix socket paths must stay under 108 bytes)."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


class HttpReply:
    """Status, headers and body of one plain HTTP exchange."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))

    def __repr__(self) -> str:
        return f"HttpReply({self.status}, {self.body[:200]!r})"


def http_request(
    method: str,
    url: str,
    *,
    body: Optional[bytes] = None,
    headers: Optional[dict[str, str]] = None,
    timeout: float = 10.0,
) -> HttpReply:
    """One HTTP request with the standard library; HTTP errors are returned, not raised."""
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return HttpReply(resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read())
    except urllib.error.HTTPError as exc:
        return HttpReply(exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read())


def stop_process_group(proc: subprocess.Popen[bytes], *, grace: float = 10.0) -> None:
    """SIGTERM the process group of *proc* (started with ``start_new_session``), then SIGKILL."""
    try:
        pgid = os.getpgid(proc.pid)
    except ProcessLookupError:
        pgid = proc.pid
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=wait)
            # The launcher is gone; make sure the JVM and workers in its group are too.
            if not _group_alive(pgid):
                return
            time.sleep(0.2)
            if not _group_alive(pgid):
                return
        except subprocess.TimeoutExpired:
            continue


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def tail(path: Path, lines: int = 30) -> str:
    """The last lines of a log file, for error messages."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def remove_tree(path: Path) -> None:
    """Delete a scratch folder; one already gone (or half gone) is fine."""
    shutil.rmtree(path, ignore_errors=True)
