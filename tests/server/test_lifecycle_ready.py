"""`serve start` is woken by its server the moment the start is decided (a pipe), not at its next poll."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from mmsctl.local_servers import Instance
from mmsctl.server.app import STARTUP_FAILURE
from mmsctl.server.control import build_config
from tests.support.mmsctl_server import free_port, make_noop_archive
from tests.support.waiting import wait_until


def _start(tmp_path: Path, model: str, name: str) -> tuple[subprocess.Popen[bytes], int, Instance]:
    """``python -m mmsctl.server CONFIG READY_FD`` as ``serve start`` runs it; the pipe's read end."""
    addresses = {f"{api}_address": f"http://127.0.0.1:{free_port()}" for api in ("inference", "management", "metrics")}
    config = build_config(models=[model], model_store=None, config_file=None, workers=1, token_file=None, name=name,
                          **addresses)
    instance = Instance(name)
    instance.dir.mkdir(parents=True, exist_ok=True)
    instance.config_file.write_text(config.to_json())
    read, write = os.pipe()
    with open(tmp_path / f"{name}.log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "mmsctl.server", str(instance.config_file), str(write)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, pass_fds=(write,),
                                start_new_session=True)
    os.close(write)
    return proc, read, instance


def _pipe_holders(proc: subprocess.Popen[bytes], read: int) -> list[int]:
    """The processes of the server's tree that hold an end of the pipe *read* belongs to."""
    wanted = f"pipe:[{os.fstat(read).st_ino}]"
    holders = []
    for p in [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]:
        try:
            links = [os.readlink(f"/proc/{p.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{p.pid}/fd")]
        except OSError:
            continue
        if wanted in links:
            holders.append(p.pid)
    return holders


def test_the_server_writes_to_its_ready_pipe_once_ready_or_failed_and_no_worker_holds_it(tmp_path: Path) -> None:
    good = make_noop_archive(tmp_path / "noop")
    broken = make_noop_archive(tmp_path / "broken", name="broken", failing=True)

    proc, read, instance = _start(tmp_path, f"noop={good}", "ready-pipe")
    try:
        assert select.select([read], [], [], 120)[0], "no word from the server in 120 s"
        assert os.read(read, 64) == b"\n"
        state = instance.read_state()
        assert state is not None and state.status == "ready" and state.pid == proc.pid  # written before the word
        workers = psutil.Process(proc.pid).children(recursive=True)
        assert workers, "the start-up model has a worker"
        log = instance.log_file.read_text()
        # Its worker was started before the server set up its APIs (it imports meanwhile), not after.
        # (its READY may come before or after the bind: a quick worker can be ready first)
        assert log.index("Model noop loaded.") < log.index("Inference API bound to") and "W-9000 READY" in log
        assert _pipe_holders(proc, read) in ([], [proc.pid])  # no worker inherited an end
        # The server writes, then closes: the word can wake this test between the two.
        wait_until(lambda: _pipe_holders(proc, read) == [], timeout=30, what="the server closing its end of the pipe")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        assert os.read(read, 64) == b""  # end of file: nobody else holds the write end
    finally:
        os.close(read)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)

    proc, read, instance = _start(tmp_path, f"broken={broken}", "failed-pipe")
    try:
        assert select.select([read], [], [], 120)[0], "no word from the server in 120 s"
        assert os.read(read, 64) == b"\n"
        state = instance.read_state()
        assert state is not None and state.status == "failed" and "missing weights" in (state.error or "")
        assert proc.wait(60) == STARTUP_FAILURE
    finally:
        os.close(read)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
