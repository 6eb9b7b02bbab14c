"""`mmsctl archive create | inspect | extract` through the real entry point: output and exit codes."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
import yaml

from mmsctl.cli.main import run


def mmsctl(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""
    capsys.readouterr()
    try:
        run(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_create_prints_the_path_and_a_summary(capsys, tiny_checkpoint: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, err = mmsctl(capsys, "archive", "create", str(tiny_checkpoint), "--model-name", "tiny", "--export-path", str(tmp_path))
    assert code == 0, err
    assert out == f"{tmp_path / 'tiny.mar'}\n"
    assert "created tiny.mar" in err and "mmsctl_vision_service:handle" in err
    assert zipfile.is_zipfile(tmp_path / "tiny.mar")


def test_create_refuses_to_overwrite_without_force(capsys, tiny_checkpoint: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    args = ("archive", "create", "--model-path", str(tiny_checkpoint), "--export-path", str(tmp_path))
    assert mmsctl(capsys, *args)[0] == 0
    code, out, err = mmsctl(capsys, *args)
    assert code == 1
    assert out == ""
    assert err.splitlines()[0] == f"error: {tmp_path / 'tiny_net.mar'} already exists"
    assert "--force" in err
    assert mmsctl(capsys, *args, "--force")[0] == 0


def test_create_json_output(capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model = tmp_path / "echo"
    model.mkdir()
    (model / "echo_service.py").write_text("def handle(data, context):\n    return data\n")
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.txt").write_text("b")
    code, out, err = mmsctl(
        capsys, "archive", "create", str(model), "--handler", "echo_service:handle",
        "--extra-files", f"{tmp_path / 'a.txt'},{tmp_path / 'b.txt'}", "--archive-format", "tgz",
        "--export-path", str(tmp_path / "out"), "--description", "echo model", "-o", "json",
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["path"] == str(tmp_path / "out" / "echo.tar.gz")
    assert data["manifest"]["model"]["description"] == "echo model"
    assert [f["path"] for f in data["files"]] == ["MAR-INF/MANIFEST.json", "a.txt", "b.txt", "echo_service.py"]


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["archive", "create"], 2, "error: no model given"),
        (["archive", "create", "/nonexistent/model"], 3, "error: /nonexistent/model: no such folder"),
        (["archive", "create", "{dir}", "--archive-format", "zip"], 2, "error: unknown archive format 'zip'"),
        (["archive", "create", "{dir}", "--model-name", "bad name"], 2, "error: invalid model name 'bad name'"),
        (["archive", "create", "{dir}", "--model-path", "/elsewhere"], 2, "error: give the model folder once"),
        (["archive", "create", "{dir}", "--from-onnx", "x.onnx"], 2, "error: --from-onnx and a model folder"),
        (["archive", "create", "--from-onnx", "/missing.onnx"], 3, "error: /missing.onnx: no such file"),
        (["archive", "create", "{empty}"], 1, "error: {empty}: no MXNet symbol file"),
        (["archive", "inspect", "{junk}"], 1, "error: {junk}: not a model archive"),
        (["archive", "inspect", "/missing.mar"], 3, "error: /missing.mar: no such file or folder"),
        (["archive", "inspect", "{dir}", "-o", "xml"], 2, "error: unknown output format 'xml'"),
        (["archive", "extract", "{junk}"], 1, "error: {junk}: not a model archive"),
    ],
)
def test_bad_input_is_one_error_line(  # type: ignore[no-untyped-def]
    capsys, tiny_checkpoint: Path, tmp_path: Path, args: list[str], code: int, message: str
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    junk = tmp_path / "junk.mar"
    junk.write_text("not an archive")
    fill = {"dir": str(tiny_checkpoint), "empty": str(empty), "junk": str(junk)}
    argv = [a.format(**fill) for a in args]
    if args[1] == "create":
        argv += ["--export-path", str(tmp_path)]
    got_code, out, err = mmsctl(capsys, *argv)
    assert got_code == code, err
    assert out == ""
    assert err.startswith(message.format(**fill)), err
    assert "Traceback" not in err
    assert len([line for line in err.splitlines() if line.startswith("error:")]) == 1


def test_inspect_table(capsys, tiny_checkpoint: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    mmsctl(capsys, "archive", "create", str(tiny_checkpoint), "--model-name", "tiny", "--export-path", str(tmp_path),
           "--description", "a tiny net")
    code, out, err = mmsctl(capsys, "archive", "inspect", str(tmp_path / "tiny.mar"))
    assert code == 0, err
    lines = out.splitlines()
    assert "Name:        tiny" in lines
    assert "Handler:     mmsctl_vision_service:handle" in lines
    assert "Description: a tiny net" in lines
    assert "Signature:   data [0, 3, 16, 16]" in lines
    header = next(i for i, line in enumerate(lines) if line.startswith("PATH"))
    assert [line.split()[0] for line in lines[header + 1:]] == [
        "MAR-INF/MANIFEST.json", "mmsctl_vision_service.py", "signature.json", "synset.txt",
        "tiny-0000.params", "tiny-symbol.json",
    ]


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_inspect_machine_readable(capsys, tiny_checkpoint: Path, tmp_path: Path, fmt: str) -> None:  # type: ignore[no-untyped-def]
    mmsctl(capsys, "archive", "create", str(tiny_checkpoint), "--model-name", "tiny", "--export-path", str(tmp_path),
           "--archive-format", "tgz")
    code, out, err = mmsctl(capsys, "archive", "inspect", str(tmp_path / "tiny.tar.gz"), "-o", fmt)
    assert code == 0, err
    data = json.loads(out) if fmt == "json" else yaml.safe_load(out)
    assert data["format"] == "tgz"
    assert data["model_name"] == "tiny"
    assert data["manifest"]["model"]["handler"] == "mmsctl_vision_service:handle"
    assert data["signature"]["inputs"][0]["data_name"] == "data"
    assert {f["path"] for f in data["files"]} >= {"MAR-INF/MANIFEST.json", "tiny-0000.params"}


@pytest.mark.parametrize("args, error, hint", [
    (["{onnx}"], "error: {onnx}: not a folder (--model-path takes the folder with the model files)",
     "hint: use --from-onnx for an ONNX file"),
    (["{empty}"], "error: {empty}: no MXNet symbol file (*-symbol.json)", "pass --handler for a folder with your own"),
    (["{dir}", "--synset", "/missing.txt"], "error: /missing.txt: no such file (--synset)", None),
    (["{dir}", "--extra-files", "/missing"], "error: /missing: no such file or folder (--extra-files)", None),
    (["{dir}", "--handler", " "], "error: the handler is empty; give module:function or leave it out for the "
     "built-in handler (--handler)", None),
    (["{dir}", "--export-path", "{onnx}"], "error: {onnx}: not a folder (--export-path)", None),
])
def test_core_errors_name_the_flag(  # type: ignore[no-untyped-def]
    capsys, tiny_checkpoint: Path, tmp_path: Path, args: list[str], error: str, hint: str | None
) -> None:
    """The core names its arguments (param) and error types; `archive create` names its flags."""
    empty = tmp_path / "empty"
    empty.mkdir()
    onnx = tmp_path / "model.onnx"
    onnx.write_bytes(b"x")
    fill = {"dir": str(tiny_checkpoint), "empty": str(empty), "onnx": str(onnx)}
    argv = [a.format(**fill) for a in args]
    if "--export-path" not in argv:
        argv += ["--export-path", str(tmp_path)]
    code, out, err = mmsctl(capsys, "archive", "create", *argv)
    lines = err.splitlines()
    assert code != 0 and out == "" and lines[0] == error.format(**fill), err
    if hint:
        assert lines[1].startswith("hint: ") and hint in lines[1], err


def test_extract(capsys, tiny_checkpoint: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    mmsctl(capsys, "archive", "create", str(tiny_checkpoint), "--model-name", "tiny", "--export-path", str(tmp_path))
    dest = tmp_path / "x"
    code, out, err = mmsctl(capsys, "archive", "extract", str(tmp_path / "tiny.mar"), str(dest))
    assert code == 0, err
    assert out == f"{dest}\n"
    assert (dest / "MAR-INF" / "MANIFEST.json").is_file()
    code, out, err = mmsctl(capsys, "archive", "extract", str(tmp_path / "tiny.mar"), str(dest))
    assert code == 1 and "already exists" in err and "hint: use --force to replace it" in err
    assert mmsctl(capsys, "archive", "extract", str(tmp_path / "tiny.mar"), str(dest), "--force")[0] == 0


def test_create_from_onnx(capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("onnx", reason="the onnx package is not installed")
    from tests.archive.test_onnx_import import _tiny_onnx

    src = _tiny_onnx(tmp_path / "tiny-onnx.onnx")
    labels = tmp_path / "labels.txt"
    labels.write_text("a\nb\nc\nd\ne\n")
    code, out, err = mmsctl(
        capsys, "archive", "create", "--from-onnx", str(src), "--synset", str(labels), "--export-path", str(tmp_path)
    )
    assert code == 0, err
    assert out == f"{tmp_path / 'tiny-onnx.mar'}\n"
    with zipfile.ZipFile(tmp_path / "tiny-onnx.mar") as zf:
        names = set(zf.namelist())
        assert json.loads(zf.read("signature.json"))["inputs"][0]["data_name"] == "x"
        assert zf.read("synset.txt") == labels.read_bytes()
    assert {"tiny-onnx-symbol.json", "tiny-onnx-0000.params", "mmsctl_vision_service.py"} <= names


def test_the_onnx_install_hint_fits_how_mmsctl_was_installed(tmp_path: Path) -> None:
    from mmsctl.archive.onnx_import import onnx_install_hint
    from tests.support.paths import REPO

    assert onnx_install_hint(cwd=REPO).startswith("pip install -e '.[onnx]'")  # this checkout, from its folder
    assert onnx_install_hint(cwd=tmp_path).startswith(f"pip install -e '{REPO}[onnx]'")
    site = tmp_path / "site-packages" / "mmsctl"  # an installed wheel: no pyproject.toml beside it
    site.mkdir(parents=True)
    assert onnx_install_hint(site, cwd=tmp_path).startswith("pip install 'mmsctl[onnx]'")
