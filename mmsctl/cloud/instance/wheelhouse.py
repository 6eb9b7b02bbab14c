"""The wheels an instance installs mmsctl from, with no package index: this mmsctl as a wheel, and every
runtime dependency as a binary wheel for the instance's platform and Python.

Built on this machine (``pip wheel`` of the checkout, ``pip download --only-binary :all: --platform
… --python-version …``) before any EC2 call, so a dependency without a wheel for the instance
fails here, in one line, and not in an instance's boot log; kept in the cache, one folder per
mmsctl version, platform and Python, and built once. ``MMSCTL_WHEELHOUSE=DIR`` uses a folder
prepared elsewhere (an air-gapped mirror) as it is.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

from mmsctl.config import cache_dir
from mmsctl.errors import MmsError, UsageError

__all__ = ["ENV_WHEELHOUSE", "PLATFORM", "WheelhouseError", "build_wheelhouse", "check_python", "checkout_wheel",
           "download_dependencies", "runtime_requirements"]

ENV_WHEELHOUSE = "MMSCTL_WHEELHOUSE"
PLATFORM = "manylinux2014_x86_64"  # mxnet 1.9.1 publishes x86_64 Linux wheels only
_PYTHON = re.compile(r"^3\.(9|10|11|12)$")
_DONE = ".complete"


class WheelhouseError(MmsError):
    """The wheels for the instance could not be made (pip's last line says why)."""

    reference = "cloud-wheelhouse"


def check_python(version: str) -> str:
    if not _PYTHON.match(version):
        raise UsageError(f"instance Python {version!r}: mmsctl's wheels exist for 3.9 to 3.12", param="instance_python")
    return version


def runtime_requirements() -> list[str]:
    """mmsctl's declared dependencies, extras left out (the server and the CLI the instance runs)."""
    return [r for r in md.requires("mmsctl") or [] if "extra ==" not in r]


def _source() -> Optional[Path]:
    """The checkout this mmsctl runs from (an editable install), or None."""
    import mmsctl

    root = Path(mmsctl.__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() else None


def build_wheelhouse(python: str) -> Path:
    """The folder of wheels for *python* on the instance platform, built (once) if missing.

    Raises:
        WheelhouseError: pip could not build the mmsctl wheel or find a wheel of a dependency.
    """
    given = os.environ.get(ENV_WHEELHOUSE)
    if given:
        folder = Path(given)
        if not folder.is_dir() or not any(folder.glob("*.whl")):
            raise WheelhouseError(f"{ENV_WHEELHOUSE}={given}: not a folder of wheels")
        return folder
    from mmsctl import __version__

    requirements = runtime_requirements()
    source = _source()
    stamp = hashlib.sha256("\n".join([__version__, python, PLATFORM, *requirements]).encode()).hexdigest()[:12]
    folder = cache_dir() / "wheelhouse" / f"mmsctl-{__version__}-cp{python.replace('.', '')}-{stamp}"
    if (folder / _DONE).is_file() and source is None:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("mmsctl-*.whl"):  # a checkout changes under the same version: rebuilt each time
        old.unlink()
    if source is None:
        _pip("download", "--no-deps", "--only-binary", ":all:", "--dest", str(folder), f"mmsctl=={__version__}")
    else:
        checkout_wheel(source, folder)
    if not (folder / _DONE).is_file():
        download_dependencies(folder, python)
        (folder / _DONE).write_text(stamp)
    return folder


def download_dependencies(folder: Path, python: str) -> None:
    """mmsctl's runtime dependencies as binary wheels for the instance platform and *python*, into *folder*
    (pip's index settings apply: ``PIP_INDEX_URL`` for a mirror)."""
    _pip("download", "--only-binary", ":all:", "--platform", PLATFORM, "--python-version", python,
         "--implementation", "cp", "--dest", str(folder), *runtime_requirements())


def checkout_wheel(source: Path, into: Path, *pip_args: str) -> None:
    """A wheel of the checkout *source* into *into*, built in a build folder of its own: setuptools never
    empties the checkout's ``build/``, so a module deleted since an earlier build would be packed again."""
    with tempfile.TemporaryDirectory(prefix="mmsctl-wheel-") as tmp:
        config = Path(tmp) / "build.cfg"  # read by setuptools beside setup.cfg (DIST_EXTRA_CONFIG)
        config.write_text(f"[build]\nbuild_base = {Path(tmp) / 'build'}\n", encoding="utf-8")
        _pip("wheel", "--no-deps", *pip_args, "--wheel-dir", str(into), str(source),
             env={"DIST_EXTRA_CONFIG": str(config)})


def _pip(*args: str, env: Optional[dict[str, str]] = None) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args],
                          capture_output=True, text=True, env={**os.environ, **env} if env else None)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise WheelhouseError(f"pip {args[0]} for the instance failed: {last}",
                              hint=f"prepare the wheels elsewhere and point {ENV_WHEELHOUSE} at them")


