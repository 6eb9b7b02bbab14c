"""The one atomic file write: a document (JSON, TOML, text) replaces its file whole, or not at all.

The bytes go to a temporary file in the target's folder (a rename is atomic only within one file system),
which ``os.replace`` then moves over the target: a reader sees the old document or the new one, never part
of either, and a write cut short (an error, a full disk, Ctrl-C) leaves the old file and removes the
temporary one. A file that is replaced keeps its permission bits; a new one gets 0600 with *private*, else
what the umask allows (as ``open`` creates files).

The temporary file is ``.NAME.PID.tmp``: hidden from folder listings, never shared by two processes, and
used by one write at a time within a process. Streams (downloads, archives being packed) are not documents:
their writers put them in a temporary sibling and rename it themselves.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from pathlib import Path
from typing import Optional, Union

__all__ = ["write_atomic"]

_ONE_AT_A_TIME = threading.Lock()


def write_atomic(path: Union[str, "os.PathLike[str]"], data: Union[str, bytes], *, private: bool = False) -> None:
    """Replace *path* with *data* (text as UTF-8) atomically, creating its folder.

    Raises:
        OSError: the folder or the file cannot be written; the old file is as it was.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with _ONE_AT_A_TIME:
        mode = _mode_of(target)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)  # left by a process that had this pid
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if private else 0o666)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(payload)
            if mode is not None:
                os.chmod(tmp, mode)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


def _mode_of(path: Path) -> Optional[int]:
    """The permission bits of the file at *path*, or None where there is none."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return None
