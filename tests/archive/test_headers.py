"""Archive headers are bounded before they are read (issue 22): memory stays flat whatever a header claims.

Each hostile archive is opened through the public API (``open_archive``, then ``describe_archive``) in a
child process that reports the error and its own peak RSS (``VmHWM``: ``ru_maxrss`` would include the
parent's). Before the fix, the 1 GiB
long-name header of issue 22 alone took the server to 3.25 GB.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Callable

import pytest

from tests.archive.hostile import (
    GIB, gnu_header, hostile_tgz, pax_header_chain, pax_record, zip_entries_only, zip_with,
)
from tests.support.mmsctl_server import REPO

#: Peak RSS of the child that opens one hostile archive (an idle one is about 25 MB).
PEAK_MIB = 100

_CHILD = """
import json, resource, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))  # a safety net for the machine, if the caps fail
from mmsctl.archive import describe_archive, open_archive
errors = []
for attempt in (lambda: open_archive(Path(sys.argv[1]), workdir=Path(sys.argv[2])),
                lambda: describe_archive(Path(sys.argv[1]))):
    try:
        attempt()
        errors.append(None)
    except BaseException as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
# VmHWM: ru_maxrss would also count the parent's peak, which Linux carries across fork and exec
with open("/proc/self/status") as status:
    peak_kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print(json.dumps({"errors": errors, "peak_mib": peak_kib / 1024}))
"""


def _open_in_child(archive: Path, tmp_path: Path) -> tuple[list[str], float]:
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(archive), str(tmp_path / "out")], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    return report["errors"], report["peak_mib"]


def _pax(record: bytes, type_: bytes = tarfile.XHDTYPE, size: int | None = None) -> bytes:
    info = tarfile.TarInfo("././@PaxHeader")
    info.type = type_
    info.size = len(record) if size is None else size
    return info.tobuf(format=tarfile.USTAR_FORMAT) + record + bytes(-len(record) % 512 if size is None else 0)


def _long_name_chain(count: int) -> bytes:
    block = b"n" * 100 + bytes(412)
    return b"".join(gnu_header("././@LongLink", tarfile.GNUTYPE_LONGNAME, 101) + block for _ in range(count))


_SPARSE_10 = pax_record("GNU.sparse.major", 1) .replace(b"=v", b"=1") + pax_record("GNU.sparse.minor", 1).replace(b"=v", b"=0")

#: name -> (what to write, given the path; the end of the one error line)
CASES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "gnu long name claiming 1 GiB (issue 22)": (
        lambda p: hostile_tgz(p, gnu_header("././@LongLink", tarfile.GNUTYPE_LONGNAME, GIB), GIB),
        "a GNU long-name header of 1073741824 bytes: over the 4 KiB cap on archive headers (archive bomb?)"),
    "gnu long link claiming 1 GiB": (
        lambda p: hostile_tgz(p, gnu_header("././@LongLink", tarfile.GNUTYPE_LONGLINK, GIB), GIB),
        "a GNU long-link header of 1073741824 bytes: over the 4 KiB cap on archive headers (archive bomb?)"),
    "pax record claiming 1 GiB": (
        lambda p: hostile_tgz(p, _pax(b"1073741824 comment=", size=GIB), GIB),
        "a pax header of 1073741824 bytes: over the 64 KiB cap on archive headers (archive bomb?)"),
    "pax global header claiming 1 GiB": (
        lambda p: hostile_tgz(p, _pax(b"", tarfile.XGLTYPE, size=GIB), GIB),
        "a pax global header of 1073741824 bytes: over the 64 KiB cap on archive headers (archive bomb?)"),
    "pax header with one huge record": (
        lambda p: hostile_tgz(p, _pax(pax_record("path", 70_000))),
        "a pax header of 70012 bytes: over the 64 KiB cap on archive headers (archive bomb?)"),
    "pax headers over 16 MiB in all": (
        lambda p: hostile_tgz(p, pax_header_chain(300, pax_record("comment", 60_000))),
        "extension headers over 16 MiB in all (archive bomb?)"),
    "negative size (tarfile would read to the end)": (
        lambda p: hostile_tgz(p, gnu_header("././@LongLink", tarfile.GNUTYPE_LONGNAME, -GIB), GIB),
        "member '././@LongLink' has a negative size"),
    "a chain of 2000 long-name headers": (
        lambda p: hostile_tgz(p, _long_name_chain(2000)),
        "more than 8 extension headers in a row (archive bomb?)"),
    "gnu sparse member": (
        lambda p: hostile_tgz(p, gnu_header("w.params", tarfile.GNUTYPE_SPARSE, 512) + bytes(512)),
        "unsafe archive member 'w.params': a sparse file"),
    "pax gnu sparse 1.0 member": (
        lambda p: hostile_tgz(p, _pax(_SPARSE_10) + gnu_header("w.params", tarfile.REGTYPE, 512) + b"99999\n"
                              + bytes(506)),
        "unsafe archive member: a GNU sparse file (pax)"),
    "zip comment of 64 KiB": (
        lambda p: zip_with(p, comment=b"c" * 65535),
        "a zip comment of 65535 bytes: over the 4 KiB cap on archive headers"),
    "zip extra field of 60000 bytes": (
        lambda p: zip_with(p, extra=bytes(60_000)),
        "a zip entry extra field of 60000 bytes: over the 8 KiB cap on archive headers"),
    "zip name of 5000 bytes": (
        lambda p: _zip_long_name(p, 5000),
        "a zip entry name of 5000 bytes: over the 4 KiB cap on archive headers"),
    "zip directory of 300000 entries whose end record says 1": (
        lambda p: zip_entries_only(p, 300_000),
        "more than 10000 members (max_archive_members; archive bomb?)"),
}


def _zip_long_name(path: Path, size: int) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("n" * size, b"x")
    return path


@pytest.mark.parametrize("case", list(CASES))
def test_a_lying_header_is_refused_before_it_is_read(tmp_path: Path, case: str) -> None:
    build, expected = CASES[case]
    archive = build(tmp_path / ("hostile.mar" if "zip" in case else "hostile.tar.gz"))
    errors, peak_mib = _open_in_child(archive, tmp_path)
    assert errors == [f"UnsafeArchiveError: {archive}: {expected}"] * 2, errors
    assert peak_mib < PEAK_MIB, f"peak RSS {peak_mib:.0f} MiB opening {case}"
    assert not (tmp_path / "out").exists()  # nothing extracted


def test_real_extension_headers_still_open(tmp_path: Path) -> None:
    """Long names (GNU and pax), a long link target is refused only as a link, pax attributes: all fine."""
    from mmsctl.archive import open_archive

    long_name = "assets/" + "d" * 200 + "/labels.txt"
    for fmt in (tarfile.GNU_FORMAT, tarfile.PAX_FORMAT):
        path = tmp_path / f"real-{fmt}.tar.gz"
        with tarfile.open(path, "w:gz", format=fmt) as tf:
            for name, data in (("MAR-INF/MANIFEST.json", b'{"model": {"modelName": "real", "handler": "s:h"}}'),
                               (long_name, b"cat\n"), ("s.py", b"def h(d, c): return d\n")):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.pax_headers = {"comment": "c" * 10_000} if fmt == tarfile.PAX_FORMAT else {}
                tf.addfile(info, __import__("io").BytesIO(data))
        archive = open_archive(path, workdir=tmp_path / f"out-{fmt}")
        assert (archive.root / long_name).read_text() == "cat\n"
    zip_path = zip_with(tmp_path / "real.mar", comment=b"made by hand", extra=bytes(8))
    assert open_archive(zip_path, workdir=tmp_path / "out-zip").model_name == "hostile"
