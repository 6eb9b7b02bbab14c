"""Where the no-op archive comes from for each kind of target, without a server."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import httpx
import pytest

from mmsctl.loadtest.noop import ArchiveServer, build_noop_archive, is_loopback, noop_model
from mmsctl.client.contexts import Context
from mmsctl.errors import UsageError


@pytest.mark.parametrize("url, local", [
    ("http://127.0.0.1:8081", True), ("http://localhost:8081", True), ("http://[::1]:8081", True),
    ("http://127.8.0.3:8081", True), ("http://10.0.0.5:8081", False), ("https://models.example", False),
])
def test_loopback_targets(url: str, local: bool) -> None:
    assert is_loopback(url) is local


def test_a_remote_target_needs_noop_url_before_anything_is_sent(tmp_path: Path) -> None:
    remote = Context("far", "http://192.0.2.1:8080", "http://192.0.2.1:8081")
    with pytest.raises(UsageError, match="needs the archive's location") as info:
        with noop_model(remote, "mms", name="x", archive_dir=tmp_path):
            pass
    assert info.value.param == "location" and "mmsctl-noop.mar" in (info.value.hint or "")
    assert list(tmp_path.iterdir()) == []
    from mmsctl.cli.bench import _RUN_WORDS  # what `bench --noop` prints for it

    _RUN_WORDS.reword(info.value)
    assert info.value.message.endswith("needs the archive's location (--noop-url)")
    assert (info.value.hint or "").startswith("write the archive with `mmsctl bench noop-archive DIR`, copy it into "
                                              "the server's model store and pass --noop-url mmsctl-noop.mar")


def test_the_archive_server_serves_one_file_at_an_unguessable_path(tmp_path: Path) -> None:
    archive = build_noop_archive(tmp_path)
    with zipfile.ZipFile(archive) as zf:
        assert json.loads(zf.read("MAR-INF/MANIFEST.json"))["runtime"] == "python"
    with ArchiveServer(archive, "run-1.mar") as served:
        assert served.url.startswith("http://127.0.0.1:") and served.url.endswith("/run-1.mar")
        assert httpx.get(served.url).content == archive.read_bytes()
        base = served.url.rsplit("/", 2)[0]
        assert httpx.get(base + "/run-1.mar").status_code == 404
        assert httpx.get(served.url + "x").status_code == 404
