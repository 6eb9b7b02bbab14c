"""The request bodies a sweep cycles through: files, folders, globs (as ``mmsctl predict`` reads them),
a default kitten, or nothing at all for a no-op model.

Every body is read once, up front, so the load loop never touches the disk; the
total is capped so a glob over a photo library cannot exhaust memory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

from mmsctl.errors import UsageError

__all__ = ["MAX_INPUT_BYTES", "Body", "default_input", "read_bodies"]

#: All bodies together; the load generator keeps them in memory.
MAX_INPUT_BYTES = 256 * 1024 * 1024
_KITTENS = ("kitten.jpg", "kitten_small.jpg")


@dataclass(frozen=True)
class Body:
    """One request body and its Content-Type (None: send none, as curl -T does for unknown files)."""

    name: str
    data: bytes
    content_type: Optional[str]


def default_input() -> Optional[Path]:
    """``kitten.jpg`` in the current folder (``make demo`` leaves one), else the kitten in
    ``$MMSCTL_SHARED_DIR/images``; None when neither is there."""
    for name in _KITTENS:
        if Path(name).is_file():
            return Path(name)
    shared = os.environ.get("MMSCTL_SHARED_DIR")
    if shared:
        candidate = Path(shared) / "images" / "kitten_small.jpg"
        if candidate.is_file():
            return candidate
    return None


def read_bodies(args: Sequence[str], *, noop: bool = False,
                skipped: Optional[Callable[[str], None]] = None) -> list[Body]:
    """The bodies for INPUT arguments (an empty body with ``--noop`` and no INPUT); *skipped* is told the files
    a folder holds that are not read, as ``predict`` tells them.

    Raises:
        UsageError: no INPUT and no default kitten, a URL or stdin (read them into a file first),
            or more than :data:`MAX_INPUT_BYTES` in all.
        InputNotFoundError: a file, folder or glob that is not there.
    """
    from mmsctl.predict.inputs import expand_inputs

    if not args:
        if noop:
            return [Body("(empty)", b"", None)]
        kitten = default_input()
        if kitten is None:
            raise UsageError("no INPUT given and no kitten.jpg here",
                             param="inputs", hint="pass image files, folders or globs, or measure the server alone "
                             "with a no-op model")
        args = [str(kitten)]
    bodies: list[Body] = []
    total = 0
    for source in expand_inputs(list(args), skipped):
        if source.kind in ("stdin", "url"):
            raise UsageError(f"{source.name}: bench reads files, folders and globs only",
                             hint="save it to a file first (curl -o, or > file)")
        data = source.read()
        total += len(data)
        if total > MAX_INPUT_BYTES:
            raise UsageError(f"the inputs are larger than {MAX_INPUT_BYTES // 2**20} MiB in all",
                             hint="pass fewer files: they are cycled, a few are enough")
        bodies.append(Body(source.name, data, source.content_type))
    return bodies
