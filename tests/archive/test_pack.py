"""create_archive: layouts of the three formats, the built-in handler, --force, and bad input."""

from __future__ import annotations

import json
import tarfile
import zipfile
from pathlib import Path

import pytest

from mmsctl.archive import create_archive, open_archive
from mmsctl.engine.builtin import VISION_HANDLER, VISION_HANDLER_FILE
from mmsctl.errors import AlreadyExistsError, ArchiveError, InputNotFoundError, NoCheckpointError, UsageError


def test_checkpoint_folder_becomes_a_mar_with_the_builtin_handler(tiny_checkpoint: Path, tmp_path: Path) -> None:
    result = create_archive(tiny_checkpoint, model_name="tiny", export_path=tmp_path / "store")
    assert result.path == tmp_path / "store" / "tiny.mar"
    with zipfile.ZipFile(result.path) as zf:
        names = zf.namelist()
        manifest = json.loads(zf.read("MAR-INF/MANIFEST.json"))
        handler_source = zf.read("mmsctl_vision_service.py")
    assert names == sorted(names)
    assert set(names) == {
        "MAR-INF/MANIFEST.json",
        "mmsctl_vision_service.py",
        "signature.json",
        "synset.txt",
        "tiny-0000.params",
        "tiny-symbol.json",
    }
    assert handler_source == VISION_HANDLER_FILE.read_bytes()
    assert manifest["model"] == {"modelName": "tiny", "handler": VISION_HANDLER, "modelVersion": "1.0"}
    assert manifest["runtime"] == "python"
    assert manifest["specificationVersion"] == "1.0"
    assert result.warnings == []


def test_checkpoint_is_renamed_after_the_model_and_the_latest_epoch_kept(tmp_path: Path) -> None:
    from tests.archive.conftest import build_tiny_checkpoint

    folder = build_tiny_checkpoint(tmp_path / "ckpt", prefix="net", epochs=(3, 12))
    result = create_archive(folder, model_name="renamed", export_path=tmp_path)
    names = {f.path for f in result.files}
    assert {"renamed-symbol.json", "renamed-0000.params"} <= names
    assert not any(n.startswith("net-") for n in names)
    with zipfile.ZipFile(result.path) as zf:
        assert zf.read("renamed-0000.params") == (folder / "net-0012.params").read_bytes()


def test_archives_are_reproducible(tiny_checkpoint: Path, tmp_path: Path) -> None:
    first = create_archive(tiny_checkpoint, export_path=tmp_path / "a").path.read_bytes()
    (tiny_checkpoint / "synset.txt").touch()  # a new mtime must not change the bytes
    second = create_archive(tiny_checkpoint, export_path=tmp_path / "b").path.read_bytes()
    assert first == second
    first_tgz = create_archive(tiny_checkpoint, export_path=tmp_path / "a", archive_format="tgz").path.read_bytes()
    second_tgz = create_archive(tiny_checkpoint, export_path=tmp_path / "b", archive_format="tgz").path.read_bytes()
    assert first_tgz == second_tgz


def test_tgz_keeps_files_under_the_model_name_like_model_archiver(tiny_checkpoint: Path, tmp_path: Path) -> None:
    result = create_archive(tiny_checkpoint, model_name="tiny", export_path=tmp_path, archive_format="tgz")
    assert result.path.name == "tiny.tar.gz"
    with tarfile.open(result.path) as tf:
        names = tf.getnames()
        assert all(m.isreg() and m.mtime == 0 for m in tf.getmembers())
    assert "tiny/MAR-INF/MANIFEST.json" in names
    assert all(n.startswith("tiny/") for n in names)
    archive = open_archive(result.path)
    assert archive.model_name == "tiny"
    assert (archive.root / "tiny-symbol.json").is_file()


def test_no_archive_writes_a_folder(tiny_checkpoint: Path, tmp_path: Path) -> None:
    result = create_archive(tiny_checkpoint, model_name="tiny", export_path=tmp_path, archive_format="no-archive")
    assert result.path == tmp_path / "tiny"
    assert json.loads((result.path / "MAR-INF" / "MANIFEST.json").read_text())["model"]["modelName"] == "tiny"
    assert (result.path / "mmsctl_vision_service.py").is_file()
    assert open_archive(result.path).handler == VISION_HANDLER


@pytest.mark.parametrize("fmt, name", [("default", "tiny.mar"), ("tgz", "tiny.tar.gz"), ("no-archive", "tiny")])
def test_existing_output_needs_force(tiny_checkpoint: Path, tmp_path: Path, fmt: str, name: str) -> None:
    create_archive(tiny_checkpoint, model_name="tiny", export_path=tmp_path, archive_format=fmt)
    with pytest.raises(AlreadyExistsError, match="already exists") as info:
        create_archive(tiny_checkpoint, model_name="tiny", export_path=tmp_path, archive_format=fmt)
    assert isinstance(info.value, ArchiveError) and "force=True" in (info.value.hint or "")  # the CLI says --force
    result = create_archive(
        tiny_checkpoint, model_name="tiny", export_path=tmp_path, archive_format=fmt, force=True,
        description="second",
    )
    assert result.path == tmp_path / name
    assert open_archive(result.path).manifest.description == "second"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temp leftovers


def test_own_handler_and_extra_files(tmp_path: Path) -> None:
    model = tmp_path / "echo"
    model.mkdir()
    (model / "echo_service.py").write_text("def handle(data, context):\n    return data\n")
    (model / "__pycache__").mkdir()
    (model / "__pycache__" / "echo_service.cpython-311.pyc").write_bytes(b"x")
    (model / ".git").mkdir()
    (model / ".git" / "config").write_text("x")
    (model / "old.mar").write_bytes(b"x")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("a\nb\n")
    assets = tmp_path / "assets"
    (assets / "sub").mkdir(parents=True)
    (assets / "sub" / "x.bin").write_bytes(b"123")
    result = create_archive(
        model, handler="echo_service:handle", extra_files=[vocab, assets], export_path=tmp_path / "out",
        model_version="2.1", runtime="python3",
    )
    assert [f.path for f in result.files] == [
        "MAR-INF/MANIFEST.json", "assets/sub/x.bin", "echo_service.py", "vocab.txt",
    ]
    manifest = open_archive(result.path).manifest
    assert (manifest.model_name, manifest.handler, manifest.model_version, manifest.runtime) == (
        "echo", "echo_service:handle", "2.1", "python3",
    )
    assert manifest.engine is None
    assert result.warnings == []


def test_handler_module_missing_from_the_archive_is_a_warning(tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"x")
    result = create_archive(model, handler="nowhere:handle", export_path=tmp_path)
    assert any("nowhere.py" in w for w in result.warnings)
    # an installed module (MMS's legacy services) is fine
    assert create_archive(
        model, handler="mms.model_service.mxnet_vision_service:handle", export_path=tmp_path, force=True
    ).warnings == []


def test_archive_written_into_the_model_folder_is_not_packed_into_itself(tiny_checkpoint: Path) -> None:
    create_archive(tiny_checkpoint, model_name="tiny", export_path=tiny_checkpoint, archive_format="tgz")
    again = create_archive(tiny_checkpoint, model_name="tiny", export_path=tiny_checkpoint, archive_format="tgz", force=True)
    assert not any(f.path.endswith(".tar.gz") for f in again.files)


def test_missing_synset_is_a_warning_and_synset_option_adds_it(tiny_checkpoint: Path, tmp_path: Path) -> None:
    labels = tmp_path / "labels.txt"
    labels.write_text("a\nb\nc\nd\n")
    (tiny_checkpoint / "synset.txt").unlink()
    assert any("synset" in w for w in create_archive(tiny_checkpoint, export_path=tmp_path).warnings)
    result = create_archive(tiny_checkpoint, export_path=tmp_path, synset=labels, force=True)
    with zipfile.ZipFile(result.path) as zf:
        assert zf.read("synset.txt") == b"a\nb\nc\nd\n"


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(InputNotFoundError, match="no such folder"):
        create_archive(tmp_path / "nope", export_path=tmp_path)


def test_file_instead_of_folder(tmp_path: Path) -> None:
    onnx = tmp_path / "model.onnx"
    onnx.write_bytes(b"x")
    with pytest.raises(UsageError, match="not a folder") as info:
        create_archive(onnx, export_path=tmp_path)
    assert info.value.hint and "import_onnx" in info.value.hint and info.value.param == "model_path"


def test_folder_without_symbol_file(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "signature.json").write_text("{}")
    with pytest.raises(ArchiveError, match=r"no MXNet symbol file") as info:
        create_archive(tmp_path / "m", export_path=tmp_path)
    assert isinstance(info.value, NoCheckpointError) and "handler" in (info.value.hint or "")


def test_symbol_without_params(tiny_checkpoint: Path, tmp_path: Path) -> None:
    for p in tiny_checkpoint.glob("*.params"):
        p.unlink()
    with pytest.raises(ArchiveError, match=r"no parameters file tiny-NNNN\.params"):
        create_archive(tiny_checkpoint, export_path=tmp_path)


def test_two_checkpoints_in_one_folder(tiny_checkpoint: Path, tmp_path: Path) -> None:
    (tiny_checkpoint / "other-symbol.json").write_text("{}")
    with pytest.raises(ArchiveError, match="more than one symbol file"):
        create_archive(tiny_checkpoint, export_path=tmp_path)


def test_missing_or_bad_signature(tiny_checkpoint: Path, tmp_path: Path) -> None:
    sig = tiny_checkpoint / "signature.json"
    sig.write_text('{"inputs": []}')
    with pytest.raises(ArchiveError, match="expected"):
        create_archive(tiny_checkpoint, export_path=tmp_path)
    sig.write_text("{oops")
    with pytest.raises(ArchiveError, match="not valid JSON"):
        create_archive(tiny_checkpoint, export_path=tmp_path)
    sig.unlink()
    with pytest.raises(ArchiveError, match="no signature.json") as info:
        create_archive(tiny_checkpoint, export_path=tmp_path)
    assert info.value.hint and "data_shape" in info.value.hint


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"archive_format": "zip"}, "unknown archive format"),
        ({"runtime": "java"}, "unknown runtime"),
        ({"model_name": "bad name"}, "invalid model name"),
        ({"handler": "  "}, "the handler is empty"),
    ],
)
def test_bad_options_are_usage_errors(tiny_checkpoint: Path, tmp_path: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        create_archive(tiny_checkpoint, export_path=tmp_path, **kwargs)


def test_missing_extra_file(tiny_checkpoint: Path, tmp_path: Path) -> None:
    with pytest.raises(InputNotFoundError, match="gone.txt: no such file or folder") as info:
        create_archive(tiny_checkpoint, export_path=tmp_path, extra_files=[tmp_path / "gone.txt"])
    assert info.value.param == "extra_files"  # the CLI adds (--extra-files)


def test_export_path_that_is_a_file(tiny_checkpoint: Path, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="file: not a folder") as info:
        create_archive(tiny_checkpoint, export_path=tmp_path / "file")
    assert info.value.param == "export_path"  # the CLI adds (--export-path)
