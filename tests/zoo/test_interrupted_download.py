"""A download killed half-way never leaves a half archive under the real name."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.support.http_mirror import Mirror
from tests.support.waiting import wait_until
from tests.zoo.conftest import cached_files
from tests.support.signals import popen


def _start_pull(name: str) -> subprocess.Popen[str]:
    return popen(
        [sys.executable, "-m", "mmsctl", "zoo", "pull", name],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_part(proc: subprocess.Popen[str], timeout: float = 30.0) -> Path:
    def part() -> Path | None:
        parts = [p for p in cached_files() if p.name.endswith(".part") and p.stat().st_size > 0]
        if parts:
            return parts[0]
        assert proc.poll() is None, proc.communicate()
        return None

    try:
        return wait_until(part, timeout=timeout, what="a .part file of the download", interval=0.05)
    except TimeoutError as exc:
        proc.kill()
        raise AssertionError(f"the download never started ({exc})") from None


def test_ctrl_c_mid_download_leaves_no_file(http_mirror: Mirror) -> None:
    http_mirror.slow["squeezenet_v1.1.mar"] = 0.05  # ~2.5 s for the whole file
    proc = _start_pull("squeezenet")
    _wait_for_part(proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "Traceback" not in err  # typer turns Ctrl-C into a quiet exit 130
    assert cached_files() == []


def test_killed_download_leaves_only_a_part_file_that_the_next_pull_sweeps(
    http_mirror: Mirror, mirror_dir: Path
) -> None:
    http_mirror.slow["squeezenet_v1.1.mar"] = 0.05
    proc = _start_pull("squeezenet")
    part = _wait_for_part(proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    left = cached_files()
    assert left == [part]  # no file under the real name, only the private .part

    http_mirror.slow.clear()
    proc = _start_pull("squeezenet")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    final = Path(out.strip())
    assert final.name == "squeezenet_v1.1.mar"
    assert final.read_bytes() == (mirror_dir / "squeezenet_v1.1.mar").read_bytes()
    assert [p.name for p in cached_files()] == ["squeezenet_v1.1.mar", "squeezenet_v1.1.mar.meta.json"]
