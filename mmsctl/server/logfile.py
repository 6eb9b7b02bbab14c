"""``server.log``: everything a background server and its workers write, rotated by size.

The server's stdout and stderr (its log lines, and every worker's output, which workers
inherit) are pointed at a pipe; one thread copies the pipe into ``server.log`` and, once
the file passes ``log_max_size`` bytes, renames it to ``server.log.1`` (``.1`` to ``.2``,
... keeping ``log_backups`` old files) and starts a new one. A handler that prints without
end therefore never fills the disk. The thread never stops draining the pipe, even when
the disk is full (what cannot be written is dropped), so nobody writing to it ever blocks.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import BinaryIO, Optional

__all__ = ["RotatingOutput"]

_CHUNK = 64 * 1024
_PIPE_SIZE = 1024 * 1024


class RotatingOutput:
    """This process's fds 1 and 2, copied into a size-rotated log file by a thread."""

    def __init__(self, path: Path, max_bytes: int, backups: int) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.backups = backups
        self.dropped = 0
        self._thread: Optional[threading.Thread] = None
        self._file: Optional[BinaryIO] = None
        self._size = 0

    def start(self) -> None:
        """From now on, fds 1 and 2 (ours and our children's) go into the log."""
        read_end, write_end = os.pipe()
        try:  # a deeper pipe (Linux): a burst of worker output waits there, not in a writer
            import fcntl

            fcntl.fcntl(write_end, getattr(fcntl, "F_SETPIPE_SZ", 1031), _PIPE_SIZE)
        except (ImportError, OSError):
            pass
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(write_end, 1)
        os.dup2(write_end, 2)
        os.close(write_end)
        self._open()
        self._thread = threading.Thread(target=self._pump, args=(read_end,), name="mmsctl-server-log", daemon=True)
        self._thread.start()

    def close(self, timeout: float = 2.0) -> None:
        """Stop writing into the pipe and let the thread copy what is left (workers are gone by now)."""
        if self._thread is None:
            return
        sys.stdout.flush()
        sys.stderr.flush()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.close(devnull)
        self._thread.join(timeout)

    # -- the thread -----------------------------------------------------------------------------
    def _open(self) -> None:
        try:
            self._file = open(self.path, "ab")
            self._size = self._file.tell()
        except OSError:
            self._file = None

    def _rotate(self) -> None:
        if self._file is not None:
            self._file.close()
        for n in range(self.backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{n}")
            if older.exists():
                os.replace(older, self.path.with_name(f"{self.path.name}.{n + 1}"))
        if self.backups > 0:
            os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        else:
            self.path.unlink()
        self._file = open(self.path, "ab")
        self._size = 0

    def _write(self, data: bytes) -> None:
        try:
            if self._file is None:
                self._open()
            if self._size > 0 and self._size + len(data) > self.max_bytes:
                self._rotate()
            assert self._file is not None
            self._file.write(data)
            self._file.flush()
            self._size += len(data)
        except (OSError, AssertionError):
            self.dropped += len(data)  # a full disk or a gone folder: keep draining, lose the text
            self._file = None

    def _pump(self, fd: int) -> None:
        try:
            while True:
                data = os.read(fd, _CHUNK)
                if not data:
                    return
                self._write(data)
        finally:
            os.close(fd)
            if self._file is not None:
                self._file.close()
