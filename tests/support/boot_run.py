"""Run the boot script an instance gets, for real, on this machine: the test's and bench/boot.py's one body.

The script is rendered exactly as `fleet create` renders it, with its paths in a throw-away prefix,
its S3 at a moto server, its metadata service and the Query APIs its agent reports to at stand-ins
(tests/support/boot_standins.py); the assets are staged by mmsctl's own code into moto's S3. The units it
installs can be started again as systemd starts them at a later boot (:func:`boot_again`). Every package index is unreachable
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

__all__ = ["BootRun", "TEST_WHEELHOUSE", "boot", "boot_again", "boot_from_index", "build_test_wheelhouse", "endpoints",
           "run_script", "stop"]

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
    """One boot: the script's exit, its log, the ports, the marks it printed (seconds since the epoch), and the
    environment it ran in (what the shims need to start its units again)."""

    returncode: int
    log: str
    inference_url: str
    management_url: str
    started: float
    marks: dict[str, float] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)

    def seconds_to(self, mark: str) -> Optional[float]:
        return self.marks[mark] - self.started if mark in self.marks else None


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def endpoints(*, s3: str, imds: str, query: Optional[str] = None) -> tuple[tuple[str, str], ...]:
    """The agent's test endpoints: S3, the metadata service, and Auto Scaling's and EC2's Query APIs (*query*,
    default *s3*: moto answers them too)."""
    return (("s3", s3), ("imds", imds), ("autoscaling", query or s3), ("ec2", query or s3))


def boot(aws: Any, root: Path, models: list[str], wheels: Path, *, s3_endpoint: str, imds_endpoint: str,
         query_endpoint: Optional[str] = None, hook: Any = None, timeout: float = 600.0) -> BootRun:
    """Stage *models* and *wheels* with mmsctl's code, render the boot script into *root*, run it; the server
    it started is left running (stop it with :func:`stop`)."""
    from mmsctl import __version__
    from mmsctl.cloud.instance.assets import assets_ref, plan_assets, stage_assets
    from mmsctl.cloud.instance.userdata import UserDataSpec, parse_models, render_user_data

    paths = paths_in(root)
    plan = plan_assets(parse_models(models), "fleet/boot/", wheelhouse=wheels, paths=paths)
    ref = assets_ref(aws, plan, PYTHON)
    stage_assets(aws, plan, PYTHON, [], [])
    ports = (free_port(), free_port())
    script = render_user_data(UserDataSpec(
        models=plan.models, version=__version__, inference_port=ports[0], management_port=ports[1], assets=ref,
        paths=paths, lifecycle_hook=hook,
        test_endpoints=endpoints(s3=s3_endpoint, imds=imds_endpoint, query=query_endpoint)))
    return run_script(root, script, ports, timeout=timeout)


def boot_from_index(root: Path, model: str, wheel: Path, timeout: float = 600.0) -> BootRun:
    """The pip-spec boot (before assets): *wheel* with its dependencies from the package index. The archive
    is at hand on this machine, so the server opens it where it is (a real instance would download it)."""
    from mmsctl import __version__
    from mmsctl.cloud.instance.userdata import ModelSpec, UserDataSpec, render_user_data

    name, archive = model.split("=", 1)
    ports = (free_port(), free_port())
    script = render_user_data(UserDataSpec(models=[ModelSpec(name, archive, "zoo")], version=__version__,
                                           pip_spec=str(wheel), inference_port=ports[0], management_port=ports[1],
                                           paths=paths_in(root)))
    return run_script(root, script, ports, with_index=True, timeout=timeout)


def _instance_environ() -> dict[str, str]:
    """This process's environment as a booting instance would not have it: no Python path or home of a checkout
    (with this suite's PYTHONPATH the instance's venv imported the checkout's mmsctl, not the wheel it installed),
    no AWS or mmsctl settings, no proxies."""
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV") and not k.startswith(("AWS_", "MMSCTL_"))
            and k.lower() not in ("http_proxy", "https_proxy")}


def paths_in(root: Path) -> Any:
    """The boot script's paths in the throw-away prefix *root*."""
    from mmsctl.cloud.instance.userdata import ScriptPaths

    (root / "units").mkdir(parents=True, exist_ok=True)
    return ScriptPaths(app_dir=str(root / "opt"), data_dir=str(root / "var"), conf_dir=str(root / "etc"),
                       unit_dir=str(root / "units"), log_file=str(root / "init.log"),
                       console=str(root / "console"), service_user="root")


def run_script(root: Path, script: str, ports: tuple[int, int] = (0, 0), *, with_index: bool = False,
               shim_env: Optional[dict[str, str]] = None, timeout: float = 600.0) -> BootRun:
    """Run *script* as cloud-init would, with the shims first on PATH (*shim_env*: their settings, e.g.
    ``SHIM_APT_LOCKED``) and, unless *with_index*, every package index out of reach."""
    import shutil

    from tests.support.boot_standins import write_shims

    (root / "user-data.sh").write_text(script)
    state = root / "shim-state"
    state.mkdir(exist_ok=True)
    env = {k: v for k, v in _instance_environ().items() if with_index or not k.startswith("PIP_")}
    real_python = shutil.which("python3", path=env.get("PATH")) or sys.executable
    env.update(PATH=f"{write_shims(root / 'shims')}:{env.get('PATH', '/usr/bin:/bin')}", SHIM_STATE=str(state),
               SHIM_UNIT_DIR=str(root / "units"), SHIM_REAL_PYTHON3=real_python, PIP_DISABLE_PIP_VERSION_CHECK="1",
               PYTHONDONTWRITEBYTECODE="1", **(shim_env or {}))
    if not with_index:
        env.update(PIP_INDEX_URL="http://127.0.0.1:9/simple", PIP_CONFIG_FILE=os.devnull)
    started = time.time()
    done = subprocess.run(["bash", str(root / "user-data.sh")], env=env, capture_output=True, text=True,
                          timeout=timeout, start_new_session=True)
    log = done.stdout + done.stderr
    marks = {m.group(1): float(m.group(2)) for m in re.finditer(r"mmsctl-init: (\w+).*? t=(\d+\.\d+)", log)}
    calls = (state / "calls").read_text().splitlines() if (state / "calls").exists() else []
    return BootRun(done.returncode, log, f"http://127.0.0.1:{ports[0]}", f"http://127.0.0.1:{ports[1]}", started,
                   marks, calls, env)


def boot_again(root: Path, run: BootRun) -> str:
    """The instance started again (a warm pool's): no user data, only the units the boot enabled, as systemd
    starts them; the report's output."""
    from tests.support.boot_standins import boot_again as start_units

    env = {k: run.env[k] for k in ("PATH", "SHIM_STATE", "SHIM_UNIT_DIR", "SHIM_REAL_PYTHON3", "HOME") if k in run.env}
    return start_units(root, env)


def stop(root: Path) -> None:
    """Stop what the shim started (each unit's whole session)."""
    from tests.support.boot_standins import running
    from tests.support.waiting import wait_until

    for pid_file in sorted((root / "shim-state").glob("*.pid")):
        pid = int(pid_file.read_text().strip())
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        try:
            wait_until(lambda: not running(pid), timeout=10, what=f"{pid_file.stem} to stop")
        except TimeoutError:
            os.killpg(pid, signal.SIGKILL)
