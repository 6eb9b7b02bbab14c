"""open_archive: every input kind, the extraction cache, legacy .model files, bad manifests."""

from __future__ import annotations

import json
import os
import threading
import zipfile
from pathlib import Path

import pytest

from mmsctl.archive import create_archive, describe_archive, open_archive
from mmsctl.errors import ArchiveError

LEGACY = {
    "Engine": {"MXNet": 1.2},
    "Model-Archive-Version": 0.2,
    "Model-Server": 0.4,
    "Model": {
        "Model-Name": "old",
        "Service": "old_service.py",
        "Symbol": "old-symbol.json",
        "Parameters": "old-0000.params",
        "Signature": "sig.json",
    },
}


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


@pytest.fixture
def tiny_mar(tiny_checkpoint: Path, tmp_path: Path) -> Path:
    return create_archive(tiny_checkpoint, model_name="tiny", export_path=tmp_path / "store").path


def test_mar_is_extracted_into_the_cache_once(tiny_mar: Path) -> None:
    first = open_archive(tiny_mar)
    cache = Path(os.environ["MMSCTL_CACHE_DIR"]) / "extracted"
    assert first.root.parent == cache
    assert first.format == "mar"
    assert first.model_name == "tiny"
    assert first.signature == {"inputs": [{"data_name": "data", "data_shape": [0, 3, 16, 16]}]}
    marker = first.root / "left-by-test"
    marker.write_text("x")
    second = open_archive(tiny_mar)
    assert second.root == first.root and marker.exists()  # reused, not extracted again
    assert [p.name for p in cache.iterdir()] == [first.root.name]


def test_a_changed_archive_is_extracted_again(tiny_mar: Path, tiny_checkpoint: Path) -> None:
    first = open_archive(tiny_mar)
    create_archive(tiny_checkpoint, model_name="tiny", export_path=tiny_mar.parent, force=True, description="v2")
    os.utime(tiny_mar, ns=(1, 1))  # a different mtime, whatever the clock's resolution
    second = open_archive(tiny_mar)
    assert second.root != first.root
    assert second.manifest.description == "v2"


def test_concurrent_opens_agree(tiny_mar: Path) -> None:
    roots: list[Path] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            roots.append(open_archive(tiny_mar).root)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(set(roots)) == 1
    cache = roots[0].parent
    assert [p.name for p in cache.iterdir()] == [roots[0].name]  # no temp folders left


def test_files_lists_the_archive(tiny_mar: Path) -> None:
    files = {f.path: f.size for f in open_archive(tiny_mar).files()}
    assert set(files) == {
        "MAR-INF/MANIFEST.json", "mmsctl_vision_service.py", "signature.json", "synset.txt",
        "tiny-0000.params", "tiny-symbol.json",
    }
    assert files["synset.txt"] == len("n0 alpha\nn1 beta\nn2 gamma\nn3 delta\n")


def test_workdir_is_used_and_reused(tiny_mar: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    archive = open_archive(tiny_mar, workdir=work)
    assert archive.root == work
    assert (work / "tiny-symbol.json").is_file()
    assert open_archive(tiny_mar, workdir=work).root == work
    other = tmp_path / "busy"
    other.mkdir()
    (other / "x").write_text("x")
    with pytest.raises(ArchiveError, match="not empty"):
        open_archive(tiny_mar, workdir=other)


def test_folder_is_used_in_place(tiny_checkpoint: Path) -> None:
    archive = open_archive(tiny_checkpoint)
    assert archive.root == tiny_checkpoint
    assert archive.format == "folder"
    assert archive.has_manifest is False
    assert archive.model_name == "tiny_net"
    assert archive.handler is None


def test_legacy_model_file(tmp_path: Path) -> None:
    sig = {"inputs": [{"data_name": "data", "data_shape": [1, 3, 224, 224]}]}
    path = _zip(tmp_path / "old.model", {
        "MANIFEST.json": json.dumps(LEGACY).encode(),
        "old_service.py": b"",
        "sig.json": json.dumps(sig).encode(),
    })
    archive = open_archive(path)
    assert archive.format == "legacy"
    assert archive.manifest.legacy is True
    assert archive.model_name == "old"
    assert archive.handler == "old_service"
    assert archive.signature == sig
    info = describe_archive(path)
    assert (info.format, info.manifest.legacy, info.signature) == ("legacy", True, sig)


def test_legacy_model_inside_a_folder(tmp_path: Path) -> None:
    path = _zip(tmp_path / "old.model", {"old/MANIFEST.json": json.dumps(LEGACY).encode(), "old/old_service.py": b""})
    archive = open_archive(path)
    assert archive.root.name == "old"
    assert (archive.root / "old_service.py").is_file()
    assert archive.model_name == "old"


def test_zip_without_manifest_is_named_after_the_file(tmp_path: Path) -> None:
    archive = open_archive(_zip(tmp_path / "bare.mar", {"handler.py": b""}))
    assert archive.model_name == "bare"
    assert archive.has_manifest is False


@pytest.mark.parametrize(
    "members, message",
    [
        ({"MAR-INF/MANIFEST.json": b"{oops"}, r"MAR-INF/MANIFEST.json: not valid JSON"),
        ({"MAR-INF/MANIFEST.json": b'{"runtime": "python"}'}, "no 'model' section"),
        ({"MANIFEST.json": b'{"Model": {}}'}, "no model name"),
        ({"MAR-INF/MANIFEST.json": b'{"model": {"modelName": "x"}}', "signature.json": b"[]"}, "not a JSON object"),
    ],
)
def test_bad_manifest_or_signature(tmp_path: Path, members: dict[str, bytes], message: str) -> None:
    path = _zip(tmp_path / "bad.mar", members)
    with pytest.raises(ArchiveError, match=message):
        open_archive(path).signature
    with pytest.raises(ArchiveError, match=message):
        describe_archive(path)


def test_describe_matches_open_for_every_format(tiny_checkpoint: Path, tmp_path: Path) -> None:
    for fmt in ("default", "tgz", "no-archive"):
        created = create_archive(tiny_checkpoint, model_name="tiny", export_path=tmp_path / fmt, archive_format=fmt)
        info = describe_archive(created.path)
        opened = open_archive(created.path)
        assert info.manifest.to_dict() == opened.manifest.to_dict()
        assert [(f.path, f.size) for f in info.files] == [(f.path, f.size) for f in opened.files()]
        assert info.signature == opened.signature
