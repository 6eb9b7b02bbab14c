"""The instance wheelhouse's failure path: pip cannot reach the package index (a mirror that is down)."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.requirements import Requirement

from mmsctl.cloud.instance import wheelhouse
from tests.support._proc import any_free_port


def test_an_unreachable_index_fails_in_one_line_before_any_cloud_call(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`download_dependencies` runs real pip; with the index down it names what is missing and the way out."""
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{any_free_port()}/simple")  # nothing listens there
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    with pytest.raises(wheelhouse.WheelhouseError) as caught:
        wheelhouse.download_dependencies(tmp_path, "3.11")
    message = caught.value.message
    assert message.startswith("pip download for the instance failed: ") and "\n" not in message
    names = [Requirement(r).name for r in wheelhouse.runtime_requirements()]
    assert any(name in message for name in names)  # pip's last line names the first it could not find
    assert wheelhouse.ENV_WHEELHOUSE in (caught.value.hint or "")
    assert not list(tmp_path.glob("*.whl"))


def test_a_given_wheelhouse_is_used_as_it_is_and_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(wheelhouse.ENV_WHEELHOUSE, str(tmp_path))
    with pytest.raises(wheelhouse.WheelhouseError, match="not a folder of wheels"):
        wheelhouse.build_wheelhouse("3.11")
    (tmp_path / "numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl").write_bytes(b"")
    assert wheelhouse.build_wheelhouse("3.11") == tmp_path


def test_a_checkouts_wheel_leaves_out_what_an_earlier_build_left_behind(tmp_path: Path) -> None:
    """setuptools never empties a checkout's build/: a module deleted since an earlier build would be packed
    again into the wheel an instance installs. The checkout's wheel is built in a build folder of its own."""
    import zipfile

    project = tmp_path / "proj"
    (project / "pkg").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools"]\nbuild-backend = '
                                            '"setuptools.build_meta"\n[project]\nname = "pkg"\nversion = "1"\n'
                                            '[tool.setuptools]\npackages = ["pkg"]\n')
    (project / "pkg" / "__init__.py").write_text("")
    (project / "build" / "lib" / "pkg").mkdir(parents=True)
    (project / "build" / "lib" / "pkg" / "deleted_since.py").write_text("STALE = True\n")
    wheelhouse.checkout_wheel(project, tmp_path / "wheels", "--no-build-isolation", "--no-index")
    (wheel,) = (tmp_path / "wheels").glob("pkg-1-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "pkg/__init__.py" in names and "pkg/deleted_since.py" not in names
