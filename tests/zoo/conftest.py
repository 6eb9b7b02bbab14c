"""Fixtures for the zoo tests: a folder of fake archives, served over real HTTP on 127.0.0.1."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.http_mirror import Mirror, serving_folder


ZIP = b"PK\x03\x04"  # what a .mar starts with


@pytest.fixture
def mirror_dir(tmp_path: Path) -> Path:
    """A mirror folder with a few archives (their bytes are not read by the resolver)."""
    folder = tmp_path / "mirror"
    folder.mkdir()
    (folder / "squeezenet_v1.1.mar").write_bytes(ZIP + os.urandom(200_000 - len(ZIP)))
    (folder / "resnet-18.mar").write_bytes(ZIP + os.urandom(50_000 - len(ZIP)))
    (folder / "sitemodel.mar").write_bytes(ZIP + b"site archive")
    (folder / "portal.mar").write_bytes(b"<html>please log in</html>")
    return folder


@pytest.fixture
def http_mirror(mirror_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Mirror]:
    """The mirror folder over HTTP, set as MMSCTL_ZOO_URL, online, with fast retries."""
    with serving_folder(mirror_dir) as mirror:
        monkeypatch.setenv("MMSCTL_OFFLINE", "0")
        monkeypatch.setenv("MMSCTL_ZOO_URL", mirror.url)
        monkeypatch.setenv("MMSCTL_ZOO_RETRIES", "0")
        yield mirror


def cached_files() -> list[Path]:
    """Everything under the archive cache, hidden files included."""
    root = Path(os.environ["MMSCTL_CACHE_DIR"]) / "archives"
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []
