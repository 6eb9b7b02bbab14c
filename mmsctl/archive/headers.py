"""Archive headers bounded before the libraries read them.

``tarfile`` reads a GNU long-name (``L``), long-link (``K``) or pax (``x``/``g``/``X``) header's
whole data into memory before it hands over the member it describes, so a small ``.tar.gz``
whose first header claims a huge name makes it allocate that much before any member check runs.
:class:`BoundedTarFile` checks each header's size field as it is parsed, before its data is
read, and refuses what no real archive holds: a name over 4 KiB, a pax header over 64 KiB,
more than 16 MiB of such headers in all, a chain of them, negative sizes and sparse members.

``zipfile`` reads the whole central directory (every entry's name, extra field and comment)
when it opens an archive, however many entries it holds. :func:`check_zip_directory` walks the
same directory first, one 46-byte record at a time, and refuses an archive with more entries
than ``max_archive_members``, a directory over 16 MiB, or a name, extra field or comment over
its cap, so what ``zipfile`` then builds stays small.
"""

from __future__ import annotations

import struct
import tarfile
import zipfile
from typing import IO, Any, Callable, Optional

from mmsctl.errors import UnsafeArchiveError

__all__ = [
    "MAX_COMMENT_BYTES",
    "MAX_EXTRA_BYTES",
    "MAX_HEADER_BYTES",
    "MAX_HEADER_CHAIN",
    "MAX_NAME_BYTES",
    "MAX_PAX_BYTES",
    "BoundedTarFile",
    "check_zip_directory",
    "open_tgz",
]

#: A member's name or link target (GNU ``L``/``K`` header data, a zip entry's name): Linux's PATH_MAX.
MAX_NAME_BYTES = 4096
#: One pax extended or global header (long names, mtimes, a few attributes fit in a few KiB).
MAX_PAX_BYTES = 64 * 1024
#: All of an archive's extension headers together, or its zip central directory.
MAX_HEADER_BYTES = 16 * 1024 * 1024
#: Extension headers in a row before a member (a real one has at most ``g``, ``x``, ``K``, ``L``).
MAX_HEADER_CHAIN = 8
#: One zip entry's extra field (zip64 sizes, timestamps, a Unicode path).
MAX_EXTRA_BYTES = 8192
#: A zip entry's comment, and the archive's.
MAX_COMMENT_BYTES = 4096

_GNUTYPE_SPARSE = tarfile.GNUTYPE_SPARSE
_LONG_TYPES = {tarfile.GNUTYPE_LONGNAME: "GNU long-name", tarfile.GNUTYPE_LONGLINK: "GNU long-link"}
_PAX_TYPES = {tarfile.XHDTYPE: "pax", tarfile.XGLTYPE: "pax global", tarfile.SOLARIS_XHDTYPE: "pax"}


def _kib(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n % (1024 * 1024) == 0 else f"{n // 1024} KiB"


class BoundedTarInfo(tarfile.TarInfo):
    """A TarInfo whose extension headers are checked before tarfile reads their data."""

    __slots__ = ("_archive",)

    def _proc_member(self, tarfile: Any) -> Any:  # tarfile's documented hook for subclasses
        archive: BoundedTarFile = tarfile
        kind = _LONG_TYPES.get(self.type) or _PAX_TYPES.get(self.type)
        if self.size < 0:
            raise archive.refuse(f"member {self.name[:80]!r} has a negative size")
        if self.type == _GNUTYPE_SPARSE:
            raise archive.refuse(f"unsafe archive member {self.name[:80]!r}: a sparse file")
        if kind is None:
            archive.header_chain = 0
            return super()._proc_member(tarfile)  # type: ignore[misc]
        self._archive = archive  # only extension headers keep it (for the sparse refusal below)
        cap = MAX_NAME_BYTES if self.type in _LONG_TYPES else MAX_PAX_BYTES
        if self.size > cap:
            raise archive.refuse(f"a {kind} header of {self.size} bytes: over the {_kib(cap)} cap on "
                                 "archive headers (archive bomb?)")
        archive.header_bytes += self.size
        archive.header_chain += 1
        if archive.header_bytes > MAX_HEADER_BYTES:
            raise archive.refuse(f"extension headers over {_kib(MAX_HEADER_BYTES)} in all (archive bomb?)")
        if archive.header_chain > MAX_HEADER_CHAIN:
            raise archive.refuse(f"more than {MAX_HEADER_CHAIN} extension headers in a row (archive bomb?)")
        return super()._proc_member(tarfile)  # type: ignore[misc]

    def _refuse_sparse(self, *args: object) -> None:
        raise self._archive.refuse("unsafe archive member: a GNU sparse file (pax)")

    # pax-described GNU sparse files read their maps from the archive unbounded: refused
    _proc_gnusparse_00 = _proc_gnusparse_01 = _proc_gnusparse_10 = _refuse_sparse


class BoundedTarFile(tarfile.TarFile):
    """A TarFile whose headers are bounded (open one with :func:`open_tgz`).

    *source* names the archive in error messages.
    """

    tarinfo = BoundedTarInfo

    def __init__(self, *args: Any, source: str = "", **kwargs: Any) -> None:
        self.source = source
        #: data bytes of the extension headers read so far, and how many came in a row
        self.header_bytes = 0
        self.header_chain = 0
        super().__init__(*args, **kwargs)

    def refuse(self, what: str) -> UnsafeArchiveError:
        return UnsafeArchiveError(f"{self.source}: {what}" if self.source else what)


def open_tgz(path: Optional[str], fileobj: Optional[IO[bytes]], source: str) -> BoundedTarFile:
    """A ``.tar.gz`` (by *path*, or the open *fileobj*) for reading, its headers bounded."""
    # tarfile passes keywords on to the class (typeshed does not list ours)
    return BoundedTarFile.gzopen(path, "r", fileobj, source=source)  # type: ignore[call-overload]


#: what ZipFile itself reads to find the central directory: the check sees what it will see
_EOCD: Callable[[IO[bytes]], Optional[list[Any]]] = zipfile._EndRecData  # type: ignore[attr-defined]
#: fields of the end record _EndRecData returns (zipfile's _ECD_* indexes)
_ENTRIES_TOTAL, _DIR_SIZE, _COMMENT, _LOCATION = 4, 5, 8, 9
#: a central directory record before its name, extra field and comment (zipfile's structCentralDir)
_CD = struct.Struct("<4s4B4HL2L5H2L")
_CD_MAGIC = b"PK\x01\x02"


def check_zip_directory(fp: IO[bytes], source: str, max_members: int) -> None:
    """Walk a zip's central directory before ``zipfile`` reads it; refuse what is over a cap.

    A directory ``zipfile`` cannot find or parse is left to it (it raises BadZipFile).

    Raises:
        UnsafeArchiveError: too many entries, or a directory, name, extra field or comment too big.
    """
    fp.seek(0)
    endrec = _EOCD(fp)
    if not endrec:
        return
    if len(endrec[_COMMENT]) > MAX_COMMENT_BYTES:
        raise UnsafeArchiveError(f"{source}: a zip comment of {len(endrec[_COMMENT])} bytes: over the "
                                 f"{_kib(MAX_COMMENT_BYTES)} cap on archive headers")
    size = endrec[_DIR_SIZE]
    if endrec[_ENTRIES_TOTAL] > max_members:
        raise _too_many(source, max_members)
    if size > MAX_HEADER_BYTES:
        raise UnsafeArchiveError(f"{source}: a zip central directory over {_kib(MAX_HEADER_BYTES)} (archive bomb?)")
    start = endrec[_LOCATION] - size
    if start < 0:
        return
    fp.seek(start)
    read = count = 0
    while read < size:
        record = fp.read(_CD.size)
        if len(record) != _CD.size or record[:4] != _CD_MAGIC:
            return
        fields = _CD.unpack(record)
        name, extra, comment = fields[12], fields[13], fields[14]
        count += 1
        if count > max_members:
            raise _too_many(source, max_members)
        for what, value, cap in (("name", name, MAX_NAME_BYTES), ("extra field", extra, MAX_EXTRA_BYTES),
                                 ("comment", comment, MAX_COMMENT_BYTES)):
            if value > cap:
                raise UnsafeArchiveError(f"{source}: a zip entry {what} of {value} bytes: over the "
                                         f"{_kib(cap)} cap on archive headers")
        read += _CD.size + name + extra + comment
        fp.seek(name + extra + comment, 1)


def _too_many(source: str, max_members: int) -> UnsafeArchiveError:
    return UnsafeArchiveError(f"{source}: more than {max_members} members (max_archive_members; archive bomb?)")
