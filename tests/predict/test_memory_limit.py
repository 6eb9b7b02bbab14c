"""``mmsctl predict`` under ``MMSCTL_MAX_MODEL_MEMORY``: a network over it is one error line and exit 1,
whether the model runs in this process or in worker processes; under it, predictions come back."""

from __future__ import annotations

from pathlib import Path

import pytest

from mmsctl.engine.memory import check_network
from mmsctl.errors import EngineError
from tests.engine.helpers import build_tiny_checkpoint, png_bytes
from tests.support.cli import one_error_line, run_mmsctl


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return build_tiny_checkpoint(tmp_path / "tiny")


@pytest.fixture
def images(tmp_path: Path) -> Path:
    folder = tmp_path / "images"
    folder.mkdir()
    for i in range(2):
        (folder / f"img{i}.png").write_bytes(png_bytes(i))
    return folder


@pytest.mark.parametrize("workers", [None, "2"], ids=["in-process", "pool"])
def test_a_network_over_the_limit_is_one_error_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tiny: Path, images: Path,
    workers: str | None,
) -> None:
    needed = check_network(str(tiny / "tiny-symbol.json"), "data", (1, 3, 16, 16), 2**30)
    monkeypatch.setenv("MMSCTL_MAX_MODEL_MEMORY", str(needed - 1))
    args = ["predict", str(tiny), str(images), "-b", "1"] + (["--workers", workers] if workers else [])
    result = run_mmsctl(capsys, *args)
    assert result.code == EngineError.exit_code != 0
    line = one_error_line(result)
    assert f"needs {needed} bytes" in line and f"limit of {needed - 1} bytes" in line
    assert "MMSCTL_MAX_MODEL_MEMORY" in line
    if workers is None:  # at the limit itself it runs
        monkeypatch.setenv("MMSCTL_MAX_MODEL_MEMORY", str(needed))
        code, out, _ = run_mmsctl(capsys, *args, "-o", "jsonl")
        assert code == 0 and len(out.splitlines()) == 2
