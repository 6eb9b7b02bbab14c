"""`mmsctl predict DIR` on the real SqueezeNet: the worker pool, with the measured kernel set and
batch size, gives the same top-1 classes as one process; the choice is measured once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mmsctl.predict.pool import POOL_MIN_INPUTS


def _images(folder: Path, kitten: Path, count: int) -> Path:
    from PIL import Image

    folder.mkdir()
    base = Image.open(kitten).convert("RGB")
    w, h = base.size
    for i in range(count):
        img = base.crop((i % 9, i % 7, w - (8 - i % 9), h - (6 - i % 7)))
        if i % 2:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        img.rotate(15 * (i % 24)).save(folder / f"img{i:03d}.jpg", quality=90)
    return folder


def _top1(*args: str) -> list[tuple[str, str]]:
    done = subprocess.run([sys.executable, "-m", "mmsctl", "predict", *args, "-o", "jsonl"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    return [(r["input"], r["result"][0]["class"]) for r in rows]


@pytest.mark.slow
def test_the_pool_gives_the_same_top1_as_one_process(tmp_path: Path, squeezenet_dir: Path, kitten_jpg: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MMSCTL_MKLDNN", "auto")
    folder = _images(tmp_path / "images", kitten_jpg, POOL_MIN_INPUTS)
    pooled = _top1(str(squeezenet_dir), str(folder))  # one worker per core, the measured batch size
    choices = Path(os.environ["MMSCTL_CACHE_DIR"]) / "kernels" / "choices.json"
    entries = json.loads(choices.read_text())
    assert len(entries) == 1 and next(iter(entries.values()))["batch"] in (1, 4)
    # One process with one thread: the same key (model, threads, CPU, mxnet), so no second measurement.
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    single = _top1(str(squeezenet_dir), str(folder), "--workers", "1", "--batch-size", "1")
    assert len(pooled) == POOL_MIN_INPUTS and pooled == single
    assert json.loads(choices.read_text()) == entries  # measured once, remembered
