#!/usr/bin/env python3
"""Make the virtualenv `make test-lowest` runs the AWS tests in: boto3 and botocore at pyproject.toml's floor.

    .venv/bin/python scripts/lowest_venv.py .venv-lowest      # prints the floor it installed

The new venv holds only boto3 and botocore pinned at the floor (``botocore>=X`` in pyproject.toml; boto3 X is
released with botocore X) and the dependencies pip picks for them. Everything else — mmsctl, moto, pytest,
mxnet — comes from the venv that runs this script, through a ``.pth`` file that adds its site-packages *after*
the new venv's own, so the pinned SDK wins. It takes seconds and a few megabytes where a second full install
would take minutes. ``bin/mmsctl`` is the console script, for the tests that run ``mmsctl`` from PATH.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def sdk_floor(pyproject: Path = REPO / "pyproject.toml") -> str:
    """The X of ``botocore>=X`` in *pyproject*'s dependencies, checked against ``boto3>=X``."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - mmsctl depends on tomli below 3.11
        import tomli as tomllib
    dependencies = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    floors = {}
    for requirement in dependencies:
        found = re.fullmatch(r"(boto3|botocore)>=([0-9.]+)(,<[0-9.]+)?", requirement.replace(" ", ""))
        if found:
            floors[found[1]] = found[2]
    if set(floors) != {"boto3", "botocore"} or floors["boto3"] != floors["botocore"]:
        raise SystemExit(f"pyproject.toml must name one floor for boto3 and botocore (boto3>=X, botocore>=X): {floors}")
    return floors["botocore"]


def make(target: Path, floor: str) -> None:
    shutil.rmtree(target, ignore_errors=True)
    venv.EnvBuilder(with_pip=False).create(target)
    python = target / "bin" / "python"
    alone = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # pip's check sees only the new venv
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", "--python", str(python),
                    "install", f"boto3=={floor}", f"botocore=={floor}"], check=True, env=alone)
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    base = sysconfig.get_paths()["purelib"]
    # Named to sort after the new venv's own .pth files; addsitedir also runs the base's (the editable mmsctl).
    (Path(purelib) / "zz-base-venv.pth").write_text(f"import site; site.addsitedir({base!r})\n")
    script = target / "bin" / "mmsctl"
    script.write_text(f"#!{python}\nimport sys\nfrom mmsctl.cli.lean import run\nsys.exit(run())\n")
    script.chmod(0o755)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: lowest_venv.py TARGET_DIR", file=sys.stderr)
        return 2
    floor = sdk_floor()
    make(Path(argv[0]).resolve(), floor)  # absolute: bin/mmsctl's #! line works from any folder
    print(floor)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
