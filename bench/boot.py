"""Benchmark: how long a new fleet member takes from boot script start to its server being ready (its readiness
check, /v2/health/ready, answers: what the launch hook and the load balancer wait for).

    .venv/bin/python bench/boot.py                 # assets boot, then the package-index boot beside it
    .venv/bin/python bench/boot.py --no-reference  # the assets boot only

The boot script `fleet create` renders runs on this machine in a throw-away prefix
(tests/support/boot_run.py): its S3 is a moto server, its metadata service a stand-in, `systemctl`
a shim (apt excluded: these AMIs need none). The assets boot fetches the wheelhouse and the model
from the bucket and installs with --no-index; the reference boot is the pip-spec escape hatch,
today's behaviour before assets: mmsctl's wheel with its dependencies from the package index (PyPI
through pip's cache here). The model is squeezenet from ../shared when present (else a no-op
archive). Prints the breakdown (fetch, install, server start), the target (<= 60 s) and the ratio.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.boot_run import (  # noqa: E402
    PYTHON,
    BootRun,
    boot,
    build_test_wheelhouse,
    download_test_dependencies,
    stop,
)
from tests.support.boot_standins import serving_imds  # noqa: E402

TARGET_S = 60.0
KEYS = {"AccessKeyId": "testing", "SecretAccessKey": "testing", "Token": "testing"}


def _moto(port: int) -> subprocess.Popen[bytes]:
    import urllib.request

    proc = subprocess.Popen([str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):  # bounded: 30 s
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1)
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("moto_server did not start")


def _model(work: Path) -> str:
    shared = REPO.parent / "shared" / "models" / "squeezenet_v1.1"
    if shared.is_dir():
        out = subprocess.run([sys.executable, "-m", "mmsctl", "archive", "create", str(shared), "--model-name",
                              "squeezenet", "--export-path", str(work)], capture_output=True, text=True)
        made = sorted(work.glob("squeezenet*.mar"))
        if out.returncode == 0 and made:
            return f"squeezenet={made[0]}"
        print(f"could not pack squeezenet ({(out.stderr.strip().splitlines() or ['?'])[-1]}); a no-op archive instead")
    from tests.cloud.lambda_support import noop_mar

    return f"noop={noop_mar(work, 'noop')}"


def _report(label: str, run: BootRun) -> float:
    if run.returncode != 0:
        print(f"{label}: the boot failed (exit {run.returncode})\n{run.log[-3000:]}")
        raise SystemExit(1)
    ready = run.seconds_to("server") or float("nan")
    fetched, installed = run.seconds_to("fetched"), run.seconds_to("installed")
    parts = [f"fetch {fetched:.1f} s" if fetched is not None else None,
             f"venv+pip {installed - (fetched or 0.0):.1f} s" if installed is not None else None,
             f"server start {ready - (installed or 0.0):.1f} s" if installed is not None else None]
    print(f"{label}: script start -> ready {ready:.1f} s ({', '.join(p for p in parts if p)})")
    return ready


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-reference", action="store_true", help="skip the package-index boot")
    args = parser.parse_args()
    from mmsctl.cloud.aws.session import open_session

    port = 5555
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_SESSION_TOKEN="testing",
                      AWS_DEFAULT_REGION="us-east-1", AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}",
                      AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    moto = _moto(port)
    try:
        with tempfile.TemporaryDirectory(prefix="mmsctl-boot-bench-") as tmp:
            work = Path(tmp)
            download_test_dependencies()
            wheels = build_test_wheelhouse(work / "wheelhouse")
            model = _model(work)
            sys.stdout.flush()
            print(f"model {model.split('=')[0]}, Python {PYTHON}, {len(list(wheels.glob('*.whl')))} wheels "
                  f"({sum(w.stat().st_size for w in wheels.glob('*.whl')) / 2**20:.0f} MiB)")
            with serving_imds(KEYS) as imds:
                root = work / "assets"
                try:
                    ours = _report("assets boot (no index)", boot(open_session(), root, [model], wheels,
                                                                  s3_endpoint=f"http://127.0.0.1:{port}",
                                                                  imds_endpoint=imds))
                finally:
                    stop(root)
            print(f"target <= {TARGET_S:.0f} s: {'met' if ours <= TARGET_S else 'NOT met'}")
            if not args.no_reference:
                ref = _reference(work, wheels, model)
                print(f"ratio (index boot / assets boot): {ref / ours:.2f}x")
    finally:
        moto.terminate()


def _reference(work: Path, wheels: Path, model: str) -> float:
    """The pip-spec boot: this mmsctl wheel, its dependencies from the index (as before assets)."""
    from tests.support.boot_run import boot_from_index

    root = work / "index"
    try:
        return _report("index boot (pip spec)", boot_from_index(root, model, next(wheels.glob("mmsctl-*.whl"))))
    finally:
        stop(root)


if __name__ == "__main__":
    main()
