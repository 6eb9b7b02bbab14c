"""What ``mmsctl sagemaker run-local`` runs: the model as SageMaker would see it, and the image's ``serve``
entry as its own process with SageMaker's environment, on this machine and without docker.

The model goes the way ``sagemaker deploy`` sends it: packed into ``model.tar.gz``
(:mod:`mmsctl.cloud.sagemaker.model_data`), then extracted into an ``/opt/ml/model``-shaped folder as
SageMaker extracts it. The entry runs as ``docker run IMAGE serve`` would run it: ``python -m mmsctl.sagemaker
serve``, or with ``--build DIR`` the build context's own ``entrypoint.sh serve`` over the code in ``DIR/task``
and the Dockerfile's environment (the baked model when no MODEL is given). Its port is 8080 (``--port``:
``SAGEMAKER_BIND_TO_PORT``), on loopback. Stopping it is SageMaker's: SIGTERM (Ctrl+C), then SIGKILL 30 s
later (a second Ctrl+C: at once).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from mmsctl.cloud.lambda_.manifest import BuildContext
from mmsctl.cloud.sagemaker import contract
from mmsctl.cloud.sagemaker.model_data import pack, unpack
from mmsctl.errors import ServerError, UsageError

__all__ = ["KILL_AFTER_S", "LocalPlan", "plan", "run"]

#: SageMaker's wait between SIGTERM and SIGKILL.
KILL_AFTER_S = 30.0
_POLL_S = 0.1


@dataclass
class LocalPlan:
    """The container this run stands for: its command, environment and model folder."""

    model: str
    command: list[str]
    environ: dict[str, str]
    model_dir: Path
    port: int
    #: A folder of this run's own (the packed model, the server's state), removed at the end.
    work: Path
    notes: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _container_env(port: int, model_dir: Path, work: Path, workers: Optional[int],
                   timeout: Optional[int]) -> dict[str, str]:
    """SageMaker's environment for the entry (and the server's state kept out of the user's own)."""
    environ = {contract.ENV_PORT: str(port), contract.ENV_HOST: "127.0.0.1",
               contract.ENV_MODEL_DIR: str(model_dir), "MMSCTL_STATE_DIR": str(work / "state")}
    if workers is not None:
        environ[contract.ENV_WORKERS] = str(workers)
    if timeout is not None:
        environ[contract.ENV_TIMEOUT] = str(timeout)
    return environ


def plan(model: Optional[str], *, port: int = contract.PORT, build: Optional[Path] = None,
         workers: Optional[int] = None, timeout: Optional[int] = None) -> LocalPlan:
    """The run for MODEL (or the model baked into *build*'s image); the model is packed and extracted here.

    Raises:
        UsageError: neither a model nor a build context, or a port out of range.
        ArchiveError, ModelNotFoundError, …: the model cannot be read.
    """
    if not 1 <= port <= 65535:
        raise UsageError(f"port {port} is not a TCP port (1-65535)", param="port")
    if model is None and build is None:
        raise UsageError("name a model, or a build context whose image holds one", params=("model", "build"))
    ctx = BuildContext.read(build) if build is not None else None
    work = Path(tempfile.mkdtemp(prefix="mmsctl-sagemaker-"))
    try:
        if model is not None:
            packed = pack(model, work / "model.tar.gz")
            model_dir = unpack(packed.path, work / "opt" / "ml" / "model")
        else:
            assert ctx is not None and build is not None
            if not ctx.baked:
                raise UsageError(f"{build}'s image loads its model from S3 ({ctx.model_location}): name a MODEL "
                                 "to serve", param="model")
            model_dir = Path(build) / "model"
        environ = {**os.environ, **(ctx.env if ctx is not None else {}),
                   **_container_env(port, model_dir, work, workers, timeout)}
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    if ctx is not None and build is not None:
        environ["LAMBDA_TASK_ROOT"] = str(Path(build).resolve() / "task")
        # entrypoint.sh runs `python3`: the image's is this one (with mmsctl's dependencies)
        environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), environ.get("PATH", "")])
        command = ["/bin/sh", str(Path(build) / "entrypoint.sh"), contract.SERVE]
    else:
        command = [sys.executable, "-m", "mmsctl.sagemaker", contract.SERVE]
    named = model if model is not None else (ctx.model if ctx is not None else "")
    return LocalPlan(named, command, environ, model_dir, port, work)


def _pinged(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/ping", timeout=2) as answer:  # noqa: S310 - our own loopback server
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


class _Stopper:
    """SIGINT/SIGTERM to this process: SIGTERM to the container, SIGKILL 30 s later (or at the second signal)."""

    def __init__(self, proc: "subprocess.Popen[bytes]") -> None:
        self.proc = proc
        self.term_at: Optional[float] = None
        self.killed = False

    def __call__(self, signum: int, frame: object) -> None:
        if self.term_at is None:
            self.term_at = time.monotonic()
            self._send(signal.SIGTERM)
        else:
            self.kill()

    def kill(self) -> None:
        self.killed = True
        self._send(signal.SIGKILL)

    def _send(self, signum: int) -> None:
        try:
            os.killpg(self.proc.pid, signum)
        except ProcessLookupError:
            pass

    def overdue(self) -> bool:
        return self.term_at is not None and not self.killed and time.monotonic() - self.term_at >= KILL_AFTER_S


def run(p: LocalPlan, echo: Callable[[str], None], *, ready_timeout: float = 300.0) -> int:
    """Run the container until it exits (after SIGTERM, or by itself); its exit code.

    Raises:
        ServerError: it exited before ``/ping`` answered 200, or did not within *ready_timeout* seconds.
    """
    proc = subprocess.Popen(p.command, env=p.environ, start_new_session=True)  # its own group, as a container
    stopper = _Stopper(proc)
    previous = {s: signal.signal(s, stopper) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        deadline = time.monotonic() + ready_timeout
        while not _pinged(p.url):
            if proc.poll() is not None:
                if stopper.term_at is not None:  # stopped while it started: as asked
                    return _exit_code(proc.returncode)
                raise ServerError(f"serve exited with code {proc.returncode} before /ping answered 200 "
                                  "(its log is above)")
            if stopper.term_at is None and time.monotonic() > deadline:
                stopper.kill()
                raise ServerError(f"/ping did not answer 200 within {ready_timeout:g} s; the container was killed")
            time.sleep(_POLL_S)
        if stopper.term_at is None:
            echo(f"serving {p.model} as SageMaker would, at {p.url}: POST /invocations, GET /ping "
                 "(Ctrl+C: SIGTERM, then SIGKILL 30 s later)")
            curl_line = f"  curl -H 'Content-Type: image/jpeg' --data-binary @kitten.jpg {p.url}/invocations"
            echo(curl_line)
        while proc.poll() is None:  # bounded: serves until stopped, then SIGKILL 30 s after SIGTERM at most
            if stopper.overdue():
                stopper.kill()
            time.sleep(_POLL_S)
        return _exit_code(proc.returncode)
    finally:
        if proc.poll() is None:
            stopper.kill()
            proc.wait(10)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        shutil.rmtree(p.work, ignore_errors=True)


def _exit_code(returncode: int) -> int:
    """The container's exit status as a shell reports it (killed by signal N: 128 + N)."""
    return 128 - returncode if returncode < 0 else returncode
