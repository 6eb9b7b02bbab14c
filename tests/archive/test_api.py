"""The public API of mmsctl.archive: complete, sorted, and light to import."""

from __future__ import annotations

import json
import subprocess
import sys

import mmsctl.archive


def test_all_is_sorted_and_importable() -> None:
    names = mmsctl.archive.__all__
    assert names == sorted(names)
    for name in names:
        assert hasattr(mmsctl.archive, name), name


def test_importing_the_package_pulls_in_nothing_heavy() -> None:
    probe = (
        "import sys, json, mmsctl.archive\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('mxnet', 'numpy', 'onnx', 'PIL', 'httpx', 'yaml'))))"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []
