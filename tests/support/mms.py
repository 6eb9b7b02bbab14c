"""Run a real MMS 1.1.11 (from ``.venv-mms``) on loopback for interop tests.

Usage::

    from tests.support.mms import mms_skip_reason, running_mms, build_noop_mar

    @pytest.mark.interop
    @pytest.mark.xdist_group("mms")
    def test_something(tmp_path):
        if mms_skip_reason():
            pytest.skip(mms_skip_reason())
        store = tmp_path / "store"
        build_noop_mar(store, "noop")
        with running_mms(tmp_path / "mms", model_store=store, models={"noop": "noop.mar"}) as mms:
            wait_for_prediction(mms, "noop")
            ...

One MMS per test module is the efficient pattern: see ``tests/support/fixtures_mms.py``
(``mms_server`` fixture) and register models through the management API with
:func:`register_model`.

Every wait is bounded, the server is always stopped (``--stop`` with the same
``TMPDIR``, then the whole process group is killed), and each run gets a short
private ``TEMP`` so the workers' Unix sockets never clash with another run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import urllib.parse
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

from tests.support._proc import (
    HttpReply,
    free_port,
    http_request,
    remove_tree,
    short_tmp_dir,
    stop_process_group,
    tail,
    wait_until,
)
from tests.support.paths import MMS_VENV

__all__ = [
    "MmsInstance",
    "NOOP_HANDLER_SOURCE",
    "build_noop_mar",
    "mms_skip_reason",
    "predict",
    "register_model",
    "running_mms",
    "scale_model",
    "unregister_model",
    "wait_for_prediction",
    "wait_for_workers",
]

MMS_BIN = MMS_VENV / "bin" / "multi-model-server"
ARCHIVER_BIN = MMS_VENV / "bin" / "model-archiver"

# A handler that loads nothing (no mxnet import, so a worker is ready in about a second)
# and echoes each request body back. Used to test the protocol, not the engine.
NOOP_HANDLER_SOURCE = textwrap.dedent(
    '''
    """Echo handler for interop tests: answers each request with its own body."""


    def handle(data, context):
        if data is None:  # MMS calls the handler once with no data when a worker starts
            return None
        out = []
        for item in data:
            body = item.get("body")
            if body is None:
                body = item.get("data")
            if body is None:
                body = b""
            if isinstance(body, str):
                body = body.encode("utf-8")
            out.append(bytes(body))
        return out
    '''
).lstrip()


def _java() -> Optional[str]:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    return shutil.which("java")


def mms_skip_reason() -> Optional[str]:
    """Why real MMS cannot run here (None when it can)."""
    if not MMS_BIN.exists():
        return f"MMS 1.1.11 not installed: {MMS_BIN} is missing (run `make reference-servers`)"
    if _java() is None:
        return "MMS needs Java: no `java` on PATH and no JAVA_HOME"
    return None


@dataclass
class MmsInstance:
    """A running MMS: where to reach it and where its files are."""

    inference_url: str
    management_url: str
    model_store: Path
    tmp_dir: Path
    pid: int
    log_dir: Path

    def logs(self, lines: int = 40) -> str:
        """The tail of MMS's own log and of the launcher output, for failure messages."""
        parts = []
        for name in ("mms_log.log", "model_log.log"):
            text = tail(self.log_dir / name, lines)
            if text:
                parts.append(f"--- {name}\n{text}")
        text = tail(self.tmp_dir / "launcher.out", lines)
        if text:
            parts.append(f"--- launcher\n{text}")
        return "\n".join(parts)


def build_noop_mar(export_dir: Path, name: str = "noop", *, handler_source: str = NOOP_HANDLER_SOURCE) -> Path:
    """Archive the echo handler with MMS's own ``model-archiver``; returns the ``.mar`` path."""
    export_dir.mkdir(parents=True, exist_ok=True)
    src = export_dir / f".{name}-src"
    src.mkdir(exist_ok=True)
    (src / "noop_service.py").write_text(handler_source)
    subprocess.run(
        [
            str(ARCHIVER_BIN),
            "--model-name", name,
            "--model-path", str(src),
            "--handler", "noop_service:handle",
            "--runtime", "python",
            "--export-path", str(export_dir),
            "--force",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    remove_tree(src)
    return export_dir / f"{name}.mar"


def _write_config(path: Path, inference_port: int, management_port: int, workers: int, extra: dict[str, Any]) -> None:
    props = {
        "inference_address": f"http://127.0.0.1:{inference_port}",
        "management_address": f"http://127.0.0.1:{management_port}",
        "default_workers_per_model": str(workers),
        "default_response_timeout": "120",
        "unregister_model_timeout": "60",
        "async_logging": "true",
    }
    props.update({k: str(v) for k, v in extra.items()})
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))


@contextmanager
def running_mms(
    tmp_dir: Path,
    *,
    model_store: Path,
    models: Optional[dict[str, str]] = None,
    workers: int = 1,
    extra_config: Optional[dict[str, Any]] = None,
    start_timeout: float = 120.0,
) -> Iterator[MmsInstance]:
    """Start real MMS on free loopback ports and stop it afterwards, whatever happens.

    Args:
        tmp_dir: folder for config, logs and launcher output (created).
        model_store: the ``--model-store`` folder.
        models: ``{name: file-or-url}`` for ``--models``. Waiting for their workers or a first
            prediction is the caller's job (:func:`wait_for_prediction`).
        workers: ``default_workers_per_model``.
        extra_config: more ``config.properties`` keys.
        start_timeout: seconds to wait for ``/ping``.
    """
    reason = mms_skip_reason()
    if reason:
        raise RuntimeError(reason)
    tmp_dir.mkdir(parents=True, exist_ok=True)
    model_store.mkdir(parents=True, exist_ok=True)
    log_dir = tmp_dir / "logs"
    log_dir.mkdir(exist_ok=True)
    last_error: Optional[BaseException] = None
    for _attempt in range(3):  # a port grabbed by someone else between our check and MMS's bind
        private_tmp = short_tmp_dir("mms")
        inference_port, management_port = free_port(), free_port()
        while management_port == inference_port:
            management_port = free_port()
        config = tmp_dir / "config.properties"
        _write_config(config, inference_port, management_port, workers, dict(extra_config or {}))
        env = dict(os.environ)
        env.update(
            TMPDIR=str(private_tmp),
            TEMP=str(private_tmp),
            LOG_LOCATION=str(log_dir),
            METRICS_LOCATION=str(log_dir),
            PYTHONUNBUFFERED="1",
        )
        for key in [k for k in env if k.startswith("MMSCTL_")]:
            env.pop(key)
        cmd = [
            str(MMS_BIN), "--start", "--foreground",
            "--mms-config", str(config),
            "--model-store", str(model_store),
        ]
        if models:
            cmd += ["--models", *(f"{name}={where}" for name, where in models.items())]
        out = open(tmp_dir / "launcher.out", "ab")
        proc = subprocess.Popen(
            cmd, cwd=tmp_dir, env=env, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
        out.close()
        instance = MmsInstance(
            inference_url=f"http://127.0.0.1:{inference_port}",
            management_url=f"http://127.0.0.1:{management_port}",
            model_store=model_store,
            tmp_dir=tmp_dir,
            pid=proc.pid,
            log_dir=log_dir,
        )
        try:
            try:
                wait_until(
                    lambda: _pings(instance),
                    timeout=start_timeout,
                    what="MMS /ping",
                    alive=lambda: None if proc.poll() is None else f"MMS exited with {proc.returncode}",
                )
            except RuntimeError as exc:  # exited early: maybe a port clash, try other ports
                last_error = exc
                continue
            except TimeoutError as exc:
                raise TimeoutError(f"{exc}\n{instance.logs()}") from None
            yield instance
            return
        finally:
            _stop(proc, env, private_tmp)
    raise RuntimeError(f"MMS did not start: {last_error}\n{tail(tmp_dir / 'launcher.out')}")


def _pings(instance: MmsInstance) -> bool:
    reply = http_request("GET", instance.inference_url + "/ping", timeout=2)
    return reply.status == 200


def _stop(proc: subprocess.Popen[bytes], env: dict[str, str], private_tmp: Path) -> None:
    try:
        subprocess.run(
            [str(MMS_BIN), "--stop"], env=env, cwd=private_tmp, capture_output=True, timeout=30,
        )
    except (subprocess.TimeoutExpired, OSError):
        pass
    stop_process_group(proc)
    remove_tree(private_tmp)


# --- management and inference helpers (plain urllib, so they test nothing of ours) ---


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
        wait_until(ok, timeout=timeout, what=f"first prediction from {name}", interval=0.5)
    except TimeoutError as exc:
        logs = instance.logs() if hasattr(instance, "logs") else ""
        raise TimeoutError(f"{exc}; last reply {result.get('reply')!r}\n{logs}") from None
    return result["reply"]


if __name__ == "__main__":  # a manual smoke run: python -m tests.support.mms
    import tempfile

    work = Path(tempfile.mkdtemp(prefix="mms-smoke-"))
    mar = build_noop_mar(work / "store")
    with running_mms(work / "run", model_store=work / "store", models={"noop": mar.name}) as mms:
        print(json.dumps(wait_for_prediction(mms, "noop", b"hello").body.decode()), file=sys.stderr)
