"""Archive bombs through the CLI (``archive extract``, ``archive inspect``, ``predict``): one clear error
line, exit 1, nothing written. The bomb is the one of issue 9: a 3 MB archive of 200 zero-filled
members that would write 3.2 GB."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from tests.support.bombs import zip_bomb
from tests.support.cli import one_error_line, run_mmsctl


@pytest.fixture(scope="module")
def bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = zip_bomb(tmp_path_factory.mktemp("bomb") / "bomb.mar")
    assert path.stat().st_size < 4 * 1024**2
    assert sum(i.file_size for i in zipfile.ZipFile(path).infolist()) > 3 * 1024**3
    return path


@pytest.mark.parametrize("command", [("archive", "extract"), ("archive", "inspect"), ("predict",)])
def test_a_zip_bomb_is_a_clear_error(capsys: pytest.CaptureFixture[str], bomb: Path, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...]) -> None:
    monkeypatch.chdir(tmp_path)
    args = [*command, str(bomb)]
    if command == ("predict",):
        args.append(str(bomb))  # any input: the model never opens
    result = run_mmsctl(capsys, *args)
    assert result.code == 1, result
    assert one_error_line(result) == f"error: {bomb}: compression ratio over 200:1 (archive bomb?)"
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []  # nothing extracted here, nothing half-written


def test_the_caps_are_settings(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "many.mar"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("MAR-INF/MANIFEST.json", '{"model": {"modelName": "many", "handler": "h:handle"}}')
        for i in range(10):
            zf.writestr(f"f{i}.txt", "x" * 1000)
    monkeypatch.setenv("MMSCTL_MAX_ARCHIVE_MEMBERS", "5")
    result = run_mmsctl(capsys, "archive", "extract", str(archive), str(tmp_path / "out"))
    assert one_error_line(result) == f"error: {archive}: more than 5 members (max_archive_members; archive bomb?)"
    monkeypatch.delenv("MMSCTL_MAX_ARCHIVE_MEMBERS")
    monkeypatch.setenv("MMSCTL_MAX_ARCHIVE_SIZE", "4096")
    result = run_mmsctl(capsys, "archive", "extract", str(archive), str(tmp_path / "out"))
    assert one_error_line(result) == (f"error: {archive}: extracts to more than 4 KiB "
                                      "(max_archive_size; archive bomb?)")
    assert not (tmp_path / "out").exists()
    monkeypatch.delenv("MMSCTL_MAX_ARCHIVE_SIZE")
    assert run_mmsctl(capsys, "archive", "extract", str(archive), str(tmp_path / "out")).code == 0
