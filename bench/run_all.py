"""Run every benchmark in turn (``make bench``); each prints mmsctl, the reference and the ratio.

Benchmarks are not tests: run them on a quiet machine. Each one's output is also
written to ``bench/out/<name>.txt``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHES = ["predict.py", "serve.py", "models.py", "batching.py", "top.py", "remote_cli.py", "archive_bench.py", "zoo_download.py",
           "loadgen_vs_hey.py", "lambda_cold.py", "cli_start.py", "kernels.py"]


def main() -> int:
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    failed = []
    for name in BENCHES:
        print(f"== {name}", flush=True)
        proc = subprocess.run([sys.executable, str(HERE / name)], capture_output=True, text=True)
        text = proc.stdout + proc.stderr
        (out / (Path(name).stem + ".txt")).write_text(text)
        print(text, flush=True)
        if proc.returncode != 0:
            failed.append(name)
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
