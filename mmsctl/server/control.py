"""Starting, stopping and inspecting server instances from the CLI (the core of ``mmsctl serve``).

A background server is ``python -m mmsctl.server <config.json>`` in its own
session (so ``serve stop`` can kill it and its workers as one group if it must),
its output appended to the instance's ``server.log``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit
from typing import IO, Any, Callable, Iterator, Optional

from mmsctl.errors import (
    AddressInUseError,
    AmbiguousInstanceError,
    InputNotFoundError,
    InstanceRunningError,
    MmsError,
    NotFoundError,
    ServerError,
    UsageError,
)
from mmsctl.server.config import ServerConfig, load_properties, parse_address
from mmsctl.local_servers import (
    LIVE_STATUSES,
    Instance,
    InstanceState,
    holder,
    list_instances,
    one_running,
    registry_lock,
    running_instances,
    server_alive,
)
from mmsctl.names import model_location

__all__ = ["build_config", "print_logs", "prune_instances", "start_background", "start_foreground", "status_rows",
           "stop_instances"]


def _model_spec(spec: str, store: Optional[str] = None) -> str:
    """Make a local path in ``name=location`` absolute (the server runs elsewhere); zoo names and
    URLs stay as they are (:func:`mmsctl.names.model_location`: ``squeezenet`` is the zoo's even
    with a ``./squeezenet`` folder here). A zoo model is served under the name typed
    (``--models squeezenet`` answers on /predictions/squeezenet, as ``ec2 launch`` does); a word that
    names an entry of *store* is that entry, named as MMS names it: by its manifest."""
    where = model_location(spec)
    location = where.value
    in_store = store is not None and (Path(store) / location).exists()  # a file name in the store, as MMS reads it
    if where.kind == "zoo" and not in_store:  # a typo is told now, with a did-you-mean, not once the server runs
        from mmsctl.zoo.resolve import check_name

        check_name(location)
    if where.kind == "path":
        file_url = location.lower().startswith("file://")
        path = Path(unquote(urlsplit(location).path)) if file_url else Path(location).expanduser()
        if path.exists():
            location = str(path.resolve())
        elif not in_store and (store is None or Path(store).is_dir()):  # told now, not by the server once it
            # runs; a store that is not there is the error validate() tells
            raise InputNotFoundError(f"{location}: no such file or folder", param="models")
    name = where.name or (location if where.kind == "zoo" and not in_store else None)
    return f"{name}={location}" if name else location


def build_config(*, models: list[str], model_store: Optional[Path], config_file: Optional[Path],
                 inference_address: Optional[str], management_address: Optional[str],
                 metrics_address: Optional[str], workers: Optional[int], token_file: Optional[Path],
                 name: Optional[str], port: Optional[int] = None, worker_limit: Optional[int] = None) -> ServerConfig:
    """config.properties (if any), then flags; validated.

    *port* N puts the inference API on 127.0.0.1:N, management on N+1 and metrics on N+2;
    an address given as well wins for its API.
    """
    config = load_properties(config_file) if config_file else ServerConfig()
    if model_store is not None:
        config.model_store = str(model_store.expanduser().resolve())
    if port is not None:
        config.inference_address, config.management_address, config.metrics_address = (
            f"http://127.0.0.1:{port + i}" for i in range(3))
    for key, value in (("inference_address", inference_address), ("management_address", management_address),
                       ("metrics_address", metrics_address)):
        if value:
            setattr(config, key, value)
    if models:
        config.load_models = [_model_spec(m, config.model_store) for m in models]
        config.extra.pop("load_all_models", None)
    else:
        config.load_models = [_model_spec(m, config.model_store) for m in config.load_models]
    if workers is not None:
        config.default_workers_per_model = workers
    if worker_limit is not None:
        config.worker_limit = worker_limit
    if token_file is not None:
        config.token_file = str(token_file.expanduser().resolve())
    if name:
        config.name = name
    config.worker_threads = _worker_threads(config.worker_threads)
    return config.validate()


def _worker_threads(default: int) -> int:
    """``OMP_NUM_THREADS`` where the user set it (each worker gets that many), else *default*."""
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else default


def start_foreground(config: ServerConfig) -> int:
    from mmsctl.server.app import run_server, starting_state

    instance = Instance(config.instance_name)
    with registry_lock():  # the claim: the name and the ports are this process's from here on
        _refuse_held(instance, config)
        _check_ports(config)
        instance.dir.mkdir(parents=True, exist_ok=True)
        instance.config_file.write_text(config.to_json())
        instance.write_state(starting_state(instance, config, os.getpid(), foreground=True))
    return run_server(config, instance, foreground=True)


def _ports(config: ServerConfig) -> list[tuple[str, int]]:
    return [parse_address(getattr(config, key), key=key)
            for key in ("inference_address", "management_address", "metrics_address")]


def _refuse_held(instance: Instance, config: ServerConfig) -> None:
    """Refuse a name or a port that a live server of this registry holds, naming that server."""
    found = holder(instance.name, _ports(config))
    if found is None:
        return
    state, held = found
    several = len(running_instances()) > 1
    doing = {"starting": "starting", "stopping": "stopping"}.get(state.status, "running")
    if held == "the name":
        message = f"server {state.name} is already {doing} (pid {state.pid}; context local:{state.name})"
    else:
        on = state.ports()[0][1] if state.ports() else "?"
        message = f"{held} is taken by the mmsctl server local:{state.name} on {on} (pid {state.pid}, {doing})"
    raise InstanceRunningError(message, holder=state.name, held=held, several=several)


def _check_ports(config: ServerConfig) -> None:
    """Fail fast when a port is taken by a process that is not one of this registry's servers."""
    import socket

    for key in ("inference_address", "management_address", "metrics_address"):
        host, port = parse_address(getattr(config, key), key=key)
        try:  # the address's own family: an IPv6 address binds an IPv6 socket
            family, _, _, _, where = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                                        flags=socket.AI_PASSIVE)[0]
            with socket.socket(family) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(where)
        except OSError as exc:
            raise _bind_error(exc, host, port, key) from None


def _bind_error(exc: OSError, host: str, port: int, key: str) -> MmsError:
    """Why *key*'s address cannot be listened on: a port another program holds, or an address that is not this
    machine's (a host name that does not resolve, an IP of another machine: a bad flag value, exit 2)."""
    import errno
    import socket

    message = f"cannot listen on {host}:{port} ({key.split('_')[0]} API): {exc.strerror or exc}"
    if exc.errno == errno.EADDRINUSE:
        return AddressInUseError(message, hint="another program listens there; choose another port", param=key)
    if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
        return UsageError(message, hint="give a URL of an address of this machine, like http://127.0.0.1:8080",
                          param=key)
    if exc.errno == errno.EACCES:
        return ServerError(message, hint="ports below 1024 need privileges; choose a port above 1023", param=key)
    return ServerError(message, param=key)


def start_background(config: ServerConfig, *, timeout: float = 300.0,
                     on_wait: Optional[Callable[[], None]] = None) -> InstanceState:
    """Claim the name and the ports, spawn the server and wait until it is ready; raise ServerError with its reason
    if not, InstanceRunningError (at once) when another server holds the name or a port."""
    from mmsctl.server.app import starting_state

    instance = Instance(config.instance_name)
    ready_r, ready_w = os.pipe()  # the server writes to it once it is ready (or failed): no waiting out a poll
    try:
        with registry_lock():  # one claim at a time: check, spawn, write the claim
            _refuse_held(instance, config)
            _check_ports(config)
            instance.dir.mkdir(parents=True, exist_ok=True)
            instance.config_file.write_text(config.to_json())
            proc = _spawn(instance, ready_w)
            try:
                instance.write_state(starting_state(instance, config, proc.pid))
            except BaseException:
                _kill_group(proc.pid)
                raise
    except BaseException:
        os.close(ready_r)
        raise
    finally:
        os.close(ready_w)
    if on_wait:
        on_wait()
    try:
        return _wait_ready(instance, proc, ready_r, timeout)
    finally:
        os.close(ready_r)


def _spawn(instance: Instance, ready_w: int) -> subprocess.Popen[bytes]:
    """``python -m mmsctl.server`` in its own session, its output appended to the instance's log."""
    with open(instance.log_file, "ab") as log:
        log.write(f"--- mmsctl serve start {time.strftime('%Y-%m-%d %H:%M:%S')} ---\n".encode())
        log.flush()
        return subprocess.Popen(
            [sys.executable, "-m", "mmsctl.server", str(instance.config_file), str(ready_w)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True, pass_fds=(ready_w,),
        )


def _wait_ready(instance: Instance, proc: subprocess.Popen[bytes], ready: int, timeout: float) -> InstanceState:
    """Wait for the server started as *proc* to say ready; woken by the *ready* pipe, else every 50 ms."""
    import select

    deadline = time.monotonic() + timeout
    watch = [ready]
    try:
        while True:
            state = instance.read_state()
            if state is not None and state.pid == proc.pid:
                if state.status == "ready":
                    return state
                if state.status == "failed":
                    proc.wait(30)
                    raise ServerError(f"server failed to start: {state.error}",
                                      hint=f"see the log: {instance.log_file}")
                if state.status in ("stopping", "stopped"):
                    proc.wait(30)
                    raise _stopped_while_starting(instance, "`mmsctl serve stop`")
            code = proc.poll()
            if code is not None:
                if code in (-signal.SIGTERM, -signal.SIGINT, -signal.SIGKILL):
                    raise _stopped_while_starting(instance, f"signal {signal.Signals(-code).name}")
                raise ServerError(f"server exited during start-up (exit code {code})",
                                  hint=f"see the log: {instance.log_file}")
            if time.monotonic() > deadline:
                _kill_group(proc.pid)
                raise ServerError(f"server not ready after {timeout:g} s; stopped it",
                                  hint=f"see the log: {instance.log_file}")
            if watch and select.select(watch, [], [], 0.05)[0] and not os.read(ready, 64):
                watch = []  # the server closed its end: from now on poll
            elif not watch:
                time.sleep(0.05)
    except KeyboardInterrupt:
        _kill_group(proc.pid)
        raise


def _stopped_while_starting(instance: Instance, by: str) -> ServerError:
    return ServerError(f"server {instance.name} was stopped during its start-up ({by})",
                       hint=f"start it again; its log: {instance.log_file}")


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _select(name: Optional[str], *, running_only: bool) -> list[Instance]:
    if name:
        instance = Instance(name)
        if instance.read_state() is None:
            raise NotFoundError(f"no mmsctl server instance named {name!r}",
                                hint="list them with `mmsctl serve status`")
        return [instance]
    found = [i for i in list_instances() if not running_only or i.running_state() is not None]
    return found


def _reap(instance: Instance, state: InstanceState) -> None:
    """Record that a server died without stopping (killed, crashed): ``died``, with why, and no stale files.

    Its workers exit by themselves once their server is gone (they watch it).
    """
    reason = (f"the server process (pid {state.pid}) is gone: it was killed or crashed without stopping; "
              f"see {instance.log_file}")
    try:
        instance.update(status="died", error=reason, models=[])
        (instance.dir / "stop-timeout").unlink(missing_ok=True)
    except OSError:
        pass


def stop_instances(name: Optional[str], *, all_: bool, timeout: float) -> Iterator[tuple[str, str]]:
    """Stop one (or every) running instance; yield (name, outcome).

    The outcome is ``stopped``, ``killed`` (still running after the timeout), ``died`` (the server was
    already gone: it is marked so and cleaned up) or ``not running`` (*name*'s server is not running: nothing
    to do). Only a process that is really the server (:func:`~mmsctl.local_servers.server_alive`: pid and start
    time) is ever signalled. Without *name* or *all_* it is the one running instance ("the local server");
    several running is an AmbiguousInstanceError naming them. None running yields nothing: not an error.

    The servers are picked and signalled under the registry's lock, so a ``serve start`` at the same moment
    is either stopped (it had claimed its name) or starts after this (it had not).

    Raises:
        NotFoundError: *name* is no instance here (with a did-you-mean).
    """
    with registry_lock():
        done, targets = _signal_stops(name, all_=all_, timeout=timeout)
    yield from done
    for instance, state in targets:
        yield instance.name, _await_stop(instance, state, timeout)


def _signal_stops(name: Optional[str], *, all_: bool,
                  timeout: float) -> tuple[list[tuple[str, str]], list[tuple[Instance, InstanceState]]]:
    """The instances found dead (reaped) or not running, and those sent SIGTERM with the state signalled."""
    done: list[tuple[str, str]] = []
    only: Optional[str]
    if name:
        instance = Instance(name)
        if instance.read_state() is None:
            raise NotFoundError(f"no mmsctl server instance named {name!r}{_did_you_mean(name)}",
                                hint="list them with `mmsctl serve status`")
        candidates, only = [instance], name
    else:  # every instance is looked at (the dead are reaped); without --all only "the local server" is stopped,
        local = None if all_ else one_running()  # as the ``local`` context means it: several is ambiguous
        candidates, only = list_instances(), None if local is None else local.name
    targets = []
    for instance in candidates:
        died = instance.died_state()
        if died is not None:
            _reap(instance, died)
            done.append((instance.name, "died"))
            continue
        state = instance.running_state()
        if state is None or (only is not None and instance.name != only):
            continue
        (instance.dir / "stop-timeout").write_text(str(timeout))
        try:
            os.kill(state.pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        targets.append((instance, state))
    if name and not done and not targets:
        done.append((name, "not running"))
    return done, targets


def _did_you_mean(name: str) -> str:
    import difflib

    close = difflib.get_close_matches(name, [i.name for i in list_instances()], n=2)
    return "; did you mean " + " or ".join(repr(c) for c in close) + "?" if close else ""


def _await_stop(instance: Instance, state: InstanceState, timeout: float) -> str:
    """Wait for a signalled server to drain and exit (killing its group past the timeout); the outcome."""
    forced = False
    deadline = time.monotonic() + timeout + 5.0
    while server_alive(state):
        if time.monotonic() > deadline:
            _kill_group(state.pid)
            forced = True
            break
        time.sleep(0.05)
    if forced or (instance.read_state() or state).status != "stopped":
        instance.update(status="stopped")
    return "killed" if forced else "stopped"


def _uptime(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def status_rows(name: Optional[str]) -> list[dict[str, Any]]:
    rows = []
    for instance in _select(name, running_only=False):
        died = instance.died_state()
        if died is not None:
            _reap(instance, died)
        state = instance.read_state()
        if state is None:
            continue
        alive = state.status in LIVE_STATUSES and server_alive(state)
        status = state.status
        rows.append({
            "name": state.name, "status": status, "pid": state.pid if alive else None,
            "inference_url": state.inference_url, "management_url": state.management_url,
            "metrics_url": state.metrics_url, "models": state.models if alive else [],
            "uptime": _uptime(time.time() - state.started_at) if alive else None,
            "started_at": state.started_at, "log_file": state.log_file, "error": state.error,
        })
    return rows


def prune_instances() -> list[str]:
    """Remove the folders (state, config, log) of instances that are not running; their names."""
    import shutil

    removed = []
    with registry_lock():  # never the folder of a start that is claiming it
        for instance in list_instances():
            if instance.running_state() is None:
                shutil.rmtree(instance.dir, ignore_errors=True)
                removed.append(instance.name)
    return removed


def print_logs(name: Optional[str], *, follow: bool, tail: int, out: IO[str]) -> None:
    """Print an instance's log: *name*'s, else the running one's, else the only one's."""
    candidates = _select(name, running_only=False)
    if not candidates:
        raise NotFoundError("no mmsctl server instance")
    if len(candidates) > 1:
        state = one_running()
        if state is None:
            names = ", ".join(i.name for i in candidates)
            raise AmbiguousInstanceError(f"{len(candidates)} mmsctl server instances here, none running: {names}",
                                         names=[i.name for i in candidates], param="name")
        candidates = [Instance(state.name)]
    instance = candidates[0]
    _refuse_foreground(instance)
    try:
        fh = open(instance.log_file, "r", errors="replace")
    except FileNotFoundError:
        raise NotFoundError(f"no log yet for server {instance.name}") from None
    try:
        lines = fh.readlines()
        if tail >= 0:
            lines = lines[-tail:] if tail else []
        out.writelines(lines)
        out.flush()
        if not follow:
            return
        while True:  # bounded: follows until Ctrl+C, as tail -f does
            line = fh.readline()
            if line:
                out.write(line)
                out.flush()
                continue
            if _rotated(instance.log_file, fh):  # the server started a new server.log: go on there
                fh.close()
                fh = open(instance.log_file, "r", errors="replace")
                continue
            if instance.running_state() is None:
                return
            time.sleep(0.2)
    finally:
        fh.close()


def _refuse_foreground(instance: Instance) -> None:
    """A ``--foreground`` server writes its log to its terminal: say so instead of printing an older run's file."""
    state = instance.read_state()
    if state is None or not state.foreground:
        return
    runs = "runs" if instance.running_state() is not None else "ran"
    raise NotFoundError(f"server {instance.name} {runs} in the foreground (pid {state.pid}): its log goes to the "
                        "terminal it was started in, not to a file",
                        hint=f"start it without --foreground to keep its log in {instance.log_file}")


def _rotated(path: Path, fh: IO[str]) -> bool:
    try:
        return os.stat(path).st_ino != os.fstat(fh.fileno()).st_ino
    except OSError:
        return False
