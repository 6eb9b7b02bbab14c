"""A disk cache for the operator wrappers mxnet compiles on every ``import mxnet``.

MXNet 1.x builds ~2,500 Python functions (``mx.nd.*``, ``mx.sym.*``) at import
time: for each operator it writes the function's source and ``exec``s it. Compiling
those strings is ~0.25 s of every cold ``mmsctl predict``. The sources are the same
on every run except for one number, the operator's handle (an address), so the
compiled code objects are kept on disk (``marshal``, one file per Python version)
with the handle replaced by a placeholder constant, and the real handle is put back
when a cached object is used.

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


def cache_file() -> Optional[Path]:
    """Where the compiled wrappers are kept (None: caching is switched off)."""
    if os.environ.get("MMSCTL_NO_OPCACHE"):
        return None
    from mmsctl.config import cache_dir

    tag = sys.implementation.cache_tag or "python"
    return cache_dir() / "mxnet-opcode" / f"{tag}.marshal"


def _with_handle(code: CodeType, handle: int) -> tuple[CodeType, int]:
    """*code* with the placeholder constant replaced by *handle* (and how many were replaced)."""
    consts: list[object] = []
    found = 0
    for const in code.co_consts:
        if type(const) is int and const == _PLACEHOLDER:
            consts.append(handle)
            found += 1
        elif isinstance(const, CodeType):
            inner, n = _with_handle(const, handle)
            consts.append(inner)
            found += n
        else:
            consts.append(const)
    return (code.replace(co_consts=tuple(consts)) if found else code), found


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


class _Cache:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[bytes, CodeType] = {}
        self.used: dict[bytes, CodeType] = {}
        self.added = 0
        try:
            with open(path, "rb") as fh:
                loaded = marshal.load(fh)
            if isinstance(loaded, dict):
                self.entries = loaded
        except (OSError, EOFError, ValueError, TypeError):
            pass

    def code_for(self, source: str) -> Any:
        """A code object for *source* (from the cache where possible), or *source* itself."""
        span = _handle_span(source)
        if span is None:
            return source
        start, end = span
        handle = int(source[start:end])
        canonical = source[:start] + str(_PLACEHOLDER) + source[end:]
        key = hashlib.blake2b(canonical.encode("utf-8"), digest_size=16).digest()
        code = self.entries.get(key)
        if code is None:
            code = compile(canonical, "<string>", "exec")
            self.added += 1
        result, found = _with_handle(code, handle)
        if found != 1:  # not the shape we expect: leave this one alone
            return source
        self.used[key] = code
        return result

    def save(self) -> None:
        """Write what this import used, if anything was new (atomically; errors ignored)."""
        if not self.added:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".opcode-", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as fh:
                    marshal.dump(self.used, fh)
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
