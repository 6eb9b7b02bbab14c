"""download(): which failures are tried again, how long it waits (the sleep is injected), what is left."""

from __future__ import annotations

from pathlib import Path

import pytest

from mmsctl.errors import DownloadError
from mmsctl.zoo.download import DownloadOptions, download
from tests.support.http_mirror import Mirror


def _fetch(mirror: Mirror, name: str, tmp_path: Path, retries: int = 2) -> tuple[Path, list[float]]:
    sleeps: list[float] = []
    target = tmp_path / "cache" / name
    options = DownloadOptions(retries=retries, progress=False)
    return download(mirror.url_for(name), target, options=options, sleep=sleeps.append), sleeps


def test_transient_statuses_are_retried_with_doubling_backoff(
    http_mirror: Mirror, mirror_dir: Path, tmp_path: Path
) -> None:
    http_mirror.fail["resnet-18.mar"] = [503, 429]
    path, sleeps = _fetch(http_mirror, "resnet-18.mar", tmp_path)
    assert path.read_bytes() == (mirror_dir / "resnet-18.mar").read_bytes()
    assert http_mirror.requests == ["resnet-18.mar"] * 3
    assert sleeps == pytest.approx([0.5, 1.0])


def test_a_cut_connection_is_retried(http_mirror: Mirror, mirror_dir: Path, tmp_path: Path) -> None:
    http_mirror.truncate["resnet-18.mar"] = 10_000
    sleeps: list[float] = []
    target = tmp_path / "cache" / "resnet-18.mar"
    with pytest.raises(DownloadError, match=r"connection closed early.*\(after 2 attempts\)"):
        download(http_mirror.url_for("resnet-18.mar"), target,
                 options=DownloadOptions(retries=1, progress=False), sleep=sleeps.append)
    assert http_mirror.requests == ["resnet-18.mar"] * 2 and sleeps == pytest.approx([0.5])
    assert list(target.parent.iterdir()) == []  # no .part file left behind


def test_giving_up_names_the_last_error_and_the_attempts(http_mirror: Mirror, tmp_path: Path) -> None:
    http_mirror.fail["resnet-18.mar"] = [500, 502, 504]
    with pytest.raises(DownloadError) as info:
        _fetch(http_mirror, "resnet-18.mar", tmp_path)
    assert info.value.message.startswith("download failed: HTTP 504")
    assert info.value.message.endswith("(after 3 attempts)")
    assert http_mirror.requests == ["resnet-18.mar"] * 3


def test_a_final_status_is_not_retried(http_mirror: Mirror, tmp_path: Path) -> None:
    http_mirror.fail["resnet-18.mar"] = [403]
    with pytest.raises(DownloadError) as info:
        _fetch(http_mirror, "resnet-18.mar", tmp_path)
    assert "HTTP 403" in info.value.message and "attempts" not in info.value.message
    assert http_mirror.requests == ["resnet-18.mar"]
