"""The two load generators the benchmarks drive, for a fixed time, with one result shape.

``hey`` (``apt-get install hey``) and ``mmsctl bench``'s own (the real command in its own
process). Used by bench/serve.py, bench/models.py and bench/loadgen_vs_hey.py, so every
benchmark counts successes, errors and percentiles the same way.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[1]

#: hey's path, or None where it is not installed.
HEY: Optional[str] = shutil.which("hey") or ("/usr/bin/hey" if Path("/usr/bin/hey").exists() else None)


@dataclass
class Load:
    """What one run of a load generator got."""

    ok: int
    sent: int
    seconds: float
    p50_ms: Optional[float] = None
    p99_ms: Optional[float] = None

    @property
    def rps(self) -> float:
        """Successful requests a second."""
        return self.ok / self.seconds if self.seconds else 0.0

    @property
    def failed(self) -> int:
        """Requests not answered with a 2xx (other statuses and connection errors)."""
        return self.sent - self.ok


def hey(url: str, clients: int, duration: float, *, body: Optional[Path] = None,
        content_type: Optional[str] = None) -> Load:
    """``hey -z Ds -c N -m POST [-D body] [-T type] url``."""
    if HEY is None:
        raise RuntimeError("hey is not installed (apt-get install hey)")
    argv = [HEY, "-z", f"{duration:g}s", "-c", str(clients), "-m", "POST"]
    argv += ["-D", str(body)] if body is not None else []
    argv += ["-T", content_type] if content_type else []
    text = subprocess.run(argv + [url], capture_output=True, text=True, timeout=duration + 120).stdout
    total = float(re.search(r"Total:\s+([\d.]+) secs", text).group(1))  # type: ignore[union-attr]
    codes = [(code, int(n)) for code, n in re.findall(r"\[(\d{3})\]\s+(\d+) responses", text)]
    errors = sum(int(n) for n, _ in re.findall(r"\[(\d+)\]\s+([A-Za-z].*)", text))  # connection errors

    def percentile(p: str) -> Optional[float]:
        found = re.search(rf"\s{p}% in ([\d.]+) secs", text)
        return 1000 * float(found.group(1)) if found else None

    ok = sum(n for code, n in codes if code.startswith("2"))
    return Load(ok, sum(n for _, n in codes) + errors, total, percentile("50"), percentile("99"))


def mmsctl_bench(url: str, clients: int, duration: float, *, body: Path, env: dict[str, str]) -> Load:
    """``mmsctl bench MODEL BODY -c N -d Ds`` against *url*, in *env*: ``…/predictions/MODEL`` (the MMS API) or
    ``…/v2/models/MODEL/infer`` (the Open Inference Protocol: a ``--protocol v2`` context, binary infer)."""
    argv = [sys.executable, "-m", "mmsctl", "-q"]
    env = dict(env, PYTHONPATH=str(REPO))
    if "/v2/models/" in url:
        base, rest = url.split("/v2/models/")
        model = rest.split("/")[0]
        context = subprocess.run(argv + ["context", "add", "bench-v2", "--protocol", "v2", "--inference", base],
                                 capture_output=True, text=True, env=env, timeout=60)
        if context.returncode != 0:
            raise RuntimeError(f"mmsctl context add failed: {context.stderr[-500:]}")
        argv += ["--context", "bench-v2"]
    else:
        base, model = url.split("/predictions/")
        env["MMSCTL_INFERENCE_URL"] = base
    proc = subprocess.run(argv + ["bench", model, str(body), "-c", str(clients), "-d", f"{duration:g}s",
                                  "--warmup", "0", "-o", "json"],
                          capture_output=True, text=True, env=env, timeout=duration + 120)
    if proc.returncode not in (0, 1):  # 1: some requests failed, still a measurement
        raise RuntimeError(f"mmsctl bench failed ({proc.returncode}): {proc.stderr[-500:]}")
    (level,) = json.loads(proc.stdout)["sweeps"][0]["levels"]
    latency = level["latency_ms"]
    return Load(level["ok"], level["sent"], level["duration_s"], latency.get("p50"), latency.get("p99"))


_RAW_POST = r"""
import json, sys
from mmsctl.loadtest.loadgen import LoadSpec, build_posts, run_in_loop, run_load
base, path, clients, duration, body_file, headers = sys.argv[1:7]
endpoint = build_posts(base, path, [(open(body_file, "rb").read(), json.loads(headers))])
level = run_in_loop(run_load(endpoint, LoadSpec(concurrency=int(clients), duration_s=float(duration))))
print(json.dumps({"ok": level.ok, "sent": level.sent, "seconds": level.duration_s,
                  "p50": level.latency.quantile_ms(0.5) if level.ok else None,
                  "p99": level.latency.quantile_ms(0.99) if level.ok else None}))
"""


def mmsctl_post(base: str, path: str, clients: int, duration: float, *, body: Path,
                headers: dict[str, str]) -> Load:
    """``mmsctl bench``'s load generator (its own process, as :func:`mmsctl_bench` runs it) POSTing *body* with
    *headers* to any path, e.g. SageMaker's ``/invocations``, which no context names."""
    proc = subprocess.run([sys.executable, "-c", _RAW_POST, base, path, str(clients), f"{duration:g}", str(body),
                           json.dumps(headers)], capture_output=True, text=True, timeout=duration + 120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    if proc.returncode != 0:
        raise RuntimeError(f"the load generator failed ({proc.returncode}): {proc.stderr[-500:]}")
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    return Load(found["ok"], found["sent"], found["seconds"], found["p50"], found["p99"])
