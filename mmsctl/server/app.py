"""The server process's lifecycle: startup → main loop → drain → shutdown.

Signal handlers only set flags (a second SIGINT/SIGTERM forces exit). Startup
binds the three ports, then loads the start-up models; ``state.json`` says
``ready`` only after every start-up model has READY workers, which is what
``mmsctl serve start`` waits for. Shutdown stops taking predictions, answers
what is queued or in flight (bounded by the stop timeout), stops the workers.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Optional

from mmsctl.errors import MmsError, ServerError
from mmsctl.server.config import ServerConfig, parse_address
from mmsctl.local_servers import Instance, InstanceState, holder, process_start_time, registry_lock
from mmsctl.names import split_named

__all__ = ["Server", "STARTUP_FAILURE", "main", "run_server", "starting_state"]

log = logging.getLogger("mmsctl.server")

STARTUP_FAILURE = 3
#: Seconds the handlers of requests just answered get to send their responses, once the workers are drained.
_SEND_GRACE_S = 1.0


class Server:
    """One mmsctl model server in this process."""

    def __init__(self, config: ServerConfig, instance: Instance) -> None:
        self.config = config
        self.instance = instance
        self.should_exit = False
        self.force_exit = False
        self._wake: Optional[asyncio.Event] = None
        self._runners: list[Any] = []
        self._servers: list[asyncio.AbstractServer] = []
        self._lean: Any = None
        self._state_error: Optional[str] = None
        #: Written to (then closed) once the start is decided, ready or failed: ``serve start`` waits on it.
        self.ready_fd: Optional[int] = None
        #: Run by ``serve start --foreground``: the log goes to the terminal (``state.json`` says so).
        self.foreground = False

    # -- state.json -----------------------------------------------------------------------------
    def _write_state(self, **changes: Any) -> Optional[str]:
        """Update ``state.json``; a folder that cannot be written is logged (once) and returned, never raised.

        Returns:
            None, or what went wrong (the caller of a register gets it).
        """
        try:
            self.instance.update(**changes)
        except OSError as exc:
            self._announce(changes)
            error = f"cannot write {self.instance.state_file}: {exc.strerror or exc}"
            if error != self._state_error:
                log.error("%s", error)
            self._state_error = error
            return error
        self._state_error = None
        self._announce(changes)
        return None

    def _announce(self, changes: dict[str, Any]) -> None:
        """Wake ``serve start`` at once when the start is decided (it re-reads ``state.json``) instead of at its next poll."""
        fd = self.ready_fd
        if fd is None or changes.get("status") not in ("ready", "failed", "stopped"):
            return
        self.ready_fd = None
        try:
            os.write(fd, b"\n")
        except OSError:  # serve start has gone (Ctrl+C): nobody to tell
            pass
        finally:
            os.close(fd)

    def record_models(self) -> Optional[str]:
        """Publish the registered models in ``state.json`` (what ``serve status`` and contexts read)."""
        return self._write_state(models=sorted(self.manager.models))

    # -- signals -----------------------------------------------------------------------------
    def _on_signal(self) -> None:
        if self.should_exit:
            self.force_exit = True
        self.should_exit = True
        if self._wake is not None:
            self._wake.set()

    def _claim(self) -> bool:
        """Write this server's ``starting`` state under the registry's lock, unless another live server holds the
        name (a ``python -m mmsctl.server`` started by hand; ``serve start`` claimed it for this process already)."""
        root = self.instance.dir.parent
        with registry_lock(root):
            found = holder(self.instance.name, [], pid=os.getpid(), root=root)
            if found is not None:
                log.error("server %s is already running (pid %s); this one does not start", found[0].name, found[0].pid)
                return False
            self.instance.write_state(  # unwritable at start: the start fails, with the reason
                starting_state(self.instance, self.config, os.getpid(), foreground=self.foreground))
        return True

    # -- phases ------------------------------------------------------------------------------
    async def startup(self) -> None:
        from mmsctl.server.metrics import ServerMetrics
        from mmsctl.server.workers.manager import ModelManager

        self.metrics = ServerMetrics(lambda: self.manager.models)
        self.manager = ModelManager(self.config, self.metrics)
        loading = await self._start_startup_models()  # their workers import mxnet while the APIs are set up
        from aiohttp import web

        from mmsctl.server.http.connections import MmsAppRunner
        from mmsctl.server.http.frontend import Frontend

        self.frontend = Frontend(self.config, self.manager, self.metrics, record_models=self.record_models)
        apps = [
            ("inference", self.config.inference_address, self.frontend.inference_app()),
            ("management", self.config.management_address, self.frontend.management_app()),
            ("metrics", self.config.metrics_address, self.frontend.metrics_app()),
        ]
        for api, address, app in apps:
            if not address:  # not served (SageMaker mode: no management API to reach)
                continue
            host, port = parse_address(address, key=f"{api}_address")
            runner = MmsAppRunner(app, header_timeout=self.config.request_header_timeout,
                                  body_timeout=self.config.request_body_timeout, access_log=None,
                                  handle_signals=False, shutdown_timeout=1.0)
            await runner.setup()
            self._runners.append(runner)
            try:
                if api == "inference":  # the lean path first (http/lean/), aiohttp's for the rest
                    assert runner.server is not None  # set up above
                    self._lean = self.frontend.lean_inference(fallback=runner.server)
                    self._servers.append(await asyncio.get_running_loop().create_server(
                        self._lean, host, port, reuse_address=True, backlog=1024))
                else:
                    await web.TCPSite(runner, host, port, reuse_address=True, backlog=1024).start()
            except OSError as exc:
                reason = "address already in use" if exc.errno == errno.EADDRINUSE else exc.strerror or str(exc)
                raise ServerError(f"cannot listen on {host}:{port} ({api} API): {reason}",
                                  hint="choose another port", param=f"{api}_address") from None
            log.info("%s API bound to http://%s:%s", api.capitalize(), host, port)
        await self._await_startup_models(loading)

    def _startup_specs(self) -> list[tuple[str, bool]]:
        """Each start-up model's ``[name=]location``, and whether it was named (``load_models``, ``--models``)
        rather than found in the model store by ``load_models=ALL``."""
        specs = [(spec, True) for spec in self.config.load_models]
        if self.config.extra.get("load_all_models") == "true" and self.config.model_store:
            store = Path(self.config.model_store)
            specs += [(name, False) for name in
                      sorted(p.name for p in store.iterdir() if p.suffix in (".mar", ".model") or p.is_dir())]
        return specs

    async def _start_startup_models(self) -> list[tuple[str, Any]]:
        """Register the start-up models and start their workers, without waiting for them to be READY.

        A named one whose name is invalid or taken fails the start; one ``load_models=ALL`` found is skipped with
        a warning instead, as MMS's ``initModelStore`` does, so the rest of the store is served."""
        from mmsctl.server.errors import ApiException

        models: list[tuple[str, Any]] = []
        sources: dict[str, str] = {}  # each start-up model's name: the location it came from
        for spec, named in self._startup_specs():
            name, location = split_named(spec)
            try:
                model = await self._startup_model(name, location, sources)
            except ApiException as exc:
                if named:
                    raise ServerError(f"start-up model {name or location!r}: {exc.detail}") from None
                log.warning("Failed to load model %s from the model store (skipped): %s", location, exc.detail)
                continue
            sources[model.name] = location
            models.append((name or location, model))
        for _, model in models:
            await self.manager.launched(model)
        return models

    async def _startup_model(self, name: Optional[str], location: str, sources: dict[str, str]) -> Any:
        """Register one start-up model and start its workers; BadRequest (its name) or ConflictError (*sources*
        has its name) before anything starts, or the error of its archive."""
        from mmsctl.server.errors import ConflictError
        from mmsctl.server.store import resolve_archive
        from mmsctl.server.workers.model import Model
        from mmsctl.server.workers.registry import valid_model_name

        archive = await asyncio.get_running_loop().run_in_executor(
            None, functools.partial(resolve_archive, location, self.config, trusted=True))
        model_name = valid_model_name(name or archive.model_name or Path(location.rstrip("/")).name.split(".")[0])
        if model_name in sources:
            raise ConflictError(f"Model {model_name} is already registered (from {sources[model_name]}).")
        model = Model.from_archive(model_name, location, archive, default_handler=self.config.default_service_handler,
                                   response_timeout=self.config.default_response_timeout,
                                   queue_size=self.config.job_queue_size)
        self.manager.startup_models.add(model_name)
        try:
            await self.manager.register(model, self.config.startup_workers, synchronous=False,
                                        timeout=self.config.worker_start_timeout)
        except BaseException:
            self.manager.startup_models.discard(model_name)
            raise
        return model

    async def _await_startup_models(self, models: list[tuple[str, Any]]) -> None:
        """Wait until every start-up model has READY workers (a model whose workers cannot start fails the start)."""
        from mmsctl.server.errors import ApiException

        for label, model in models:
            try:
                await self.manager.await_workers(model, self.config.startup_workers,
                                                 self.config.worker_start_timeout)
            except ApiException as exc:
                self.manager.startup_models.discard(model.name)
                raise ServerError(f"start-up model {label!r}: {exc.detail}") from None
            log.info("start-up model %s ready", model.name)

    async def main_loop(self) -> None:
        self._wake = asyncio.Event()
        last_metrics = time.monotonic()
        metric_log = logging.getLogger("mmsctl.metrics")
        while not self.should_exit:
            try:
                await asyncio.wait_for(self._wake.wait(), 1.0)
            except asyncio.TimeoutError:
                pass
            self.manager.autoscale()
            if time.monotonic() - last_metrics >= self.config.metric_time_interval:
                last_metrics = time.monotonic()
                for line in self.metrics.log_lines():
                    metric_log.info(line)
            if self.instance.dir.exists():
                state = self.instance.read_state()
                if state is not None and state.models != sorted(self.manager.models) and state.status == "ready":
                    self.record_models()

    def _drain_timeout(self) -> float:
        """``serve stop --timeout`` (written beside state.json), within [0, a day]; else ``drain_timeout``."""
        default = self.config.drain_timeout
        try:
            seconds = float((self.instance.dir / "stop-timeout").read_text(encoding="utf-8")[:32].strip())
        except (OSError, ValueError, UnicodeDecodeError):
            return default
        return seconds if 0 <= seconds <= 86400 else default

    async def shutdown(self) -> None:
        """Drain to one deadline, the drain timeout from now: the gate takes no new requests; those it admitted
        (a body still arriving or being decoded included) are queued and answered until then, what still runs is
        answered 503 and its worker killed; the process is gone shortly after (docs/server.md says how long),
        inside SageMaker's SIGKILL and ``serve stop``'s kill."""
        timeout = self._drain_timeout()
        deadline = time.monotonic() + timeout
        log.info("shutting down: draining for up to %g s", timeout)
        frontend = getattr(self, "frontend", None)
        manager = getattr(self, "manager", None)
        if manager is not None:
            manager.flush()  # a batch being gathered goes now, not max_batch_delay later
        if frontend is not None:
            frontend.traffic.drain()
            # Until every admitted request is answered, the models serve on: one not queued yet still can be.
            await self._until(frontend.traffic.quiet(), deadline)
        if manager is not None:
            drain = asyncio.ensure_future(manager.shutdown(deadline))
            await self._until(drain, None)  # bounded: manager.shutdown ends within a second or two of the deadline
            if self.force_exit:
                for model in list(manager.models.values()):
                    for w in model.workers:
                        w.kill()
        sent_by = time.monotonic() + _SEND_GRACE_S
        if frontend is not None:  # the handlers whose futures were just answered make their responses
            await self._until(frontend.traffic.quiet(), sent_by)
        for server in self._servers:
            server.close()
        if self._lean is not None:  # and the lean path's connections send what they have written
            self._lean.close()
            await self._until(self._lean.closed(), sent_by)
        for runner in self._runners:
            await runner.cleanup()

    async def _until(self, awaitable: Any, until: Optional[float]) -> None:
        """Await *awaitable* until it is done, *until* (``time.monotonic()``; None: no bound) passes, or a second
        SIGTERM/SIGINT forces the exit; then cancel it if it still runs."""
        task = asyncio.ensure_future(awaitable)
        try:
            while not task.done() and not self.force_exit:
                left = 0.2 if until is None else min(until - time.monotonic(), 0.2)
                if left <= 0:
                    break
                await asyncio.wait({task}, timeout=left)  # (the tick only looks at force_exit)
        finally:
            task.cancel()

    async def serve(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal)
        if not self._claim():
            return STARTUP_FAILURE
        try:
            startup = asyncio.ensure_future(self.startup())
            while not startup.done():  # bounded: every start-up model load has its own timeout
                await asyncio.wait({startup}, timeout=0.2)
                if self.should_exit:
                    startup.cancel()
                    raise ServerError("stopped during start-up (SIGTERM or Ctrl+C)")
            startup.result()
        except (MmsError, asyncio.CancelledError) as exc:
            message = getattr(exc, "message", None) or "start-up cancelled"
            log.error("start-up failed: %s", message)
            self._write_state(status="stopped" if self.should_exit else "failed", error=message)
            await self.shutdown()
            return STARTUP_FAILURE
        except Exception as exc:  # noqa: BLE001 - reported in state.json, not as a traceback
            log.exception("start-up failed")
            self._write_state(status="failed", error=f"{type(exc).__name__}: {exc}")
            await self.shutdown()
            return STARTUP_FAILURE
        self._write_state(status="ready", models=sorted(self.manager.models))
        log.info("mmsctl server ready (pid %s)", os.getpid())
        await self.main_loop()
        self._write_state(status="stopping")
        await self.shutdown()
        self._write_state(status="stopped")
        log.info("mmsctl server stopped")
        return 0


def starting_state(instance: Instance, config: ServerConfig, pid: int, *, foreground: bool = False) -> InstanceState:
    """The ``starting`` state of server process *pid*: the claim on its name and ports."""
    return InstanceState(
        name=instance.name, pid=pid, status="starting", inference_url=_url(config.inference_address),
        management_url=_url(config.management_address), metrics_url=_url(config.metrics_address),
        log_file=str(instance.log_file), token_file=config.token_file, process_start=process_start_time(pid),
        model_store=config.model_store, started_at=time.time(), foreground=foreground,
    )


def _url(address: str) -> str:
    if not address:  # an API that is not served
        return ""
    host, port = parse_address(address)
    return f"http://{host}:{port}"


def _setup_logging() -> None:
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s [%(levelname)s] %(name)s - %(message)s",
    )
    logging.getLogger("mmsctl.access").setLevel(
        logging.INFO if os.environ.get("MMSCTL_ACCESS_LOG") == "1" else logging.WARNING)
    logging.getLogger("aiohttp").setLevel(logging.WARNING)


def run_server(config: ServerConfig, instance: Optional[Instance] = None, ready_fd: Optional[int] = None, *,
               foreground: bool = False) -> int:
    """Run a server in this process until SIGTERM/SIGINT; return the exit code.

    *ready_fd* (a pipe's end) is written to and closed once the start is decided (see ``Server.ready_fd``);
    *foreground*: the log goes to this terminal, not to the instance's ``server.log``.
    """
    instance = instance or Instance(config.instance_name)
    instance.dir.mkdir(parents=True, exist_ok=True)
    try:
        (instance.dir / "stop-timeout").unlink()
    except FileNotFoundError:
        pass
    _setup_logging()
    try:
        import uvloop  # optional: a faster event loop where installed

        uvloop.install()
    except ImportError:
        pass
    server = Server(config, instance)
    server.ready_fd = ready_fd
    server.foreground = foreground
    return asyncio.run(server.serve())


def main(argv: list[str]) -> int:
    """``python -m mmsctl.server CONFIG_JSON [READY_FD]``: run the server a ``serve start`` prepared.

    Its output (and its workers') goes into the instance's ``server.log``, rotated by size; READY_FD is
    the pipe ``serve start`` waits on (see ``Server.ready_fd``).
    """
    from mmsctl.server.logfile import RotatingOutput

    if len(argv) not in (1, 2) or not (len(argv) == 1 or argv[1].isdigit()):
        print("usage: python -m mmsctl.server CONFIG_JSON [READY_FD]", file=sys.stderr)
        return 2
    ready_fd = int(argv[1]) if len(argv) == 2 else None
    if ready_fd is not None:
        os.set_inheritable(ready_fd, False)  # not the workers': only this process says when it is ready
    config = ServerConfig.from_json(Path(argv[0]).read_text())
    instance = Instance(config.instance_name)
    instance.dir.mkdir(parents=True, exist_ok=True)
    output = RotatingOutput(instance.log_file, config.log_max_size, config.log_backups)
    output.start()
    try:
        return run_server(config, instance, ready_fd)
    finally:
        output.close()
