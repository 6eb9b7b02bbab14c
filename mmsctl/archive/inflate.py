"""Reading a deflated zip member with ISA-L's inflate (``isal``), faster than zlib's.

Extracting the weights is most of what registering a large ``.mar`` costs, and it sits between
``serve start`` and the first prediction (``bench/archive_bench.py`` times a resnet-18 archive
both ways). :func:`open_member` gives a reader with ``read(n)``
that checks the member's CRC-32 and size as zipfile does; members that are not plainly
deflated (stored, encrypted, other methods), or a machine without ``isal``, get zipfile's own.
"""

from __future__ import annotations

import struct
import zipfile
from typing import IO, Any, Optional, Protocol

__all__ = ["Reader", "open_member"]

_fast_zlib: Any
try:  # a wheel for every common platform; without it, zipfile's zlib does the work
    from isal import isal_zlib as _fast_zlib
except ImportError:  # pragma: no cover - depends on the install
    _fast_zlib = None


class Reader(Protocol):
    """What extraction reads a member from: zipfile's reader or :class:`_Inflated`."""

    def read(self, n: int = ..., /) -> bytes: ...


_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")
_LOCAL_MAGIC = b"PK\x03\x04"
#: Compressed bytes inflated at a time: what one read can expand to stays within ~16 MB.
_RAW = 16 << 10


class _Inflated:
    """A deflated member's bytes, inflated as they are read; CRC and size checked at the end."""

    def __init__(self, fp: IO[bytes], info: zipfile.ZipInfo) -> None:
        fp.seek(info.header_offset)
        header = fp.read(_LOCAL_HEADER.size)
        if len(header) != _LOCAL_HEADER.size or header[:4] != _LOCAL_MAGIC:
            raise zipfile.BadZipFile(f"bad local header for {info.filename!r}")
        fields = _LOCAL_HEADER.unpack(header)
        fp.seek(info.header_offset + _LOCAL_HEADER.size + fields[-2] + fields[-1])
        self._fp = fp
        self._info = info
        self._left = info.compress_size
        self._inflater: Any = _fast_zlib.decompressobj(-15)
        self._crc = 0
        self._size = 0
        self._done = False

    def read(self, n: int = -1) -> bytes:
        """The next inflated bytes, however many one step of inflating gives (*n* is not a limit)."""
        try:
            return self._read()
        except _fast_zlib.error as exc:
            raise zipfile.BadZipFile(f"{self._info.filename!r}: {exc}") from None

    def _read(self) -> bytes:
        """The next inflated bytes (at most ~1,032 x ``_RAW`` of them: deflate's largest ratio)."""
        while not self._done:
            if self._left > 0:
                raw = self._fp.read(min(_RAW, self._left))
                if not raw:
                    raise EOFError(f"{self._info.filename!r} is truncated")
                self._left -= len(raw)
                out = self._inflater.decompress(raw)
            else:
                out = self._inflater.flush()
                self._finish()
            if out:
                self._crc = _fast_zlib.crc32(out, self._crc)
                self._size += len(out)
                if self._size > self._info.file_size:
                    raise zipfile.BadZipFile(f"{self._info.filename!r} is bigger than it says")
                return out
        return b""

    def _finish(self) -> None:
        self._done = True
        if not self._inflater.eof:
            raise EOFError(f"{self._info.filename!r} ends inside its compressed data")
        if self._size != self._info.file_size or self._crc != self._info.CRC:
            raise zipfile.BadZipFile(f"bad CRC-32 or size for {self._info.filename!r}")

    def close(self) -> None:
        self._done = True

    def __enter__(self) -> "_Inflated":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> IO[bytes] | _Inflated:
    """A reader of *info*'s bytes: ISA-L's inflate for a plain deflated member, else zipfile's."""
    fp: Optional[IO[bytes]] = zf.fp
    plain = info.compress_type == zipfile.ZIP_DEFLATED and not info.flag_bits & 0x1
    if _fast_zlib is None or fp is None or not plain:
        return zf.open(info)
    return _Inflated(fp, info)
