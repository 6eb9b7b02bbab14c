"""A disk cache for the operator wrappers mxnet compiles on every ``import mxnet``.

MXNet 1.x builds ~2,500 Python functions (``mx.nd.*``, ``mx.sym.*``) at import
time: for each operator it writes the function's source and ``exec``s it. Compiling
those strings is ~0.25 s of every cold ``mmsctl predict``. The sources are the same
on every run except for one number, the operator's handle (an address), so the
compiled code objects are kept on disk (``marshal``, one file per Python version)
with the handle replaced by a placeholder constant, and the real handle is spliced
into the marshalled bytes before a cached object is loaded.

Only ``exec`` calls made while mxnet imports are affected, and any source that does
not have the expected shape is compiled as usual. A missing, stale or unreadable
cache file only costs the compile time it would have saved.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import marshal
import os
import sys
import tempfile
import threading
import zlib
from pathlib import Path
from types import CodeType
from typing import Any, Iterator, Optional

__all__ = ["cache_file", "cached_operator_code"]

#: The calls that carry the handle: ``_imperative_invoke(<handle>, ...`` (mx.nd) and
#: ``_symbol_creator(<handle>, ...`` (mx.sym), near the end of each source.
_CALLS = ("_imperative_invoke(", "_symbol_creator(")
#: Stands for the handle in cached code; no generated source contains this number.
_PLACEHOLDER = 2**62 + 20_190_701
_lock = threading.Lock()


def cache_file(*, docs: bool = True) -> Optional[Path]:
    """Where the compiled wrappers are kept (None: caching is switched off); wrappers whose
    documentation was left out (worker processes) have a file of their own."""
    if os.environ.get("MMSCTL_NO_OPCACHE"):
        return None
    from mmsctl.config import cache_dir

    tag = sys.implementation.cache_tag or "python"
    return cache_dir() / "mxnet-opcode" / f"{tag}.v2{'' if docs else '-short-docs'}.marshal"


def _handle_span(source: str) -> Optional[tuple[int, int]]:
    """Where the handle number is in *source* (str.rfind: a regex costs ~0.15 s over 2,500 sources)."""
    for call in _CALLS:
        at = source.rfind(call)
        if at < 0:
            continue
        start = at + len(call)
        end = source.find(",", start)
        if end > start and source[start:end].isdigit():
            return start, end
    return None


def _without_docstrings(code: CodeType) -> CodeType:
    """*code* with the docstrings of the functions it defines left out.

    mxnet sets each wrapper's ``__doc__`` from the operator's documentation right after the
    ``exec``, so the copy compiled into the code is never read: ~3 MB a process. Until Python
    3.14 a function's first constant is its docstring, or None when it has none.
    """
    if sys.version_info >= (3, 14):
        return code
    consts = []
    for const in code.co_consts:
        if isinstance(const, CodeType):
            inner = _without_docstrings(const)
            if inner.co_consts and isinstance(inner.co_consts[0], str):
                inner = inner.replace(co_consts=(None, *inner.co_consts[1:]))
            const = inner
        consts.append(const)
    return code.replace(co_consts=tuple(consts))


#: The placeholder as marshal writes it, less its type byte (which may carry marshal's reference flag).
_PLACEHOLDER_BODY = marshal.dumps(_PLACEHOLDER)[1:]
_FLAG_REF = 0x80


def _int_bytes(value: int, type_byte: int) -> bytes:
    """*value* as marshal writes it, with the reference flag of *type_byte* (the placeholder's)."""
    raw = marshal.dumps(value)
    return bytes([(raw[0] & ~_FLAG_REF) | (type_byte & _FLAG_REF)]) + raw[1:]


class _Cache:
    """The file holds ``(crc32 of the blob, {key: (offset, size, at)})`` and then one blob of
    marshalled code objects, each with the placeholder at byte *at*. A wrapper is unmarshalled straight from its
    bytes with the real handle spliced in, so no second copy of any code object is ever made and
    thrown away (2,500 of those left ~5 MB of holes in a worker's heap)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.index: dict[bytes, tuple[int, int, int]] = {}
        self.blob = b""
        #: What this import used (key -> marshalled code with the placeholder), written back by save().
        self.used: dict[bytes, Any] = {}
        self.added = 0
        try:
            with open(path, "rb") as fh:
                checksum, index = marshal.load(fh)
                blob = fh.read()
            # Damaged bytecode could crash the interpreter, not just fail to load: all or nothing.
            if isinstance(index, dict) and zlib.crc32(blob) == checksum:
                self.index, self.blob = index, blob
        except (OSError, EOFError, ValueError, TypeError):
            pass

    def _entry(self, key: bytes) -> Optional[tuple[memoryview, int]]:
        """The marshalled code for *key* (a view of the blob) and where its placeholder is, if cached and sound."""
        where = self.index.get(key)
        if where is None:
            return None
        try:
            offset, size, at = where
            data = memoryview(self.blob)[offset:offset + size]
        except (TypeError, ValueError):
            return None
        if (len(data) != size or not isinstance(at, int) or not 0 <= at < size
                or data[at + 1:at + 1 + len(_PLACEHOLDER_BODY)] != _PLACEHOLDER_BODY):
            return None
        return data, at

    def code_for(self, source: str) -> Any:
        """A code object for *source* (from the cache where possible), or *source* itself."""
        span = _handle_span(source)
        if span is None:
            return source
        start, end = span
        handle = int(source[start:end])
        canonical = source[:start] + str(_PLACEHOLDER) + source[end:]
        key = hashlib.blake2b(canonical.encode("utf-8"), digest_size=16).digest()
        entry: Optional[tuple[Any, int]] = self._entry(key)
        if entry is None:
            compiled = marshal.dumps(_without_docstrings(compile(canonical, "<string>", "exec")))
            at = compiled.find(_PLACEHOLDER_BODY) - 1
            if at < 0 or compiled.count(_PLACEHOLDER_BODY) != 1:  # not the shape we expect: leave this one alone
                return source
            entry = compiled, at
            self.added += 1
        data, at = entry
        try:
            code = marshal.loads(b"".join((data[:at], _int_bytes(handle, data[at]),
                                           data[at + 1 + len(_PLACEHOLDER_BODY):])))
        except (ValueError, EOFError, TypeError):  # a damaged file: mxnet compiles this one itself
            return source
        self.used[key] = data  # a view of the blob, or new bytes: copied only if save() writes
        return code

    def save(self) -> None:
        """Write what this import used, if anything was new (atomically; errors ignored)."""
        if not self.added:
            return
        index: dict[bytes, tuple[int, int, int]] = {}
        parts, offset = [], 0
        for key, data in self.used.items():
            data = bytes(data)
            index[key] = (offset, len(data), data.find(_PLACEHOLDER_BODY) - 1)
            parts.append(data)
            offset += len(data)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".opcode-", suffix=".tmp")
            try:
                blob = b"".join(parts)
                with os.fdopen(fd, "wb") as fh:
                    marshal.dump((zlib.crc32(blob), index), fh)
                    fh.write(blob)
                os.replace(tmp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except (OSError, ValueError):
            pass


@contextlib.contextmanager
def cached_operator_code(path: Optional[Path]) -> Iterator[None]:
    """While active, ``exec`` of an operator wrapper's source uses the cached compiled code.

    Wrap ``import mxnet`` in it. ``exec`` is swapped back on exit; other ``exec`` calls in
    the meantime behave as usual.
    """
    if path is None:
        yield
        return
    with _lock:
        cache = _Cache(path)
        real_exec = builtins.exec

        def _exec(source: Any, globals: Any = None, locals: Any = None, /, **kwargs: Any) -> None:
            if type(source) is str:
                source = cache.code_for(source)
            if globals is None:  # the caller's namespaces, as the builtin would take them
                frame = sys._getframe(1)
                globals = frame.f_globals
                if locals is None:
                    locals = frame.f_locals
            real_exec(source, globals, locals, **kwargs)

        builtins.exec = _exec
        try:
            yield
        finally:
            builtins.exec = real_exec
        cache.save()
