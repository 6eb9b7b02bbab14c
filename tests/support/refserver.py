"""What real MMS 1.1.11 and TorchServe 0.12 have in common, for interop tests.

Both are a Python launcher that starts a JVM on ``config.properties`` ports, both
take a handler archived by their own archiver, and both answer the same REST calls
(register, scale, describe, predict). So the echo handler, the start/poll/stop
cycle and the plain-urllib REST helpers live here once; ``tests.support.mms`` and
``tests.support.torchserve`` add what differs (binaries, config keys, auth) and
re-export the helpers under their old names.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
import urllib.parse
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterator, Optional, TypeVar

from tests.support._proc import (
    HttpReply,
    free_ports,
    http_request,
    remove_tree,
    short_tmp_dir,
    stop_process_group,
    tail,
)
from tests.support.waiting import wait_until

__all__ = [
    "ECHO_HANDLER_SOURCE",
    "Launcher",
    "RefServerInstance",
    "archive_handler",
    "describe",
    "java",
    "predict",
    "register_model",
    "scale_model",
    "serving",
    "unregister_model",
    "wait_for_prediction",
    "wait_for_workers",
]

# A handler that loads nothing (no mxnet or torch import, so a worker is ready in about a
# second) and echoes each request body back. Used to test the protocol, not the engine.
ECHO_HANDLER_SOURCE = textwrap.dedent(
    '''
    """Echo handler for interop tests: answers each request with its own body."""
    import json


    def handle(data, context):
        if not data:  # the servers call the handler once with no data when a worker starts
            return None
        out = []
        for item in data:
            body = item.get("body")
            if body is None:
                body = item.get("data")
            if body is None:
                body = b""
            if isinstance(body, (dict, list)):  # a JSON body arrives already parsed
                body = json.dumps(body)
            if isinstance(body, str):
                body = body.encode("utf-8")
            out.append(bytes(body))
        return out
    '''
).lstrip()


def java() -> Optional[str]:
    """The ``java`` both servers will run (JAVA_HOME first, then PATH), or None."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    return shutil.which("java")


@dataclass
class RefServerInstance:
    """A running reference server: where to reach it and where its files are."""

    LOG_NAMES: ClassVar[tuple[str, ...]] = ()

    inference_url: str
    management_url: str
    model_store: Path
    tmp_dir: Path
    pid: int
    log_dir: Path

    def logs(self, lines: int = 40) -> str:
        """The tail of the server's own logs and of the launcher output, for failure messages."""
        parts = []
        for name in self.LOG_NAMES:
            text = tail(self.log_dir / name, lines)
            if text:
                parts.append(f"--- {name}\n{text}")
        text = tail(self.tmp_dir / "launcher.out", lines)
        if text:
            parts.append(f"--- launcher\n{text}")
        return "\n".join(parts)


InstanceT = TypeVar("InstanceT", bound=RefServerInstance)


def archive_handler(
    export_dir: Path,
    name: str,
    handler_source: str,
    handler_file: str,
    archiver_args: Callable[[Path], list[str]],
    *,
    timeout: float,
) -> Path:
    """Write *handler_source* to a scratch folder, run the archiver, return ``<export_dir>/<name>.mar``.

    *archiver_args* gets the handler file's path and returns the archiver command line.
    """
    export_dir.mkdir(parents=True, exist_ok=True)
    src = export_dir / f".{name}-src"
    src.mkdir(exist_ok=True)
    handler = src / handler_file
    handler.write_text(handler_source)
    subprocess.run(archiver_args(handler), check=True, capture_output=True, timeout=timeout)
    remove_tree(src)
    return export_dir / f"{name}.mar"


@dataclass(frozen=True)
class Launcher:
    """One reference server's launcher script (it takes ``--start --foreground`` and ``--stop``)."""

    name: str  # for messages: "MMS", "TorchServe"
    binary: Path
    tmp_prefix: str  # keep it short: the workers' Unix sockets live in the private TEMP


@contextmanager
def serving(
    launcher: Launcher,
    *,
    port_count: int,
    prepare: Callable[[list[int]], tuple[list[str], InstanceT]],
    ready: Callable[[InstanceT], bool],
    start_timeout: float,
) -> Iterator[InstanceT]:
    """Start a reference server, wait until *ready*, yield it, and always stop it.

    *prepare* gets *port_count* distinct free ports, writes the config and returns the
    command and the instance it will be (its ``tmp_dir`` and ``log_dir`` must exist;
    ``pid`` is filled in here). A launcher that exits before it is ready (a port taken
    between our check and its bind) is retried on fresh ports, three times at most.
    """
    last_error: Optional[BaseException] = None
    for _attempt in range(3):
        private_tmp = short_tmp_dir(launcher.tmp_prefix)
        command, instance = prepare(free_ports(port_count))
        env = _server_env(private_tmp, instance.log_dir)
        with open(instance.tmp_dir / "launcher.out", "ab") as out:
            proc = subprocess.Popen(
                command, cwd=instance.tmp_dir, env=env, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )
        instance.pid = proc.pid
        try:
            try:
                wait_until(
                    lambda: ready(instance),
                    timeout=start_timeout,
                    what=f"{launcher.name} /ping",
                    alive=lambda: None if proc.poll() is None else f"{launcher.name} exited with {proc.returncode}",
                )
            except RuntimeError as exc:  # exited early: maybe a port clash, try other ports
                last_error = exc
                continue
            except TimeoutError as exc:
                raise TimeoutError(f"{exc}\n{instance.logs()}") from None
            yield instance
            return
        finally:
            _stop(launcher, proc, env, instance.tmp_dir)
            remove_tree(private_tmp)
    raise RuntimeError(f"{launcher.name} did not start: {last_error}\n{tail(instance.tmp_dir / 'launcher.out')}")


def _server_env(private_tmp: Path, log_dir: Path) -> dict[str, str]:
    """This process's environment with a private TEMP, the logs in *log_dir*, and no MMSCTL_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MMSCTL_")}
    env.update(
        TMPDIR=str(private_tmp),
        TEMP=str(private_tmp),
        LOG_LOCATION=str(log_dir),
        METRICS_LOCATION=str(log_dir),
        PYTHONUNBUFFERED="1",
    )
    return env


def _stop(launcher: Launcher, proc: subprocess.Popen[bytes], env: dict[str, str], cwd: Path) -> None:
    """``--stop`` with the same TMPDIR (it finds the pid file there), then kill the whole group."""
    try:
        subprocess.run([str(launcher.binary), "--stop"], env=env, cwd=cwd, capture_output=True, timeout=30)
    except (subprocess.TimeoutExpired, OSError):
        pass
    stop_process_group(proc)


# --- management and inference helpers (plain urllib, so they test nothing of ours) ---
# They take any instance with ``inference_url``/``management_url``; ``headers=`` carries
# TorchServe's bearer token (``ts.management_headers()``, ``ts.inference_headers()``).


def register_model(
    instance: Any,
    url: str,
    name: Optional[str] = None,
    *,
    initial_workers: int = 1,
    synchronous: bool = True,
    timeout: float = 120.0,
    headers: Optional[dict[str, str]] = None,
) -> HttpReply:
    """``POST /models`` the MMS way (``url=`` the archive); raises on a non-2xx answer."""
    query = {"url": url, "initial_workers": str(initial_workers), "synchronous": str(synchronous).lower()}
    if name:
        query["model_name"] = name
    reply = http_request(
        "POST",
        f"{instance.management_url}/models?{urllib.parse.urlencode(query)}",
        timeout=timeout,
        headers=headers,
    )
    if reply.status >= 300:
        raise RuntimeError(f"register {url} failed: {reply.status} {reply.body[:500]!r}")
    return reply


def unregister_model(instance: Any, name: str, *, timeout: float = 60.0, headers: Optional[dict[str, str]] = None) -> HttpReply:
    return http_request("DELETE", f"{instance.management_url}/models/{name}", timeout=timeout, headers=headers)


def scale_model(
    instance: Any, name: str, min_workers: int, *, synchronous: bool = True, timeout: float = 120.0,
    headers: Optional[dict[str, str]] = None,
) -> HttpReply:
    query = urllib.parse.urlencode({"min_worker": min_workers, "synchronous": str(synchronous).lower()})
    return http_request("PUT", f"{instance.management_url}/models/{name}?{query}", timeout=timeout, headers=headers)


def describe(instance: Any, name: str, *, headers: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """The describe body as a dict (TorchServe's one-element list is unwrapped)."""
    reply = http_request("GET", f"{instance.management_url}/models/{name}", timeout=10, headers=headers)
    if reply.status != 200:
        raise RuntimeError(f"describe {name}: {reply.status} {reply.body[:300]!r}")
    data = reply.json()
    return data[0] if isinstance(data, list) else data


def wait_for_workers(instance: Any, name: str, count: int = 1, *, timeout: float = 90.0, headers: Optional[dict[str, str]] = None) -> None:
    """Until describe shows *count* READY workers (MMS says READY ~1 s before a worker serves)."""

    def ready() -> bool:
        workers = describe(instance, name, headers=headers).get("workers", [])
        return sum(1 for w in workers if str(w.get("status")).upper() == "READY") >= count

    wait_until(ready, timeout=timeout, what=f"{count} READY worker(s) for {name}")


def predict(
    instance: Any, name: str, body: bytes = b"ping", *, timeout: float = 30.0,
    content_type: str = "application/octet-stream", headers: Optional[dict[str, str]] = None,
) -> HttpReply:
    hdrs = {"Content-Type": content_type, **(headers or {})}
    return http_request("POST", f"{instance.inference_url}/predictions/{name}", body=body, headers=hdrs, timeout=timeout)


def wait_for_prediction(
    instance: Any, name: str, body: bytes = b"ping", *, timeout: float = 90.0,
    headers: Optional[dict[str, str]] = None,
) -> HttpReply:
    """Until a real prediction answers 200 (the only reliable readiness signal of MMS)."""
    result: dict[str, HttpReply] = {}

    def ok() -> bool:
        reply = predict(instance, name, body, timeout=10, headers=headers)
        result["reply"] = reply
        return reply.status == 200

    try:
        wait_until(ok, timeout=timeout, what=f"first prediction from {name}", interval=0.1)
    except TimeoutError as exc:
        logs = instance.logs() if hasattr(instance, "logs") else ""
        raise TimeoutError(f"{exc}; last reply {result.get('reply')!r}\n{logs}") from None
    return result["reply"]
