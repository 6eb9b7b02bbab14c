"""mxnet's operator wrappers, each compiled on its first call instead of all during ``import mxnet``.

MXNet 1.x writes the source of ~2,500 Python functions (``mx.nd.*``, ``mx.sym.*``) while it imports and
``exec``s each one. Compiling them is most of a cold ``import mxnet``, and a process calls a handful.
While mxnet imports, :func:`lazy_operator_wrappers` has
each such ``exec`` define a stand-in under the wrapper's name instead; mxnet sets its name, documentation
and module as it would the wrapper's, and the stand-in compiles the wrapper from the very same source in
the very same namespace on its first call and calls it from then on. What a wrapper does is unchanged;
``inspect.signature`` of one shows ``(*args, **kwargs)``. Nothing is cached on disk.

``MMSCTL_LAZY_OPS=0`` has mxnet compile them all as it always did.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import sys
import threading
from typing import Any, Callable, Iterator, Optional

__all__ = ["enabled", "lazy_operator_wrappers"]

#: What every operator wrapper's source calls with its operator's handle (mx.nd and mx.sym).
_CALLS = ("_imperative_invoke(", "_symbol_creator(")
_lock = threading.Lock()


def enabled() -> bool:
    """Whether wrappers are compiled on first call (``MMSCTL_LAZY_OPS`` is not ``0``/``off``/``false``/``no``)."""
    return os.environ.get("MMSCTL_LAZY_OPS", "").strip().lower() not in ("0", "off", "false", "no")


def _wrapper_name(source: str) -> Optional[str]:
    """The function an operator wrapper's source defines, or None for any other source."""
    head = source.lstrip()
    if not head.startswith("def ") or not any(call in source for call in _CALLS):
        return None
    name = head[4:head.find("(")]
    return name if name.isidentifier() else None


def _stand_in(source: str, name: str, namespace: dict[str, Any], real_exec: Callable[..., Any]) -> Callable[..., Any]:
    """A function that compiles *source* in *namespace* on its first call and then calls what it defines."""
    compiled: Optional[Callable[..., Any]] = None

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nonlocal compiled
        if compiled is None:
            scope: dict[str, Any] = {}
            real_exec(source, namespace, scope)  # two threads at once both compile it: the same function
            compiled = scope[name]
        return compiled(*args, **kwargs)

    return wrapper


@contextlib.contextmanager
def lazy_operator_wrappers() -> Iterator[None]:
    """While active, ``exec`` of an operator wrapper's source defines a stand-in compiled on first call.

    Wrap ``import mxnet`` in it. ``exec`` is swapped back on exit; any other ``exec`` in the meantime
    runs as usual.
    """
    if not enabled():
        yield
        return
    with _lock:
        real_exec = builtins.exec

        def _exec(source: Any, globals: Any = None, locals: Any = None, /, **kwargs: Any) -> None:
            if globals is None:  # the caller's namespaces, as the builtin would take them
                frame = sys._getframe(1)
                globals = frame.f_globals
                if locals is None:
                    locals = frame.f_locals
            name = _wrapper_name(source) if type(source) is str and not kwargs else None
            if name is None:
                real_exec(source, globals, locals, **kwargs)
                return
            (globals if locals is None else locals)[name] = _stand_in(source, name, globals, real_exec)

        builtins.exec = _exec
        try:
            yield
        finally:
            builtins.exec = real_exec
