"""Archives whose headers lie about their size, made in the test (about 1 MB on disk) and never committed.

A tar header claiming 1 GiB of data is followed by 1 GiB of zeros, shipped as one gzip member of
1 MiB of zeros repeated (gzip readers join concatenated members), so making one costs a single
1 MiB compression. After the hostile part comes a valid model (manifest and handler), as in issue 22.
"""

from __future__ import annotations

import gzip
import json
import struct
import tarfile
import zipfile
import zlib
from pathlib import Path
from typing import Iterable

__all__ = ["GIB", "MANIFEST", "gnu_header", "hostile_tgz", "pax_header_chain", "zip_entries_only",
           "zip_with"]

GIB = 1 << 30
MANIFEST = json.dumps({"model": {"modelName": "hostile", "modelVersion": "1.0", "handler": "service:handle"}})
_HANDLER = b"def handle(data, context):\n    return data\n"
_MIB_OF_ZEROS = gzip.compress(bytes(1 << 20), compresslevel=9, mtime=0)


def gnu_header(name: str, type_: bytes, size: int) -> bytes:
    """One 512-byte GNU tar header (negative sizes are written in base-256, as GNU tar allows)."""
    info = tarfile.TarInfo(name)
    info.type = type_
    info.size = size
    return info.tobuf(format=tarfile.GNU_FORMAT)


def _member(name: str, data: bytes, fmt: int = tarfile.GNU_FORMAT) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    return info.tobuf(format=fmt) + data + bytes(-len(data) % 512)


def hostile_tgz(path: Path, head: bytes, zeros: int = 0, tail: Iterable[bytes] = ()) -> Path:
    """A ``.tar.gz``: *head*, then *zeros* zero bytes (rounded up to MiB), then *tail* and a valid model."""
    with open(path, "wb") as out:
        out.write(gzip.compress(head, compresslevel=1, mtime=0))
        for _ in range(-(-zeros // (1 << 20))):
            out.write(_MIB_OF_ZEROS)
        body = b"".join(tail) + _member("MAR-INF/MANIFEST.json", MANIFEST.encode()) + _member("service.py", _HANDLER)
        out.write(gzip.compress(body + bytes(1024), compresslevel=1, mtime=0))
    return path


def pax_header_chain(count: int, record: bytes) -> bytes:
    """*count* small members, each described by a pax header holding *record* (a full pax record)."""
    parts = []
    for i in range(count):
        pax = tarfile.TarInfo(f"././@PaxHeader/{i}")
        pax.type = tarfile.XHDTYPE
        pax.size = len(record)
        parts.append(pax.tobuf(format=tarfile.USTAR_FORMAT) + record + bytes(-len(record) % 512))
        parts.append(_member(f"data/{i}.txt", b"x", tarfile.USTAR_FORMAT))
    return b"".join(parts)


def pax_record(key: str, value_size: int) -> bytes:
    """``"LEN key=value\\n"`` with a value of *value_size* bytes, LEN counting the whole record."""
    body = f" {key}=".encode() + b"v" * value_size + b"\n"
    length = len(body) + 1
    while len(str(length)) + len(body) != length:
        length += 1
    return str(length).encode() + body


def zip_with(path: Path, *, comment: bytes = b"", extra: bytes = b"") -> Path:
    """A valid ``.mar``, with an archive comment and an extra field on its handler entry."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("MAR-INF/MANIFEST.json", MANIFEST)
        info = zipfile.ZipInfo("service.py")
        info.extra = extra
        zf.writestr(info, _HANDLER)
        zf.comment = comment
    return path


def zip_entries_only(path: Path, entries: int, declared: int = 1) -> Path:
    """A zip of one stored member whose central directory lists it *entries* times under distinct names
    (47 to 52 bytes each: the directory, not the data, is what is big); its end record says *declared*."""
    data = b"x"
    crc = zlib.crc32(data)
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0x21, crc, 1, 1, 1, 0) + b"a" + data
    records = []
    for i in range(entries):
        name = format(i, "x").encode()
        records.append(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0x21, crc, 1, 1,
                                   len(name), 0, 0, 0, 0, 0, 0) + name)
    central = b"".join(records)
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, declared, declared, len(central), len(local), 0)
    path.write_bytes(local + central + end)
    return path
