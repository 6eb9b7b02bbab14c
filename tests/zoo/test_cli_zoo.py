"""`mmsctl zoo list|pull|path|rm|clean`: output formats, messages and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from mmsctl.zoo import cache
from tests.support.cli import run_mmsctl
from tests.support.http_mirror import Mirror
from tests.zoo.conftest import cached_files


def test_list_table_is_plain_columns_when_piped(capsys) -> None:
    code, out, _ = run_mmsctl(capsys, "zoo", "list")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "ALIASES", "TYPE", "FRAMEWORK", "SIZE", "CACHED"]
    squeeze = next(line for line in lines if line.startswith("squeezenet_v1.1 "))
    assert "squeezenet," in squeeze and "~5.0 MB" in squeeze and squeeze.rstrip().endswith("no")
    code, wide, _ = run_mmsctl(capsys, "zoo", "list", "-o", "wide")
    assert "URL" in wide.splitlines()[0]
    assert "https://s3.amazonaws.com/model-server/model_archive_1.0/nin.mar" in wide


def test_list_json_and_yaml_show_what_is_cached(capsys, http_mirror: Mirror) -> None:
    assert run_mmsctl(capsys, "-q", "zoo", "pull", "resnet-18")[0] == 0
    code, out, _ = run_mmsctl(capsys, "zoo", "list", "-o", "json")
    assert code == 0
    rows = {row["name"]: row for row in json.loads(out)}
    assert rows["resnet-18"]["cached"] is True and rows["resnet-18"]["size"] == 50_000
    assert rows["squeezenet_v1.1"]["cached"] is False
    assert rows["squeezenet_v1.1"]["aliases"][0] == "squeezenet"
    code, out, _ = run_mmsctl(capsys, "zoo", "list", "--cached", "-o", "yaml")
    assert [row["name"] for row in yaml.safe_load(out)] == ["resnet-18"]


def test_list_shows_cached_archives_outside_the_catalog(capsys, http_mirror: Mirror) -> None:
    run_mmsctl(capsys, "zoo", "pull", http_mirror.url + "sitemodel.mar")
    code, out, _ = run_mmsctl(capsys, "zoo", "list", "--cached", "-o", "json")
    rows = json.loads(out)
    assert [r["name"] for r in rows] == ["sitemodel"]
    assert rows[0]["url"] == http_mirror.url + "sitemodel.mar"


def test_bad_output_format_is_a_usage_error(capsys) -> None:
    code, _, err = run_mmsctl(capsys, "zoo", "list", "-o", "xml")
    assert code == 2 and "unknown output format" in err


def test_pull_prints_paths_and_path_finds_them(capsys, http_mirror: Mirror) -> None:
    code, out, err = run_mmsctl(capsys, "zoo", "pull", "squeezenet", "resnet18")
    assert code == 0
    paths = [Path(line) for line in out.splitlines()]
    assert [p.name for p in paths] == ["squeezenet_v1.1.mar", "resnet-18.mar"]
    assert all(p.is_file() for p in paths)
    assert "squeezenet_v1.1: downloaded" in err
    code, out, err = run_mmsctl(capsys, "zoo", "pull", "squeezenet", "-o", "json")
    assert json.loads(out)[0]["source"] == "cache"
    assert "already cached" in err
    code, out, _ = run_mmsctl(capsys, "zoo", "path", "SQUEEZENET")
    assert code == 0 and Path(out.strip()) == paths[0]


def test_pull_of_several_with_one_failure_is_a_partial_failure(capsys, http_mirror: Mirror) -> None:
    code, out, err = run_mmsctl(capsys, "zoo", "pull", "resnet-18", "nin")
    assert code == 4
    assert out.strip().endswith("resnet-18.mar")
    assert "nin: download failed: HTTP 404" in err


def test_pull_offline_is_one_error_line_with_the_mirror_hint(capsys) -> None:
    code, out, err = run_mmsctl(capsys, "zoo", "pull", "squeezenet")
    assert code == 1 and out == ""
    error_lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1 and "MMSCTL_ZOO_URL" in error_lines[0]
    assert "Traceback" not in err


def test_path_of_uncached_or_unknown_model(capsys) -> None:
    code, _, err = run_mmsctl(capsys, "zoo", "path", "squeezenet")
    assert code == 3 and "not in the cache" in err and "mmsctl zoo pull squeezenet" in err
    code, _, err = run_mmsctl(capsys, "zoo", "path", "squeezent")
    assert code == 3 and "did you mean 'squeezenet'" in err


def test_rm_and_clean(capsys, http_mirror: Mirror) -> None:
    run_mmsctl(capsys, "-q", "zoo", "pull", "squeezenet", "resnet-18")
    code, _, err = run_mmsctl(capsys, "zoo", "rm", "squeezenet")
    assert code == 0 and "removed squeezenet_v1.1" in err
    assert not cache.zoo_path("squeezenet_v1.1.mar").exists()
    code, _, err = run_mmsctl(capsys, "zoo", "rm", "squeezenet")
    assert code == 3 and "not in the cache: squeezenet" in err
    stale = cache.archives_dir() / ".x.mar.999999999.abcd.part"  # left by a dead process
    stale.write_bytes(b"half")
    code, _, err = run_mmsctl(capsys, "zoo", "clean")
    assert code == 0 and "removed 1 archive," in err
    assert cached_files() == []


def _real_mar(path: Path) -> Path:
    """A minimal model-archiver 1.0 .mar that open_archive accepts."""
    import zipfile

    manifest = {"runtime": "python", "model": {"modelName": path.stem, "handler": "h:handle"}}
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("MAR-INF/MANIFEST.json", json.dumps(manifest))
        zf.writestr("h.py", "def handle(data, context):\n    return data\n")
    return path


def _extracted() -> list[Path]:
    root = cache.archives_dir().parent / "extracted"
    return sorted(root.iterdir()) if root.is_dir() else []


def test_rm_and_clean_free_the_extracted_copies(capsys, http_mirror: Mirror, mirror_dir: Path,
                                                tmp_path: Path) -> None:
    from mmsctl.archive import open_archive

    _real_mar(mirror_dir / "squeezenet_v1.1.mar")
    run_mmsctl(capsys, "-q", "zoo", "pull", "squeezenet")
    open_archive(cache.zoo_path("squeezenet_v1.1.mar"))  # what predict and serve do
    assert len(_extracted()) == 1
    code, _, err = run_mmsctl(capsys, "zoo", "rm", "squeezenet")
    assert code == 0 and _extracted() == []

    run_mmsctl(capsys, "-q", "zoo", "pull", "squeezenet")
    open_archive(cache.zoo_path("squeezenet_v1.1.mar"))
    open_archive(_real_mar(tmp_path / "local.mar"))  # a local archive predict opened
    assert len(_extracted()) == 2
    code, _, err = run_mmsctl(capsys, "zoo", "clean")
    assert code == 0 and "removed 1 archive and 2 extracted copies" in err
    assert _extracted() == [] and cached_files() == []


def test_clean_keeps_extracted_copies_while_a_server_runs(capsys, tmp_path: Path) -> None:
    import os

    from mmsctl.archive import open_archive
    from mmsctl.local_servers import Instance, InstanceState, process_start_time

    open_archive(_real_mar(tmp_path / "served.mar"))
    Instance("18999").write_state(InstanceState(name="18999", pid=os.getpid(), status="ready",
                                                process_start=process_start_time(os.getpid())))
    code, _, err = run_mmsctl(capsys, "zoo", "clean")
    assert code == 0 and len(_extracted()) == 1
    assert "warning: kept the extracted model copies: mmsctl server 18999 is running" in err


def test_list_cached_when_nothing_is_cached_says_so(capsys) -> None:
    code, out, err = run_mmsctl(capsys, "zoo", "list", "--cached")
    assert code == 0 and out == "" and "no archives in the cache" in err
    code, out, _ = run_mmsctl(capsys, "zoo", "list", "--cached", "-o", "json")
    assert code == 0 and json.loads(out) == []
