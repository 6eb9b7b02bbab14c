"""resolve_model: every location form, the cache, mirrors (HTTP and folder), offline."""

from __future__ import annotations

import socket
import tarfile
from pathlib import Path

import pytest

from mmsctl.errors import (
    DownloadError,
    InputNotFoundError,
    ModelNotFoundError,
    OfflineError,
    UsageError,
)
from mmsctl.zoo import cache, resolve_model
from mmsctl.zoo.resolve import cached_model, pull_model
from tests.support.http_mirror import Mirror
from tests.zoo.conftest import cached_files

# --- local locations --------------------------------------------------------------------------


def test_local_mar_file(tmp_path: Path) -> None:
    mar = tmp_path / "my-model.mar"
    mar.write_bytes(b"x")
    model = resolve_model(str(mar))
    assert (model.name, model.path, model.source) == ("my-model", mar, "local")


def test_local_folder_tgz_and_legacy_model(tmp_path: Path) -> None:
    folder = tmp_path / "extracted"
    folder.mkdir()
    assert resolve_model(str(folder)).name == "extracted"
    tgz = tmp_path / "packed.tar.gz"
    with tarfile.open(tgz, "w:gz"):
        pass
    assert resolve_model(str(tgz)).name == "packed"
    legacy = tmp_path / "old.model"
    legacy.write_bytes(b"x")
    assert resolve_model(str(legacy)).name == "old"


def test_file_url(tmp_path: Path) -> None:
    mar = tmp_path / "f.mar"
    mar.write_bytes(b"x")
    model = resolve_model(mar.as_uri())
    assert model.path == mar and model.source == "local"


def test_name_equals_location_gives_the_name(tmp_path: Path, mirror_dir: Path, monkeypatch) -> None:
    mar = tmp_path / "whatever.mar"
    mar.write_bytes(b"x")
    model = resolve_model(f"kitty={mar}")
    assert (model.name, model.path) == ("kitty", mar)
    monkeypatch.setenv("MMSCTL_ZOO_URL", str(mirror_dir))
    zoo = resolve_model("sq=squeezenet")
    assert zoo.name == "sq" and zoo.path == mirror_dir / "squeezenet_v1.1.mar"


@pytest.mark.parametrize("location", ["./missing.mar", "missing.mar", "/no/such/folder", "a=./gone.tar.gz"])
def test_missing_paths_are_one_line_not_found(location: str) -> None:
    with pytest.raises(InputNotFoundError) as info:
        resolve_model(location)
    assert "no such file or folder" in info.value.message


def test_empty_location_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        resolve_model("  ")


def test_unknown_name_suggests_close_names() -> None:
    with pytest.raises(ModelNotFoundError) as info:
        resolve_model("resnet-19")
    assert "did you mean 'resnet-18'" in info.value.message


# --- offline ----------------------------------------------------------------------------------


def test_offline_and_not_cached_says_how_to_use_a_mirror() -> None:
    with pytest.raises(OfflineError) as info:
        resolve_model("squeezenet")  # conftest sets MMSCTL_OFFLINE=1
    message = info.value.message
    assert "not cached" in message and "offline" in message
    assert "MMSCTL_ZOO_URL" in message and "squeezenet_v1.1.mar" in message
    assert "\n" not in message


def test_offline_url_not_cached() -> None:
    with pytest.raises(OfflineError):
        resolve_model("http://127.0.0.1:9/x.mar")


# --- folder mirror ----------------------------------------------------------------------------


def test_folder_mirror_is_used_in_place_even_offline(mirror_dir: Path, monkeypatch) -> None:
    monkeypatch.setenv("MMSCTL_ZOO_URL", str(mirror_dir))
    model = resolve_model("SqueezeNet")
    assert (model.name, model.source, model.path) == ("squeezenet_v1.1", "mirror", mirror_dir / "squeezenet_v1.1.mar")
    assert cached_files() == []
    # A site model outside the catalog is found on the mirror too; file:// works as well.
    monkeypatch.setenv("MMSCTL_ZOO_URL", mirror_dir.as_uri())
    assert resolve_model("sitemodel").path == mirror_dir / "sitemodel.mar"


def test_folder_mirror_without_the_model(mirror_dir: Path, monkeypatch) -> None:
    monkeypatch.setenv("MMSCTL_ZOO_URL", str(mirror_dir))
    with pytest.raises(ModelNotFoundError) as info:
        resolve_model("nin")
    assert "nin.mar is not in the mirror folder" in info.value.message
    with pytest.raises(ModelNotFoundError) as info:
        resolve_model("squeezent")
    assert "did you mean" in info.value.message


# --- HTTP mirror, downloads and the cache -----------------------------------------------------


def test_http_mirror_downloads_into_the_cache_then_reuses_it_offline(
    http_mirror: Mirror, mirror_dir: Path, monkeypatch
) -> None:
    model = resolve_model("squeezenet", progress=False)
    assert model.source == "download"
    assert model.path == cache.zoo_path("squeezenet_v1.1.mar")
    assert model.path.read_bytes() == (mirror_dir / "squeezenet_v1.1.mar").read_bytes()
    assert http_mirror.requests == ["squeezenet_v1.1.mar"]
    assert cache.read_meta(model.path)["url"] == http_mirror.url + "squeezenet_v1.1.mar"

    monkeypatch.setenv("MMSCTL_OFFLINE", "1")
    again = resolve_model("squeezenet_v1.1")
    assert (again.source, again.path) == ("cache", model.path)
    assert http_mirror.requests == ["squeezenet_v1.1.mar"]  # no second request
    assert cached_model("squeezenet") is not None


def test_explicit_url_is_cached_by_url(http_mirror: Mirror, monkeypatch) -> None:
    url = http_mirror.url + "resnet-18.mar"
    model = resolve_model(url, progress=False)
    assert (model.name, model.source) == ("resnet-18", "download")
    assert model.path.name == "resnet-18.mar" and "urls" in model.path.parts
    monkeypatch.setenv("MMSCTL_OFFLINE", "1")
    assert resolve_model(url).source == "cache"
    assert resolve_model(f"r18={url}").name == "r18"


def test_pull_force_downloads_again(http_mirror: Mirror) -> None:
    pull_model("resnet-18", progress=False)
    again = pull_model("resnet-18", progress=False, force=True)
    assert again.source == "download"
    assert http_mirror.requests == ["resnet-18.mar", "resnet-18.mar"]


def test_site_model_from_http_mirror(http_mirror: Mirror) -> None:
    assert resolve_model("sitemodel", progress=False).path.read_bytes().endswith(b"site archive")
    with pytest.raises(ModelNotFoundError) as info:
        resolve_model("squeezent", progress=False)
    assert "did you mean 'squeezenet'" in info.value.message


def test_a_page_that_is_not_an_archive_is_refused(http_mirror: Mirror) -> None:
    with pytest.raises(DownloadError) as info:
        resolve_model("portal", progress=False)
    assert "did not return a model archive (got application/octet-stream)" in info.value.message
    assert cached_files() == []


def test_http_404_is_one_line(http_mirror: Mirror) -> None:
    with pytest.raises(DownloadError) as info:
        resolve_model("nin", progress=False)
    assert "HTTP 404" in info.value.message and "nin.mar" in info.value.message
    assert "\n" not in info.value.message
    assert cached_files() == []


def test_http_500_is_retried_then_succeeds(http_mirror: Mirror, monkeypatch) -> None:
    monkeypatch.setenv("MMSCTL_ZOO_RETRIES", "2")
    http_mirror.fail["resnet-18.mar"] = [503, 500]
    import mmsctl.zoo.download as download

    monkeypatch.setattr(download.DownloadOptions, "__init__", _no_backoff(download.DownloadOptions.__init__))
    model = resolve_model("resnet-18", progress=False)
    assert model.source == "download"
    assert http_mirror.requests == ["resnet-18.mar"] * 3


def _no_backoff(init):  # type: ignore[no-untyped-def]
    def patched(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        init(self, *args, **kwargs)
        object.__setattr__(self, "backoff", 0.0)

    return patched


def test_http_500_that_persists_is_one_line(http_mirror: Mirror) -> None:
    http_mirror.fail["resnet-18.mar"] = [500]
    with pytest.raises(DownloadError) as info:
        resolve_model("resnet-18", progress=False)
    assert "HTTP 500" in info.value.message
    assert cached_files() == []


def test_cut_connection_leaves_nothing_in_the_cache(http_mirror: Mirror) -> None:
    http_mirror.truncate["squeezenet_v1.1.mar"] = 70_000
    with pytest.raises(DownloadError) as info:
        resolve_model("squeezenet", progress=False)
    assert "connection closed early" in info.value.message
    assert "of 200000 bytes" in info.value.message
    assert cached_files() == []


def test_connection_refused_is_one_line(monkeypatch) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("MMSCTL_OFFLINE", "0")
    monkeypatch.setenv("MMSCTL_ZOO_RETRIES", "0")
    monkeypatch.setenv("MMSCTL_ZOO_URL", f"http://127.0.0.1:{port}/")
    with pytest.raises(DownloadError) as info:
        resolve_model("squeezenet", progress=False)
    assert "connection refused" in info.value.message
    assert f"127.0.0.1:{port}" in info.value.message


def test_unreachable_network_detection() -> None:
    from mmsctl.zoo.download import _unreachable

    try:
        try:
            raise socket.gaierror(-2, "Name or service not known")
        except socket.gaierror as inner:
            raise ConnectionError("connect failed") from inner
    except ConnectionError as exc:
        assert _unreachable(exc)
    assert not _unreachable(ConnectionRefusedError(111, "Connection refused"))
