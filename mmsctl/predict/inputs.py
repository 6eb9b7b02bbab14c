"""Turn ``mmsctl predict`` arguments into a list of inputs to read: files, folders, globs, stdin, URLs.

Expansion happens up front (so ``mmsctl predict m photos/`` knows how many
images there are), reading happens later, one input at a time, so a missing or
unreadable input fails only itself.
"""

from __future__ import annotations

import glob
import mimetypes
import os
import sys
from pathlib import Path
from typing import BinaryIO, Callable, NamedTuple, Optional

from mmsctl.errors import InputNotFoundError, MmsError, UsageError

__all__ = ["IMAGE_SUFFIXES", "InputSource", "expand_inputs"]

#: What a folder argument picks up (case-insensitive): every image format the decoder reads
#: (:mod:`mmsctl.engine.imaging`: Pillow's, and HEIC/HEIF through pillow-heif), as ``predict FILE`` does.
#: ``tests/cli/test_predict.py`` holds this against Pillow's own list.
IMAGE_SUFFIXES = frozenset({
    ".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".apng", ".bmp", ".dib", ".gif", ".webp", ".tif", ".tiff",
    ".heic", ".heif", ".hif", ".heics", ".heifs", ".avif", ".avifs", ".ppm", ".pgm", ".pbm", ".pnm", ".pfm", ".qoi", ".jp2", ".j2k",
    ".j2c", ".jpc", ".jpf", ".jpx", ".tga", ".icb", ".vda", ".vst", ".ico", ".cur", ".icns", ".dds", ".psd", ".pcx",
    ".dcx", ".sgi", ".rgb", ".rgba", ".bw", ".ras", ".xbm", ".xpm", ".im", ".msp", ".pcd", ".pxr", ".blp", ".ftc",
    ".ftu", ".gbr", ".iim", ".fli", ".flc", ".fit", ".fits",
})
_GLOB_CHARS = frozenset("*?[")
# The common cases without initialising `mimetypes` (it reads the system's tables).
_IMAGE_TYPES = {
    ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".jfif": "image/jpeg", ".png": "image/png",
    ".gif": "image/gif", ".bmp": "image/bmp", ".webp": "image/webp", ".tif": "image/tiff",
    ".tiff": "image/tiff", ".heic": "image/heic", ".heif": "image/heif", ".avif": "image/avif",
}


class InputSource(NamedTuple):
    """One input: where it comes from and how it is shown in the output (a NamedTuple: the lean
    ``predict`` reads inputs; see :class:`~mmsctl.predict.warm.WarmTarget`)."""

    name: str
    kind: str  # "file" | "url" | "stdin" | "missing"
    location: str
    error: Optional[MmsError] = None

    @property
    def content_type(self) -> Optional[str]:
        """A guess from the file name (``image/jpeg``…); None where unknown, as curl sends."""
        if self.kind == "stdin":
            return None
        path = self.location.split("?", 1)[0]
        known = _IMAGE_TYPES.get(os.path.splitext(path)[1].lower())
        return known or mimetypes.guess_type(path)[0]

    def read(self, *, stdin: Optional[BinaryIO] = None, fetch: Optional[Callable[[str], bytes]] = None) -> bytes:
        """The input's bytes.

        Raises:
            InputNotFoundError: a path that is not there (or is a folder).
            UsageError: a file that cannot be read.
            DownloadError: a URL that cannot be fetched (:class:`~mmsctl.predict.fetch.FetchError`).
        """
        if self.error is not None:
            raise self.error
        if self.kind == "stdin":
            stream = stdin if stdin is not None else sys.stdin.buffer
            return stream.read()
        if self.kind == "url":
            from mmsctl.predict.fetch import fetch_url  # here: its address checks import socket, ipaddress

            return (fetch or fetch_url)(self.location)
        try:
            with open(self.location, "rb") as fh:
                return fh.read()
        except FileNotFoundError as exc:
            raise InputNotFoundError(f"{self.name}: no such file") from exc
        except IsADirectoryError as exc:
            raise InputNotFoundError(f"{self.name}: is a folder") from exc
        except OSError as exc:
            raise UsageError(f"{self.name}: cannot read: {exc.strerror}") from exc


def _folder_images(folder: Path, skipped: Optional[Callable[[str], None]]) -> list[Path]:
    """The folder's images, sorted; every other file is named through *skipped* (hidden files and folders
    are not: a folder is read one level deep, and ``.DS_Store`` is nobody's photo)."""
    images: list[Path] = []
    others: list[Path] = []
    for p in sorted(folder.iterdir()):
        if p.name.startswith(".") or not p.is_file():
            continue
        (images if p.suffix.lower() in IMAGE_SUFFIXES else others).append(p)
    if others and skipped is not None:
        names = ", ".join(p.name for p in others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        skipped(f"{folder}: skipped {len(others)} file{'s' if len(others) > 1 else ''} that "
                f"{'are' if len(others) > 1 else 'is'} not an image by name: {names}")
    return images


def expand_inputs(args: list[str], skipped: Optional[Callable[[str], None]] = None) -> list[InputSource]:
    """Expand INPUT arguments in order: ``-`` (stdin), URLs, folders (images inside, sorted), globs, files.

    A path that does not exist becomes an input that fails when read, so with
    several inputs the others still run. *skipped* is told, one line per folder, the files a folder
    holds that are not read (no image suffix).

    Raises:
        UsageError: no inputs, ``-`` given twice, or a folder without images.
        InputNotFoundError: a glob that matches nothing.
    """
    if not args:
        raise UsageError("no input given", hint="pass image files, folders, globs, URLs or - for stdin")
    out: list[InputSource] = []
    stdin_seen = False
    for arg in args:
        if arg == "-":
            if stdin_seen:
                raise UsageError("stdin (-) can only be given once")
            stdin_seen = True
            out.append(InputSource("-", "stdin", "-"))
        elif arg.startswith(("http://", "https://")):
            out.append(InputSource(arg, "url", arg))
        elif os.path.isdir(arg):
            images = _folder_images(Path(arg), skipped)
            if not images:
                raise UsageError(
                    f"{arg}: no images in this folder",
                    hint="folders are read one level deep; files need an image suffix (.jpg, .png, .heic, .webp, "
                    "… every format Pillow reads); name a file to send it as it is",
                )
            out.extend(InputSource(str(p), "file", str(p)) for p in images)
        elif os.path.exists(arg):
            out.append(InputSource(arg, "file", arg))
        elif _GLOB_CHARS & set(arg):
            matches = sorted(m for m in glob.glob(os.path.expanduser(arg)) if os.path.isfile(m))
            if not matches:
                raise InputNotFoundError(f"{arg}: no file matches this pattern")
            out.extend(InputSource(m, "file", m) for m in matches)
        else:
            out.append(
                InputSource(arg, "missing", arg, InputNotFoundError(f"{arg}: no such file or folder"))
            )
    return out
