"""A warm ``mmsctl predict``: find a running local server that already serves the very archive asked for.

Starting mxnet in-process costs ~0.5 s per run; a local ``mmsctl serve`` that has the same
archive loaded (same content, same handler) answers in milliseconds. Servers publish what they
serve in ``state.json`` (:attr:`~mmsctl.instances.InstanceState.served`: per model, the SHA-256
prefix its extraction is named by and its handler). Here MODEL is resolved the way ``predict``
does (a zoo name to its cached archive, a path to an archive file), hashed once per
path + mtime + size (remembered in ``<cache>/predict/digests.json``), and matched, with the kernel set
(MKL-DNN on or off) the server's workers run: the one this process would choose. Nothing here
imports mxnet or numpy; anything that does not match returns None (the caller runs in-process).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from mmsctl.instances import InstanceState, running_instances

__all__ = ["WarmTarget", "archive_digest", "find_warm_server", "local_archive"]

#: Archive files ``predict`` may find served (folders and checkpoint folders are not hashed).
_ARCHIVE_SUFFIXES = (".mar", ".model", ".tar.gz", ".tgz")
#: The digests remembered (the most recent); older entries are dropped.
_MAX_DIGESTS = 256


@dataclass(frozen=True)
class WarmTarget:
    """A running server and the name under which it serves the archive."""

    state: InstanceState
    model: str


def local_archive(model: str) -> Optional[Path]:
    """The archive file ``predict MODEL`` would open, if it is on disk already: a path, a cached zoo archive,
    a folder mirror's file (never a download; folders and checkpoint folders are not matched)."""
    from mmsctl.errors import MmsError
    from mmsctl.zoo import resolve_model

    try:
        path = Path(resolve_model(model, offline=True, progress=False).path)
    except MmsError:
        return None
    return path.resolve() if path.is_file() and path.name.endswith(_ARCHIVE_SUFFIXES) else None


def _digests_file() -> Path:
    from mmsctl.config import cache_dir

    return cache_dir() / "predict" / "digests.json"


def _read_digests(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_digests(path: Path, data: dict[str, Any]) -> None:
    """Atomically; a cache that cannot be written only costs hashing again."""
    keep = dict(list(data.items())[-_MAX_DIGESTS:])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".digests-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(keep, fh)
        os.replace(tmp, path)
    except OSError:
        pass


def archive_digest(path: Path) -> str:
    """The first 32 hex digits of the file's SHA-256 (what its cached extraction is named by); a repeated call
    for an unchanged file (same mtime and size) reads the remembered value instead of hashing again.

    Raises:
        OSError: the file cannot be read.
    """
    info = path.stat()
    stamp = [info.st_mtime_ns, info.st_size]
    store = _digests_file()
    data = _read_digests(store)
    entry = data.get(str(path))
    if isinstance(entry, list) and len(entry) == 3 and entry[:2] == stamp and isinstance(entry[2], str):
        return entry[2]
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1024 * 1024), b""):
            digest.update(chunk)
    key = digest.hexdigest()[:32]
    data.pop(str(path), None)
    data[str(path)] = stamp + [key]
    _save_digests(store, data)
    return key


def find_warm_server(model: str, *, handler: Optional[str] = None, gpu: Optional[int] = None) -> Optional[WarmTarget]:
    """A running local server that serves the archive *model* names, with the archive's own handler; None if
    none does, or if this run asks for anything a server would not do the same (``--handler``, ``--gpu``)."""
    if handler is not None or gpu is not None:
        return None
    try:
        servers = [s for s in running_instances() if s.status == "ready" and s.served]
    except OSError:
        return None
    if not servers:
        return None
    path = local_archive(model)
    if path is None:
        return None
    try:
        key = archive_digest(path)
    except OSError:
        return None
    for state in servers:
        for name, facts in sorted(state.served.items()):
            if isinstance(facts, dict) and facts.get("archive") == key and not facts.get("override") \
                    and _same_kernels(key, facts.get("mkldnn")):
                return WarmTarget(state, name)
    return None


def _same_kernels(key: str, served: Any) -> bool:
    """Whether every worker there runs the kernel set (MKL-DNN on or off) this process would: the last digits of
    a probability can differ between the two, and the answers must be the same as in-process."""
    if not isinstance(served, list) or len(served) != 1 or not isinstance(served[0], bool):
        return False  # workers started before and after the measurement, or nothing published
    from mmsctl.config import cache_dir
    from mmsctl.engine.kernels import choose_kernels

    root = cache_dir() / "extracted" / key
    if not root.is_dir():
        return False
    omp = os.environ.get("OMP_NUM_THREADS", "")
    threads = int(omp) if omp.isdigit() and int(omp) > 0 else (os.cpu_count() or 1)
    return (choose_kernels(root, threads=threads, measure_missing=False).mkldnn is not False) == served[0]
