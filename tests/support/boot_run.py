"""Run the boot script an instance gets, for real, on this machine: the test's and bench/boot.py's one body.

The script is rendered exactly as `fleet create` renders it, with its paths in a throw-away prefix,
its S3 at a moto server and its metadata service at a stand-in (tests/support/boot_standins.py);
the assets are staged by mmsctl's own code into moto's S3. Every package index is unreachable
while the script runs (``PIP_INDEX_URL`` points at a closed port, no find-links or config from this
machine), so mmsctl and its dependencies can only come from the wheelhouse in the bucket.

The wheelhouse itself is built once with the index reachable (``pip wheel`` of this checkout,
``pip download`` of its dependencies for this machine's Python and platform) and kept in
``~/.cache/mmsctl-test-wheelhouse`` — the one step of the boot's preparation that needs the
internet, as `fleet create` on a user's machine does.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

__all__ = ["BootRun", "TEST_WHEELHOUSE", "boot", "boot_from_index", "build_test_wheelhouse", "stop"]

TEST_WHEELHOUSE = Path.home() / ".cache" / "mmsctl-test-wheelhouse"
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


def _deps_folder() -> Path:
    from mmsctl.cloud.instance.wheelhouse import PLATFORM, runtime_requirements

    import hashlib

    key = hashlib.sha256("\n".join([PYTHON, PLATFORM, *runtime_requirements()]).encode()).hexdigest()[:12]
    return TEST_WHEELHOUSE / f"deps-cp{PYTHON.replace('.', '')}-{key}"


def download_test_dependencies() -> Path:
    """Set-up (scripts/boot_wheels.py, run by `make test`): mmsctl's dependencies as wheels, with the index,
    downloaded by the same function `fleet create` and `ec2 launch` use."""
    from mmsctl.cloud.instance.wheelhouse import download_dependencies

    folder = _deps_folder()
    if (folder / ".complete").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    download_dependencies(folder, PYTHON)  # the very call `fleet create` makes, against the real index
    (folder / ".complete").write_text("ok")
    return folder


def build_test_wheelhouse(into: Path) -> Path:
    """The wheelhouse the boot test stages, with no network: the dependencies downloaded at set-up, and this
    checkout's wheel built here offline (``--no-build-isolation``: setuptools from this virtualenv).

    Raises:
        FileNotFoundError: the set-up step (scripts/boot_wheels.py) has not run on this machine.
    """
    import shutil

    from mmsctl.cloud.instance.wheelhouse import checkout_wheel

    deps = _deps_folder()
    if not (deps / ".complete").is_file():
        raise FileNotFoundError(f"no boot-test wheels in {deps}: run `make test` (or scripts/boot_wheels.py) once")
    into.mkdir(parents=True, exist_ok=True)
    for wheel in deps.glob("*.whl"):
        shutil.copy2(wheel, into / wheel.name)
    repo = Path(__file__).resolve().parents[2]
    checkout_wheel(repo, into, "--no-build-isolation", "--no-index")
    return into


@dataclass
class BootRun:
    """One boot: the script's exit, its log, the ports, the marks it printed (seconds since the epoch)."""

    returncode: int
    log: str
    inference_url: str
    management_url: str
    started: float
    marks: dict[str, float] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)

    def seconds_to(self, mark: str) -> Optional[float]:
        return self.marks[mark] - self.started if mark in self.marks else None


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def boot(aws: Any, root: Path, models: list[str], wheels: Path, *, s3_endpoint: str, imds_endpoint: str,
         timeout: float = 600.0) -> BootRun:
    """Stage *models* and *wheels* with mmsctl's code, render the boot script into *root*, run it; the server
    it started is left running (stop it with :func:`stop`)."""
    from mmsctl import __version__
    from mmsctl.cloud.instance.assets import plan_assets, stage_assets
    from mmsctl.cloud.instance.userdata import UserDataSpec, parse_models, render_user_data

    paths = _paths(root)
    plan = plan_assets(parse_models(models), "fleet/boot/", wheelhouse=wheels, paths=paths)
    staged = stage_assets(aws, plan, PYTHON, [], [])
    ref = staged.ref.__class__(**{**staged.ref.__dict__, "s3_endpoint": s3_endpoint, "imds_endpoint": imds_endpoint})
    ports = (_free_port(), _free_port())
    script = render_user_data(UserDataSpec(models=plan.models, version=__version__, inference_port=ports[0],
                                           management_port=ports[1], assets=ref, paths=paths))
    no_index = {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_CONFIG_FILE": os.devnull}
    return _run(root, script, ports, {k: v for k, v in _instance_environ().items() if not k.startswith("PIP_")},
                no_index, timeout)


def boot_from_index(root: Path, model: str, wheel: Path, timeout: float = 600.0) -> BootRun:
    """The pip-spec boot (before assets): *wheel* with its dependencies from the package index. The archive
    is at hand on this machine, so the server opens it where it is (a real instance would download it)."""
    from mmsctl import __version__
    from mmsctl.cloud.instance.userdata import ModelSpec, UserDataSpec, render_user_data

    name, archive = model.split("=", 1)
    ports = (_free_port(), _free_port())
    script = render_user_data(UserDataSpec(models=[ModelSpec(name, archive, "zoo")], version=__version__,
                                           pip_spec=str(wheel), inference_port=ports[0], management_port=ports[1],
                                           paths=_paths(root)))
    return _run(root, script, ports, _instance_environ(), {}, timeout)


def _instance_environ() -> dict[str, str]:
    """This process's environment as a booting instance would not have it: no Python path or home of a checkout
    (with this suite's PYTHONPATH the instance's venv imported the checkout's mmsctl, not the wheel it installed)."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def _paths(root: Path) -> Any:
    from mmsctl.cloud.instance.userdata import ScriptPaths

    (root / "units").mkdir(parents=True, exist_ok=True)
    return ScriptPaths(app_dir=str(root / "opt"), data_dir=str(root / "var"), conf_dir=str(root / "etc"),
                       unit_dir=str(root / "units"), log_file=str(root / "init.log"),
                       console=str(root / "console"), service_user="root")


def _run(root: Path, script: str, ports: tuple[int, int], base_env: dict[str, str], extra: dict[str, str],
         timeout: float) -> BootRun:
    from tests.support.boot_standins import write_shims

    (root / "user-data.sh").write_text(script)
    state = root / "shim-state"
    state.mkdir(exist_ok=True)
    env = {k: v for k, v in base_env.items()
           if not k.startswith(("AWS_", "MMSCTL_")) and k.lower() not in ("http_proxy", "https_proxy")}
    env.update(PATH=f"{write_shims(root / 'shims')}:{env.get('PATH', '/usr/bin:/bin')}", SHIM_STATE=str(state),
               SHIM_UNIT_DIR=str(root / "units"), PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1",
               **extra)
    started = time.time()
    done = subprocess.run(["bash", str(root / "user-data.sh")], env=env, capture_output=True, text=True,
                          timeout=timeout, start_new_session=True)
    log = done.stdout + done.stderr
    marks = {m.group(1): float(m.group(2)) for m in re.finditer(r"mmsctl-init: (\w+).*? t=(\d+\.\d+)", log)}
    calls = (state / "calls").read_text().splitlines() if (state / "calls").exists() else []
    return BootRun(done.returncode, log, f"http://127.0.0.1:{ports[0]}", f"http://127.0.0.1:{ports[1]}", started,
                   marks, calls)


def stop(root: Path) -> None:
    """Stop the server the shim started (its whole session)."""
    pid_file = root / "shim-state" / "mmsctl.pid"
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text().strip())
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    from tests.support.waiting import wait_until

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    try:
        wait_until(gone, timeout=10, what="the booted server to stop")
    except TimeoutError:
        os.killpg(pid, signal.SIGKILL)
