"""recipes/systemd/mmsctl.service: a valid unit whose ExecStart runs and stops as under systemd."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests.recipes.cli_args import parse_mmsctl
from tests.recipes.conftest import RECIPES, RecipeRun, mmsctl_command
from tests.support._proc import http_request
from tests.support.waiting import wait_until
from tests.support.mmsctl_server import make_noop_archive
from tests.support.signals import popen

UNIT = RECIPES / "systemd" / "mmsctl.service"
CONFIG = RECIPES / "mms-config" / "config.properties"


def _unit(path: Path) -> dict[str, list[tuple[str, str]]]:
    """Sections of a unit file as (key, value) lists (keys may repeat, as Environment= does)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current = None
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), [])
            continue
        key, _, value = line.partition("=")
        assert current is not None, f"{line!r} outside a section"
        current.append((key.strip(), value.strip()))
    return sections


def _service(key: str) -> list[str]:
    return [v for k, v in _unit(UNIT)["Service"] if k == key]


def _exec_start() -> list[str]:
    (line,) = _service("ExecStart")
    return shlex.split(line)


def test_exec_start_is_a_valid_foreground_serve_command() -> None:
    argv = _exec_start()
    assert argv[0].startswith("/") and argv[0].endswith("/mmsctl")  # systemd wants an absolute path
    assert parse_mmsctl(argv[1:]) == "mmsctl serve start"
    assert "--foreground" in argv  # Type=exec: the server must stay in the foreground
    assert _service("Type") == ["exec"]
    assert _service("KillMode") == ["mixed"]  # SIGTERM to the server only: it drains its workers


def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze not installed")
    real = mmsctl_command().split()[0]
    copy = tmp_path / "mmsctl.service"
    copy.write_text(UNIT.read_text().replace(_exec_start()[0], real))
    result = subprocess.run(
        [analyze, "verify", str(copy)], capture_output=True, text=True, timeout=60
    )
    problems = [ln for ln in (result.stdout + result.stderr).splitlines() if "mmsctl.service" in ln]
    assert result.returncode == 0 and problems == [], result.stdout + result.stderr


def test_exec_start_runs_and_drains_on_sigterm(recipe: RecipeRun, tmp_path: Path) -> None:
    etc, state, cache = tmp_path / "etc", tmp_path / "lib", tmp_path / "cache"
    specifiers = {"%E": str(etc), "%S": str(state), "%C": str(cache)}
    env = dict(recipe.env)
    for line in _service("Environment"):
        key, _, value = line.partition("=")
        for spec, where in specifiers.items():
            value = value.replace(spec, where)
        env[key] = value
    # What ConfigurationDirectory/StateDirectory/CacheDirectory create, filled as README.md says.
    config = etc / "mmsctl" / "config.properties"
    config.parent.mkdir(parents=True)
    text = CONFIG.read_text()
    for key, port in (
        ("inference", recipe.port),
        ("management", recipe.management_port),
        ("metrics", recipe.metrics_port),
    ):
        text = re.sub(
            rf"^{key}_address=.*$", f"{key}_address=http://127.0.0.1:{port}", text, flags=re.M
        )
    config.write_text(text)
    store = state / "mmsctl" / "model-store"
    noop = make_noop_archive(tmp_path / "noop")  # an echo model under the name the config loads
    made = recipe.mmsctl(
        "archive",
        "create",
        str(noop),
        "--model-name",
        "squeezenet_v1.1",
        "--handler",
        "noop_service:handle",
        "--export-path",
        str(store),
    )
    assert made.returncode == 0, made.stderr

    argv = _exec_start()
    argv = [
        *mmsctl_command().split(),
        *(
            a.replace("/etc/mmsctl", str(etc / "mmsctl")).replace(
                "/var/lib/mmsctl", str(state / "mmsctl")
            )
            for a in argv[1:]
        ),
    ]
    log = open(tmp_path / "journal.txt", "wb")
    proc = popen(
        argv,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        cwd="/",
    )
    log.close()
    try:
        url = f"http://127.0.0.1:{recipe.port}/predictions/squeezenet"
        wait_until(
            lambda: (
                http_request(
                    "POST",
                    url,
                    body=b"hello unit",
                    timeout=5,
                    headers={"Content-Type": "text/plain"},
                ).body
                == b"hello unit"
            ),
            timeout=120,
            what="a prediction from the unit's server",
            alive=lambda: (
                None
                if proc.poll() is None
                else f"exited {proc.returncode}: "
                + (tmp_path / "journal.txt").read_text(errors="replace")[-2000:]
            ),
        )
        # MMSCTL_STATE_DIR from Environment=; "ready" once every start-up worker is (a SIGTERM
        # before that is an interrupted start: exit 3).
        instance = state / "mmsctl" / "instances" / "mmsctl" / "state.json"
        wait_until(
            lambda: (
                {"pid": proc.pid, "status": "ready"}.items()
                <= json.loads(instance.read_text()).items()
            ),
            timeout=60,
            what="state.json says ready",
        )

        proc.send_signal(signal.SIGTERM)  # KillMode=mixed: the main process only
        (stop_timeout,) = _service("TimeoutStopSec")
        assert proc.wait(timeout=float(stop_timeout)) == 0
        wait_until(
            lambda: not _group_alive(proc.pid), timeout=10, what="workers gone after the server"
        )
    finally:
        if proc.poll() is None or _group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
