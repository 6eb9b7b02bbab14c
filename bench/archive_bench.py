"""Archive speed: mmsctl vs MMS's model-archiver, open_archive cold vs warm, and extracting a
large archive with ISA-L (what mmsctl uses) vs zlib (zipfile's own reader).

Run from the repo root: ``.venv/bin/python bench/archive_bench.py [--repeat N]``.
Uses the real SqueezeNet checkpoint in ../shared; writes only to a temp folder.
Prints one line per measurement: the median in ms and the ratio to the reference.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.paths import MMS_VENV, SQUEEZENET_DIR  # noqa: E402


def _median_ms(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def _inflate_ms(work: Path, repeat: int) -> tuple[float, float]:
    """Extracting a resnet-18 archive (random weights, 47 MB deflated): ISA-L's inflate, as mmsctl
    extracts, against zipfile's zlib on the same archive."""
    import shutil

    from mmsctl.archive import create_archive, inflate
    from mmsctl.archive.unpack import detect_format, extract_into
    from mmsctl.zoo.untrained import build_checkpoint

    mar = create_archive(build_checkpoint("resnet-18", work / "resnet-18"), export_path=work / "r", force=True).path

    def extract() -> None:
        shutil.rmtree(extract_into(mar, detect_format(mar), work / "x"))

    ours = _median_ms(extract, repeat)
    fast, inflate._fast_zlib = inflate._fast_zlib, None  # zipfile's own reader
    try:
        ref = _median_ms(extract, repeat)
    finally:
        inflate._fast_zlib = fast
    return ours, ref


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if not SQUEEZENET_DIR.exists():
        sys.exit(f"test data not found: {SQUEEZENET_DIR}")
    archiver = MMS_VENV / "bin" / "model-archiver"
    mmsctl = REPO / ".venv" / "bin" / "mmsctl"
    results = {}
    with tempfile.TemporaryDirectory(prefix="mmsctl-bench-") as tmp:
        work = Path(tmp)
        import os

        os.environ["MMSCTL_CACHE_DIR"] = str(work / "cache")
        # model-archiver needs the handler file in the folder: give both tools the same input
        src = work / "squeezenet"
        src.mkdir()
        for item in SQUEEZENET_DIR.iterdir():
            (src / item.name).symlink_to(item)
        from mmsctl.engine.builtin import VISION_HANDLER, VISION_HANDLER_FILE

        (src / "mmsctl_vision_service.py").write_bytes(VISION_HANDLER_FILE.read_bytes())

        ours_cli = _median_ms(lambda: subprocess.run(
            [str(mmsctl), "-q", "archive", "create", str(src), "--export-path", str(work / "a"), "--force"],
            check=True, capture_output=True), args.repeat)
        results["create (CLI, squeezenet .mar)"] = (ours_cli, None)
        if archiver.exists():
            ref_cli = _median_ms(lambda: subprocess.run(
                [str(archiver), "--model-name", "squeezenet", "--model-path", str(src), "--handler", VISION_HANDLER,
                 "--export-path", str(work), "-f"], check=True, capture_output=True), args.repeat)
            results["create (CLI, squeezenet .mar)"] = (ours_cli, ref_cli)

        from mmsctl.archive import create_archive, open_archive

        mar = create_archive(src, export_path=work / "b", force=True).path
        results["create_archive (in-process)"] = (
            _median_ms(lambda: create_archive(src, export_path=work / "b", force=True), args.repeat), None)

        def cold() -> None:
            import shutil

            shutil.rmtree(work / "cache", ignore_errors=True)
            open_archive(mar)

        results["open_archive cold (extract)"] = (_median_ms(cold, args.repeat), None)
        open_archive(mar)
        results["open_archive warm (cached)"] = (_median_ms(lambda: open_archive(mar), args.repeat * 20), None)

        results["extract resnet-18 .mar (47 MB), ISA-L vs zlib"] = _inflate_ms(work, args.repeat)

    for name, (ours, ref) in results.items():
        ratio = f"{ours / ref:.2f}x" if ref else "-"
        ref_text = f"{ref:8.1f} ms" if ref else "       -   "
        reference = "zlib" if "zlib" in name else "model-archiver"
        print(f"{name:46s} mmsctl {ours:8.1f} ms   {reference} {ref_text}   ratio {ratio}")
    print(json.dumps({k: {"mmsctl_ms": v[0], "reference_ms": v[1]} for k, v in results.items()}))


if __name__ == "__main__":
    main()
