"""Download throughput: mmsctl's zoo download vs curl, from a local HTTP server.

    .venv/bin/python bench/zoo_download.py [--size-mb 64] [--repeat 3]

Serves a random file (with a zip's first bytes, which downloads check) on 127.0.0.1 and fetches it with `mmsctl zoo pull URL --force`'s
code path (streamed, hashed, atomic rename) and with `curl -o`, best of N each, then
prints both and the ratio (mmsctl / curl; lower is better). Also times a cache hit
of `resolve_model` (what every `mmsctl predict squeezenet` pays). Writes a JSON
line with the numbers to stdout last. Nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def _best(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="mmsctl-bench-zoo-") as tmp:
        root = Path(tmp)
        served = root / "served"
        served.mkdir()
        blob = served / "big.mar"
        with open(blob, "wb") as fh:  # starts as a zip does: downloads check the archive's magic bytes
            fh.write(b"PK\x03\x04")
            for _ in range(args.size_mb):
                fh.write(os.urandom(1 << 20))
        os.environ["MMSCTL_CACHE_DIR"] = str(root / "cache")
        os.environ["MMSCTL_OFFLINE"] = "0"

        server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(served)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}/big.mar"
        try:
            from mmsctl.zoo.download import DownloadOptions, download
            from mmsctl.zoo.resolve import resolve_model

            target = root / "cache" / "out.mar"
            opts = DownloadOptions(progress=False, retries=0)
            ours = _best(lambda: download(url, target, options=opts), args.repeat)
            assert target.stat().st_size == blob.stat().st_size

            curl = shutil.which("curl")
            ref = None
            if curl:
                out = root / "curl.mar"
                ref = _best(
                    lambda: subprocess.run([curl, "-s", "-f", "-o", str(out), url], check=True), args.repeat
                )

            resolve_model(url, progress=False)  # fill the cache
            hit = _best(lambda: resolve_model(url, progress=False), 200)
        finally:
            server.shutdown()
            server.server_close()

    mb = args.size_mb
    print(f"download {mb} MiB  mmsctl: {ours:.3f} s ({mb / ours:.0f} MiB/s)", file=sys.stderr)
    if ref:
        print(f"download {mb} MiB  curl:   {ref:.3f} s ({mb / ref:.0f} MiB/s)", file=sys.stderr)
        print(f"ratio mmsctl/curl: {ours / ref:.2f}", file=sys.stderr)
    else:
        print("curl not found: no reference", file=sys.stderr)
    print(f"resolve_model cache hit: {hit * 1e3:.3f} ms", file=sys.stderr)
    print(json.dumps({"bench": "zoo_download", "size_mib": mb, "mmsctl_s": ours, "curl_s": ref,
                      "ratio": (ours / ref) if ref else None, "cache_hit_ms": hit * 1e3}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
