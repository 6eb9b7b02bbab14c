"""Decompression bombs, made in the test (small on disk) and never committed.

``zip_bomb`` writes a model archive of many zero-filled members that share one deflated
stream (so making it costs one compression); ``png_bomb`` a 1-bit PNG that decodes to a
huge RGB image.
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

__all__ = ["png_bomb", "zip_bomb"]

_MANIFEST = {
    "specificationVersion": "1.0", "implementationVersion": "1.0", "modelServerVersion": "1.0",
    "runtime": "python", "model": {"modelName": "bomb", "modelVersion": "1.0", "handler": "service:handle"},
}


def zip_bomb(path: Path, members: int = 200, member_size: int = 16 * 1024 * 1024) -> Path:
    """A ``.mar`` with a manifest and *members* zero-filled files of *member_size* bytes each."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    zeros = deflate.compress(bytes(member_size)) + deflate.flush()
    crc = zlib.crc32(bytes(member_size))
    entries = [("MAR-INF/MANIFEST.json", json.dumps(_MANIFEST).encode(), 0, None)]
    entries += [(f"weights-{i:04d}.params", zeros, 8, (crc, member_size)) for i in range(members)]
    out = bytearray()
    central = bytearray()
    for name, data, method, known in entries:
        raw = name.encode()
        crc_, size = known or (zlib.crc32(data), len(data))
        offset = len(out)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc_, len(data), size, len(raw), 0)
        out += raw + data
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0x21, crc_, len(data),
                               size, len(raw), 0, 0, 0, 0, 0, offset) + raw
    start = len(out)
    out += central
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries), len(central), start, 0)
    path.write_bytes(bytes(out))
    return path


def png_bomb(path: Path, width: int = 20000, height: int = 20000) -> Path:
    """A valid 1-bit greyscale PNG of *width* x *height* (a decoder makes it width x height x 3 bytes)."""
    row = b"\x00" + bytes((width + 7) // 8)
    deflate = zlib.compressobj(9)
    data = b"".join(deflate.compress(row) for _ in range(height)) + deflate.flush()

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", data) + chunk(b"IEND", b""))
    return path
