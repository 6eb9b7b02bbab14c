"""What ``mmsctl archive inspect`` shows: manifest, files, sizes, signature, handler.

Reads the archive in place (listing plus two small members), extracting nothing,
so inspecting a 500 MB ``.mar`` costs a directory read, not a decompression.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from mmsctl.archive.legacy import LEGACY_MANIFEST_NAME
from mmsctl.archive.manifest import MANIFEST_PATH, Manifest, parse_manifest
from mmsctl.archive.model_archive import ArchiveFile, open_archive, parse_signature, stem_of
from mmsctl.archive.unpack import detect_format, iter_members, read_member
from mmsctl.errors import InputNotFoundError

__all__ = ["ArchiveInfo", "describe_archive"]


@dataclass
class ArchiveInfo:
    """A summary of one archive, ready for ``-o json``."""

    source: Path
    format: str
    size: int
    manifest: Manifest
    has_manifest: bool
    files: list[ArchiveFile] = field(default_factory=list)
    signature: Optional[dict[str, Any]] = None

    @property
    def total_size(self) -> int:
        return sum(f.size for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        m = self.manifest
        return {
            "source": str(self.source),
            "format": self.format,
            "size": self.size,
            "uncompressed_size": self.total_size,
            "model_name": m.model_name,
            "model_version": m.model_version,
            "handler": m.handler,
            "runtime": m.runtime,
            "engine": m.engine_name,
            "description": m.description,
            "legacy": m.legacy,
            "has_manifest": self.has_manifest,
            "manifest": m.to_dict() if self.has_manifest else None,
            "signature": self.signature,
            "files": [{"path": f.path, "size": f.size} for f in self.files],
        }


def _prefix(paths: list[str]) -> str:
    """The folder level holding the manifest ("" or "<name>/"), like ``find_root``."""
    if MANIFEST_PATH in paths or LEGACY_MANIFEST_NAME in paths:
        return ""
    tops = {p.split("/", 1)[0] for p in paths}
    if len(tops) == 1 and all("/" in p for p in paths):
        return tops.pop() + "/"
    return ""


def describe_archive(location: Path | str) -> ArchiveInfo:
    """Summarise a ``.mar``, ``.model``, ``.tar.gz`` or folder.

    Raises:
        InputNotFoundError, ArchiveError, UnsafeArchiveError: as for ``open_archive``.
    """
    source = Path(location).expanduser()
    if not source.exists():
        raise InputNotFoundError(f"{source}: no such file or folder")
    fmt = detect_format(source)
    if fmt == "folder":
        archive = open_archive(source)
        return ArchiveInfo(
            source=source,
            format="folder",
            size=sum(f.size for f in archive.files()),
            manifest=archive.manifest,
            has_manifest=archive.has_manifest,
            files=archive.files(),
            signature=archive.signature,
        )
    members = [m for m in iter_members(source, fmt) if not m.is_dir]
    prefix = _prefix([m.path for m in members])
    files = [ArchiveFile(m.path[len(prefix):], m.size) for m in members if m.path.startswith(prefix)]
    wanted = {prefix + MANIFEST_PATH, prefix + LEGACY_MANIFEST_NAME, prefix + "signature.json"}
    found = read_member(source, fmt, wanted)
    raw = found.get(prefix + MANIFEST_PATH) or found.get(prefix + LEGACY_MANIFEST_NAME)
    if raw is not None:
        rel = MANIFEST_PATH if prefix + MANIFEST_PATH in found else LEGACY_MANIFEST_NAME
        manifest = parse_manifest(raw, where=f"{source}: {rel}")
    else:
        manifest = Manifest(
            model_name=stem_of(source),
            model_server_version=None,
            implementation_version=None,
            specification_version=None,
        )
    sig_name = str((manifest.legacy_model or {}).get("Signature") or "signature.json")
    sig_raw = found.get(prefix + sig_name)
    if sig_raw is None and sig_name != "signature.json":
        sig_raw = read_member(source, fmt, {prefix + sig_name}).get(prefix + sig_name)
    signature = parse_signature(sig_raw, where=f"{source}: {sig_name}") if sig_raw is not None else None
    kind = "legacy" if manifest.legacy else ("mar" if fmt == "zip" else "tgz")
    return ArchiveInfo(
        source=source,
        format=kind,
        size=source.stat().st_size,
        manifest=manifest,
        has_manifest=raw is not None,
        files=sorted(files, key=lambda f: f.path),
        signature=signature,
    )
