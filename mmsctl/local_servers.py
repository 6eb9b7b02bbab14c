"""The registry of local server instances: where a running server says who it is and how it is doing.

The server writes it; ``mmsctl serve``, contexts (the ``local`` context) and ``zoo clean``
read it, so it lives below both the server and the client. Each server started by
``mmsctl serve start`` owns ``<state_dir>/instances/<name>/``:

- ``config.json``  the ServerConfig it was started with (the server's own business)
- ``state.json``   pid, addresses, token file, status (``starting`` → ``ready`` | ``failed`` → ``stopped``;
                   ``died`` when a reader finds the process gone without having stopped)
- ``server.log``   the server's log, worker output included (rotated: ``server.log.1`` ...)

``state.json`` (:class:`InstanceState`) is the public part; it is replaced atomically,
so a reader never sees half a file. A pid alone does not say the server still runs: after
a crash the number may belong to any other process. The server records its process's start
time beside its pid, and :func:`server_alive` checks both before anyone trusts (or signals) it.

Starting is a claim: under :func:`registry_lock` (``flock`` on ``<state_dir>/instances/.lock``),
:func:`holder` finds a live server that holds the name or a port, and the starter writes its
``starting`` state before the lock is let go. Two ``serve start`` at once therefore decide one
after the other: exactly one claims, the other is told who holds what. ``serve stop`` takes the
same lock to pick and signal its server, so it stops a start that claimed or finds none.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, NamedTuple, Optional
from urllib.parse import urlsplit

from mmsctl.atomic import write_atomic
from mmsctl.config import state_dir

__all__ = ["Instance", "InstanceState", "holder", "list_instances", "one_running", "pid_alive", "process_start_time",
           "registry_lock", "running_instances", "server_alive"]

#: Statuses in which the server process should be there.
LIVE_STATUSES = frozenset({"starting", "ready", "stopping"})
#: How long a command waits for another's claim (a claim holds the lock for a spawn and a write: milliseconds).
LOCK_WAIT_S = 10.0
_WILDCARDS = frozenset({"", "0.0.0.0", "::", "*"})


class InstanceState(NamedTuple):
    """What ``state.json`` holds; a change is a new state (:meth:`Instance.update`).

    A NamedTuple, not a dataclass: the lean ``predict`` reads these (no ``dataclasses`` on the lean path:
    tests/cli/test_lazy_imports.py)."""

    name: str
    pid: int
    status: str = "starting"  # starting | ready | failed | stopping | stopped
    inference_url: str = ""
    management_url: str = ""
    metrics_url: str = ""
    log_file: str = ""
    #: The token file the server checks Bearer tokens against (None: no auth).
    token_file: Optional[str] = None
    #: When the server started (seconds since the epoch; 0: unknown).
    started_at: float = 0.0
    #: The start time of process ``pid`` (:func:`process_start_time`): with the pid, the server's identity.
    process_start: Optional[float] = None
    #: The folder register urls resolve against (None: no model store), for local tools that place archives.
    model_store: Optional[str] = None
    error: Optional[str] = None
    models: list[str] = []  # shared default: a state is never changed in place
    #: Lines ``serve start`` prints under its summary (a kernel measurement begun in the background).
    notes: list[str] = []
    #: Per model: ``archive`` (the first 32 hex digits of its archive's SHA-256; absent for a folder), ``handler``
    #: and ``override`` (a handler chosen at register): what ``mmsctl predict`` matches to send its inputs here.
    served: dict[str, dict[str, Any]] = {}
    #: Run with ``serve start --foreground``: its log goes to the terminal it runs in, not to ``log_file``.
    foreground: bool = False

    def ports(self) -> list[tuple[str, int]]:
        """(host, port) of each API it listens on."""
        found = []
        for url in (self.inference_url, self.management_url, self.metrics_url):
            try:
                parts = urlsplit(url)
                if parts.port is not None:
                    found.append(((parts.hostname or "").lower(), parts.port))
            except ValueError:
                continue
        return found

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "InstanceState":
        return cls(**{k: v for k, v in data.items() if k in cls._fields})


def pid_alive(pid: int) -> bool:
    """Whether *pid* is a live process (a zombie counts as gone)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().split(b") ", 1)[1][:1] != b"Z"
    except (OSError, IndexError):
        return True


def process_start_time(pid: int) -> Optional[float]:
    """When process *pid* started (seconds since the epoch, as the kernel counts it), None if it is gone.

    On Linux read from /proc as psutil computes it (boot time + start ticks), without importing psutil
    (the warm ``mmsctl predict`` checks servers this way: tests/cli/test_lazy_imports.py)."""
    boot: Optional[float]
    try:
        with open("/proc/stat", "rb") as fh:
            boot = next(float(line.split()[1]) for line in fh if line.startswith(b"btime "))
    except (OSError, ValueError, IndexError, StopIteration):
        boot = None  # no /proc: psutil knows each system's way
    if boot is not None:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                return int(fh.read().rsplit(b") ", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK") + boot
        except (OSError, ValueError, IndexError):
            return None
    import psutil

    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.Error, OSError):
        return None


def _runs_mmsctl_server(pid: int) -> bool:
    import psutil

    try:
        return "mmsctl.server" in " ".join(psutil.Process(pid).cmdline())
    except (psutil.Error, OSError):
        return False


def server_alive(state: InstanceState) -> bool:
    """Whether ``state.pid`` is still the server that wrote *state* (not a process that got its number since).

    The start time recorded by the server must match; a state file without one needs the process to
    run ``mmsctl.server``.
    """
    if not pid_alive(state.pid):
        return False
    if state.process_start is None:
        return _runs_mmsctl_server(state.pid)
    started = process_start_time(state.pid)
    return started is not None and abs(started - state.process_start) < 0.05


class Instance:
    """One named server instance and its folder."""

    def __init__(self, name: str, root: Optional[Path] = None) -> None:
        if not name or "/" in name or name.startswith("."):
            from mmsctl.errors import UsageError

            raise UsageError(f"bad instance name {name!r}")
        self.name = name
        self.dir = (root or state_dir() / "instances") / name

    @property
    def state_file(self) -> Path:
        return self.dir / "state.json"

    @property
    def config_file(self) -> Path:
        return self.dir / "config.json"

    @property
    def log_file(self) -> Path:
        return self.dir / "server.log"

    def read_state(self) -> Optional[InstanceState]:
        try:
            return InstanceState.from_dict(json.loads(self.state_file.read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def write_state(self, state: InstanceState) -> None:
        write_atomic(self.state_file, json.dumps(state._asdict(), indent=2))

    def update(self, **changes: Any) -> Optional[InstanceState]:
        state = self.read_state()
        if state is None:
            return None
        state = state._replace(**changes)
        self.write_state(state)
        return state

    def running_state(self) -> Optional[InstanceState]:
        """The state if its server process still runs (:func:`server_alive`) and is not marked stopped, else None."""
        state = self.read_state()
        if state is None or state.status not in LIVE_STATUSES or not server_alive(state):
            return None
        return state

    def died_state(self) -> Optional[InstanceState]:
        """The state of a server that says it runs but whose process is gone (killed, crashed), else None."""
        state = self.read_state()
        if state is None or state.status not in LIVE_STATUSES or server_alive(state):
            return None
        return state


@contextmanager
def registry_lock(root: Optional[Path] = None) -> Iterator[None]:
    """Hold the registry's lock: one claim (or stop) decided at a time, across processes.

    Raises:
        InstanceRunningError: another command held it for :data:`LOCK_WAIT_S` (a stopped terminal, Ctrl+Z).
    """
    import fcntl

    base = root or state_dir() / "instances"
    base.mkdir(parents=True, exist_ok=True)
    with open(base / ".lock", "a") as fh:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:  # bounded: a claim holds the lock for milliseconds
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    from mmsctl.errors import InstanceRunningError

                    raise InstanceRunningError(f"another mmsctl command has held {base / '.lock'} for "
                                               f"{LOCK_WAIT_S:g} s (a `serve start` or `serve stop` suspended?)") \
                        from None
                time.sleep(0.01)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _same_host(a: str, b: str) -> bool:
    loop = ("localhost", "127.0.0.1", "::1")
    a, b = ("127.0.0.1" if h in loop else h for h in (a, b))
    return a == b or a in _WILDCARDS or b in _WILDCARDS


def holder(name: str, ports: Iterable[tuple[str, int]], *, pid: Optional[int] = None,
           root: Optional[Path] = None) -> Optional[tuple[InstanceState, str]]:
    """The live server (other than process *pid*) that holds *name* or one of *ports*, and what it holds
    (``"the name"`` or ``"port 8080"``); None when both are free. Call it under :func:`registry_lock`."""
    wanted = list(ports)
    for instance in list_instances(root):
        state = instance.running_state()
        if state is None or state.pid == pid:
            continue
        if instance.name == name:
            return state, "the name"
        for host, port in state.ports():
            if any(port == p and _same_host(host, h) for h, p in wanted):
                return state, f"port {port}"
    return None


def list_instances(root: Optional[Path] = None) -> list[Instance]:
    """Every instance folder that has a state file, by name."""
    base = root or state_dir() / "instances"
    if not base.is_dir():
        return []
    return [Instance(p.name, base) for p in sorted(base.iterdir()) if (p / "state.json").is_file()]


def running_instances(root: Optional[Path] = None) -> list[InstanceState]:
    """The state of every instance whose server is running, by name."""
    found = []
    for instance in list_instances(root):
        state = instance.running_state()
        if state is not None:
            found.append(state)
    return found


def one_running(root: Optional[Path] = None) -> Optional[InstanceState]:
    """The one running instance ("the local server"); None when none runs.

    Raises:
        AmbiguousInstanceError: several run; the message names each (the one rule that the
            ``local`` context, ``serve stop`` and ``serve logs`` share).
    """
    running = running_instances(root)
    if len(running) > 1:
        from mmsctl.errors import AmbiguousInstanceError

        names = ", ".join(f"{s.name} ({s.inference_url})" for s in running)
        raise AmbiguousInstanceError(f"{len(running)} mmsctl servers are running here: {names}",
                                     names=[s.name for s in running])
    return running[0] if running else None
