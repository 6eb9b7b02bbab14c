"""The Lambda handler runs with the kernel set remembered for its model on this machine, and never measures one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO, SQUEEZENET_DIR, require_shared

_PROBE = r'''
import json, os, sys
from pathlib import Path
from mmsctl.engine import kernels
from mmsctl.lambda_.served_model import _remembered_kernels

root = Path(sys.argv[1])
cache = kernels._cache_file()
_remembered_kernels(root, "squeezenet")  # nothing remembered: MXNet's default, and nothing measured
first = [os.environ.get("MXNET_MKLDNN_ENABLED"), cache.exists()]
ckpt = kernels.find_checkpoint(root)
threads = int(os.environ["OMP_NUM_THREADS"])
kernels._write_cache(cache, kernels.cache_key(ckpt, threads, kernels.rewrites_graph(ckpt)), kernels.KernelChoice(False, "", 60.0, 25.0), "squeezenet")
_remembered_kernels(root, "squeezenet")
print(json.dumps({"first": first, "then": os.environ.get("MXNET_MKLDNN_ENABLED"), "mxnet": "mxnet" in sys.modules}))
'''


def test_a_remembered_kernel_choice_is_applied_and_none_is_measured(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MXNET_", "MMSCTL_"))}
    env.update(MMSCTL_CACHE_DIR=str(tmp_path / "cache"), MMSCTL_CONFIG_DIR=str(tmp_path / "config"), OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", _PROBE, str(require_shared(SQUEEZENET_DIR))], capture_output=True,
                          text=True, cwd=REPO, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    assert probe["first"] == [None, False]  # a cold start with nothing remembered spends no seconds measuring
    assert probe["then"] == "0" and probe["mxnet"] is False
