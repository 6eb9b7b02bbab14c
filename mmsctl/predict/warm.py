"""A warm ``mmsctl predict``: find a running local server that already serves the very archive asked for.

Starting mxnet in-process is most of a short run; a local ``mmsctl serve`` that has the same
archive loaded (same content, same handler) answers without it (docs/performance.md). Servers publish what they
serve in ``state.json`` (:attr:`~mmsctl.local_servers.InstanceState.served`: per model, the SHA-256
prefix its extraction is named by and its handler). Here MODEL is resolved the way ``predict``
does (a zoo name to its cached archive, a path to an archive file), hashed once per
path + mtime + size (remembered in ``<cache>/predict/digests.json``), and matched, with the kernel set
(MKL-DNN on or off) the server's workers run: the one this process would choose.

What MODEL came to (the archive, its digest, the kernel set) is remembered too, in
``<cache>/predict/warm.json``, per MODEL as typed, folder, environment and the stamps (mtime, size)
of every file it was worked out from; ``find_warm_server(remembered_only=True)`` trusts only that,
so the lean ``mmsctl predict`` (:mod:`mmsctl.cli.lean`) decides in a few file reads, without the
zoo, the engine or psutil. Nothing imported at module level here goes beyond the standard library
and mmsctl's root modules; anything that does not match returns None (the caller runs in-process).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, NamedTuple, Optional

from mmsctl.config import cache_dir, settings_file
from mmsctl.local_servers import InstanceState, running_instances

__all__ = ["ArchiveFacts", "WarmTarget", "archive_digest", "find_warm_server", "local_archive", "warm_server_or_why"]

#: Archive files ``predict`` may find served (folders and checkpoint folders are not hashed).
_ARCHIVE_SUFFIXES = (".mar", ".model", ".tar.gz", ".tgz")
#: The digests (and facts) remembered (the most recent); older entries are dropped.
_MAX_DIGESTS = 256
#: Environment variables that do not change what MODEL resolves to or which kernels run.
_IRRELEVANT_ENV = frozenset({"MMSCTL_NO_LEAN", "MMSCTL_NO_FAST_EXIT"})


class WarmTarget(NamedTuple):
    """A running server and the name under which it serves the archive.

    No dataclasses in the modules the lean ``predict`` imports: see tests/cli/test_lazy_imports.py."""

    state: InstanceState
    model: str


class ArchiveFacts(NamedTuple):
    """What MODEL comes to here: the archive file, its digest, and the kernel set this process would run it
    with (True: MKL-DNN on or MXNet's default, False: off; None: unknown, never matched)."""

    path: str
    digest: str
    mkldnn: Optional[bool]


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
    return cache_dir() / "predict" / "digests.json"


def _facts_file() -> Path:
    return cache_dir() / "predict" / "warm.json"


def _read_json(path: Path) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_json(path: Path, data: dict[str, Any]) -> None:
    """Atomically, the most recent entries; a cache that cannot be written only costs working it out again."""
    from mmsctl.atomic import write_atomic

    keep = dict(list(data.items())[-_MAX_DIGESTS:])
    try:
        write_atomic(path, json.dumps(keep), private=True)
    except OSError:
        pass


def archive_digest(path: Path) -> str:
    """The first 32 hex digits of the file's SHA-256 (what its cached extraction is named by); a repeated call
    for an unchanged file (same mtime and size) reads the remembered value instead of hashing again.

    Raises:
        OSError: the file cannot be read.
    """
    import hashlib

    info = path.stat()
    stamp = [info.st_mtime_ns, info.st_size]
    store = _digests_file()
    data = _read_json(store)
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
    _save_json(store, data)
    return key


def find_warm_server(model: str, *, handler: Optional[str] = None, gpu: Optional[int] = None,
                     remembered_only: bool = False) -> Optional[WarmTarget]:
    """A running local server that serves the archive *model* names, with the archive's own handler; None if
    none does, or if this run asks for anything a server would not do the same (``--handler``, ``--gpu``).

    With *remembered_only*, what *model* comes to is taken only from an earlier run's facts whose every
    stamp still holds (a few file reads); else it is worked out (zoo, digest, kernel choice) and remembered.
    """
    return warm_server_or_why(model, handler=handler, gpu=gpu, remembered_only=remembered_only)[0]


def warm_server_or_why(model: str, *, handler: Optional[str] = None, gpu: Optional[int] = None,
                       remembered_only: bool = False) -> tuple[Optional[WarmTarget], str]:
    """:func:`find_warm_server`'s answer, and why there is none (``predict -v`` says it): "" when there is one."""
    if handler is not None or gpu is not None:
        return None, "another handler is asked for" if handler is not None else "a GPU is asked for"
    try:
        servers = [s for s in running_instances() if s.status == "ready" and s.served]
    except OSError:
        return None, "the local servers' state cannot be read"
    if not servers:
        return None, "no local server is running"
    key = _facts_key(model)
    facts = _remembered_facts(key)
    if facts is None and not remembered_only:
        facts = _work_out_facts(model, key)
    if facts is None:
        return None, f"{model} is not an archive file here (a folder is never matched)"
    other = None
    for state in servers:
        for name, served in sorted(state.served.items()):
            if not isinstance(served, dict) or served.get("archive") != facts.digest:
                continue
            if facts.mkldnn is None:
                other = other or (f"the local server {state.name} serves this archive as {name}, but the kernel set "
                                  "this process would run it with is not known yet")
            elif served.get("override"):
                other = other or f"the local server {state.name} serves this archive as {name} with another handler"
            elif _served_kernels(served.get("mkldnn")) is not facts.mkldnn:
                other = other or (f"the local server {state.name} serves this archive as {name} with another kernel "
                                  f"set than this process would choose ({_set(facts.mkldnn)} here)")
            else:
                return WarmTarget(state, name), ""
    return None, other or "no running local server serves this archive"


def _set(mkldnn: bool) -> str:
    return "MKL-DNN" if mkldnn else "MKL-DNN off"


def _facts_key(model: str) -> str:
    """MODEL as typed, where it was typed, and every setting that may change what it resolves to."""
    env = sorted((k, v) for k, v in os.environ.items()
                 if k.startswith(("MMSCTL_", "MXNET_", "OMP_")) and k not in _IRRELEVANT_ENV)
    try:
        here: Optional[str] = os.getcwd()
    except OSError:  # a folder removed under this process
        here = None
    return json.dumps([model, here, os.cpu_count(), env])


def _stamp(path: Path) -> list[Any]:
    try:
        info = path.stat()
    except OSError:
        return [str(path), None, None]
    return [str(path), info.st_mtime_ns, info.st_size]


def _stamps(archive: Path, digest: str) -> list[list[Any]]:
    """The files and folders the facts were worked out from: the archive, the settings, the zoo cache (a file
    added there can change what a name resolves to), the remembered kernel choices, the extraction."""
    cache = cache_dir()
    return [_stamp(p) for p in (archive, settings_file(), cache / "archives", cache / "kernels" / "choices.json",
                                cache / "extracted" / digest)]


def _remembered_facts(key: str) -> Optional[ArchiveFacts]:
    entry: Any = _read_json(_facts_file()).get(key)
    try:
        facts = ArchiveFacts(str(entry["path"]), str(entry["digest"]), entry["mkldnn"])
        fresh = entry["stamps"] == _stamps(Path(facts.path), facts.digest)
    except (TypeError, KeyError):
        return None
    return facts if fresh and facts.mkldnn in (True, False, None) else None


def _work_out_facts(model: str, key: str) -> Optional[ArchiveFacts]:
    path = local_archive(model)
    if path is None:
        return None
    try:
        digest = archive_digest(path)
    except OSError:
        return None
    stamps = _stamps(path, digest)  # before the kernel choice is read: a change after it shows next time
    facts = ArchiveFacts(str(path), digest, _local_kernels(digest))
    store = _facts_file()
    data = _read_json(store)
    data.pop(key, None)
    data[key] = {"path": facts.path, "digest": facts.digest, "mkldnn": facts.mkldnn, "stamps": stamps}
    _save_json(store, data)
    return facts


def _served_kernels(served: Any) -> Optional[bool]:
    """The one kernel set every worker of a served model runs, or None (workers started before and after the
    measurement, or nothing published)."""
    if not isinstance(served, list) or len(served) != 1 or not isinstance(served[0], bool):
        return None
    return served[0]


def _local_kernels(key: str) -> Optional[bool]:
    """Whether this process would run the archive with MKL-DNN on (MXNet's default counts as on): the last
    digits of a probability can differ between the two, and the answers must be the same as in-process."""
    from mmsctl.archive import open_archive
    from mmsctl.engine.kernels import choose_kernels
    from mmsctl.errors import MmsError

    root = cache_dir() / "extracted" / key
    if not root.is_dir():
        return None
    try:
        handler = open_archive(root).handler  # the built-in handler's choice is keyed by the graph it runs
    except MmsError:
        return None
    omp = os.environ.get("OMP_NUM_THREADS", "")
    threads = int(omp) if omp.isdigit() and int(omp) > 0 else (os.cpu_count() or 1)
    return choose_kernels(root, threads=threads, measure_missing=False, handler=handler).mkldnn is not False
