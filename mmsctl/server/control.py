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
from typing import IO, Any, Callable, Iterator, Optional

from mmsctl.errors import AmbiguousInstanceError, InstanceRunningError, NotFoundError, ServerError
from mmsctl.server.config import ServerConfig, load_properties, parse_address
from mmsctl.instances import LIVE_STATUSES, Instance, InstanceState, list_instances, one_running, server_alive
from mmsctl.names import model_location

__all__ = ["build_config", "print_logs", "prune_instances", "start_background", "start_foreground", "status_rows",
           "stop_instances"]


def _model_spec(spec: str, model_store: Optional[str] = None) -> str:
    """Make a local path in ``name=location`` absolute (the server runs elsewhere); zoo names and
    URLs stay as they are (:func:`mmsctl.names.model_location`: ``squeezenet`` is the zoo's even
    with a ``./squeezenet`` folder here). A zoo model is served under the name typed
    (``--models squeezenet`` answers on /predictions/squeezenet, as ``ec2 launch`` does); a word that
    names an entry of *model_store* is that entry, named as MMS names it: by its manifest."""
    where = model_location(spec)
    location = where.value
    if where.kind == "path":
        path = Path(location).expanduser()
        if path.exists():
            location = str(path.resolve())
    in_store = model_store is not None and (Path(model_store) / location).exists()
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
    from mmsctl.server.app import run_server

    instance = Instance(config.instance_name)
    _refuse_running(instance)
    instance.dir.mkdir(parents=True, exist_ok=True)
    instance.config_file.write_text(config.to_json())
    return run_server(config, instance)


def _refuse_running(instance: Instance) -> None:
    state = instance.running_state()
    if state is not None:
        raise InstanceRunningError(f"server {instance.name} is already running (pid {state.pid})",
                                   hint="stop it first, or start another instance on other ports")


def _check_ports(config: ServerConfig) -> None:
    """Fail fast, with the flag to change, when a port is taken."""
    import socket

    for key in ("inference_address", "management_address", "metrics_address"):
        host, port = parse_address(getattr(config, key), key=key)
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError as exc:
                raise ServerError(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                                  hint="another server may be running there; choose another port", param=key) from None


def start_background(config: ServerConfig, *, timeout: float = 300.0,
                     on_wait: Optional[Callable[[], None]] = None) -> InstanceState:
    """Spawn the server and wait until it is ready; raise ServerError with its reason if not."""
    instance = Instance(config.instance_name)
    _refuse_running(instance)
    _check_ports(config)
    instance.dir.mkdir(parents=True, exist_ok=True)
    instance.config_file.write_text(config.to_json())
    try:
        instance.state_file.unlink()
    except FileNotFoundError:
        pass
    ready_r, ready_w = os.pipe()  # the server writes to it once it is ready (or failed): no waiting out a poll
    try:
        with open(instance.log_file, "ab") as log:
            log.write(f"--- mmsctl serve start {time.strftime('%Y-%m-%d %H:%M:%S')} ---\n".encode())
            log.flush()
            proc = subprocess.Popen(
                [sys.executable, "-m", "mmsctl.server", str(instance.config_file), str(ready_w)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, close_fds=True, pass_fds=(ready_w,),
            )
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
            code = proc.poll()
            if code is not None:
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

    The outcome is ``stopped``, ``killed`` (still running after the timeout) or ``died`` (the
    server was already gone: it is marked so and cleaned up). Only a process that is really the
    server (:func:`~mmsctl.instances.server_alive`: pid and start time) is ever signalled.
    Without *name* or *all_* it is the one running instance ("the local server"); several running
    is an AmbiguousInstanceError naming them. *all_* with none running stops nothing and is not an error.
    """
    if name:
        instance = Instance(name)
        if instance.read_state() is None:
            raise NotFoundError(f"no mmsctl server instance named {name!r}",
                                hint="list them with `mmsctl serve status`")
        died = instance.died_state()
        if died is not None:
            _reap(instance, died)
            yield instance.name, "died"
            return
        candidates = [instance] if instance.running_state() is not None else []
    else:
        reaped = 0
        for instance in list_instances():
            died = instance.died_state()
            if died is not None:
                _reap(instance, died)
                reaped += 1
                yield instance.name, "died"
        if all_:
            candidates = _select(None, running_only=True)
        else:  # "the local server", as the ``local`` context means it; several is ambiguous
            state = one_running()
            candidates = [Instance(state.name)] if state is not None else []
        if reaped and not candidates:
            return
    if not candidates:
        if name:
            raise NotFoundError(f"server {name} is not running")
        if all_:
            return
        raise NotFoundError("no mmsctl server is running")
    for instance in candidates:
        state = instance.running_state()
        if state is None:
            if name:
                raise NotFoundError(f"server {instance.name} is not running")
            continue
        (instance.dir / "stop-timeout").write_text(str(timeout))
        try:
            os.kill(state.pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
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
        yield instance.name, "killed" if forced else "stopped"


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


def _rotated(path: Path, fh: IO[str]) -> bool:
    try:
        return os.stat(path).st_ino != os.fstat(fh.fileno()).st_ino
    except OSError:
        return False
