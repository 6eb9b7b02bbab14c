"""The one atomic write: a reader sees the old document or the new one, a failed write leaves the old one, and a
replaced file keeps its permission bits."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from mmsctl.atomic import write_atomic


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_document_replaces_the_file_whole_and_leaves_nothing_beside_it(tmp_path: Path) -> None:
    target = tmp_path / "new" / "folder" / "state.json"
    write_atomic(target, '{"status": "starting"}')
    write_atomic(target, b'{"status": "ready"}')
    assert target.read_bytes() == b'{"status": "ready"}'
    assert sorted(p.name for p in target.parent.iterdir()) == ["state.json"]
    write_atomic(target, "été\n")  # text is UTF-8, whatever the locale
    assert target.read_bytes() == "été\n".encode("utf-8")


def test_a_write_that_fails_leaves_the_old_file_and_no_temporary_one(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "contexts.toml"
    write_atomic(target, "old = 1\n")

    def full_disk(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError, match="No space left"):
        write_atomic(target, "new = 2\n")
    assert target.read_text() == "old = 1\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["contexts.toml"]


def test_a_replaced_file_keeps_its_mode_and_a_new_one_gets_the_asked_one(tmp_path: Path) -> None:
    kept = tmp_path / "contexts.toml"
    write_atomic(kept, "a = 1\n")
    kept.chmod(0o640)
    write_atomic(kept, "a = 2\n")
    assert _mode(kept) == 0o640
    write_atomic(tmp_path / "run.json", "{}", private=True)
    assert _mode(tmp_path / "run.json") == 0o600
    umask = os.umask(0o022)
    try:
        write_atomic(tmp_path / "meta.json", "{}")
    finally:
        os.umask(umask)
    assert _mode(tmp_path / "meta.json") == 0o644
    write_atomic(kept, "a = 3\n", private=True)  # private is for a new file; a replaced one keeps its own bits
    assert _mode(kept) == 0o640


def test_a_temporary_file_left_by_a_dead_process_with_this_pid_is_written_over(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    left = tmp_path / f".state.json.{os.getpid()}.tmp"
    left.write_text("half a docu")
    left.chmod(0o644)
    write_atomic(target, "whole", private=True)
    assert target.read_text() == "whole" and _mode(target) == 0o600 and not left.exists()


def test_writers_in_threads_of_one_process_never_leave_half_a_document(tmp_path: Path) -> None:
    target = tmp_path / "warm.json"
    documents = [bytes([65 + n]) * (256 * 1024 + n) for n in range(6)]
    write_atomic(target, documents[0])
    seen: list[bytes] = []
    failed: list[BaseException] = []
    done = threading.Event()

    def write(document: bytes) -> None:
        for _ in range(15):
            try:
                write_atomic(target, document)
            except OSError as exc:
                failed.append(exc)

    def read() -> None:
        while not done.is_set():
            seen.append(target.read_bytes())

    reader = threading.Thread(target=read)
    reader.start()
    writers = [threading.Thread(target=write, args=(d,)) for d in documents]
    for w in writers:
        w.start()
    for w in writers:
        w.join(timeout=60)
    done.set()
    reader.join(timeout=60)
    assert failed == []  # every write went through
    assert seen and all(s in documents for s in seen)
    assert target.read_bytes() in documents
    assert sorted(p.name for p in tmp_path.iterdir()) == ["warm.json"]
