"""The one place that imports mxnet, made to work with numpy 1.24+ and Python 3.12.

MXNet 1.9.1 is the last release. It still uses numpy aliases removed in numpy
1.24 (``np.bool``, ``np.int``, ``np.float``, ``np.object``, ``np.str``,
``np.complex``) and, on Python 3.12, ``distutils`` (gone from the standard
library). Everything in mmsctl that needs mxnet calls :func:`import_mxnet`,
which restores those names first and then imports mxnet once, with the operator
wrappers mxnet writes at import time compiled on their first call (``_lazy_ops``).
"""

from __future__ import annotations

import contextlib
import gc
import importlib.abc
import importlib.machinery
import os
import sys
import types
import warnings
from typing import Any, Iterator

__all__ = ["import_mxnet", "leave_out_operator_docs", "patch_numpy", "prepare_imports"]

_ALIASES = {
    "bool": bool,
    "int": int,
    "float": float,
    "complex": complex,
    "object": object,
    "str": str,
}


def patch_numpy() -> None:
    """Restore the numpy aliases that mxnet 1.9.1 still uses."""
    import numpy as np

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, value in _ALIASES.items():
            if name not in np.__dict__:
                setattr(np, name, value)


def _patch_distutils() -> None:
    """Give mxnet a ``distutils.version.LooseVersion`` where Python has none (3.12+)."""
    # setuptools' distutils shim makes mxnet's `import distutils` pull in pkg_resources, slow to
    # import; the standard library's distutils is enough for mxnet.
    hack = sys.modules.get("_distutils_hack")
    if "distutils" not in sys.modules and hack is not None and hasattr(hack, "remove_shim"):
        hack.remove_shim()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import distutils.version  # noqa: F401 - Python <= 3.11
        return
    except ImportError:
        pass

    class LooseVersion:
        def __init__(self, version: str) -> None:
            self.vstring = str(version)
            parts: list[Any] = []
            for piece in self.vstring.replace("-", ".").split("."):
                parts.append(int(piece) if piece.isdigit() else piece)
            self.version = parts

        def _key(self, other: Any) -> tuple[list[Any], list[Any]]:
            if not isinstance(other, LooseVersion):
                other = LooseVersion(other)
            return [str(p) if not isinstance(p, int) else p for p in self.version], [
                str(p) if not isinstance(p, int) else p for p in other.version
            ]

        def __lt__(self, other: Any) -> bool:
            a, b = self._key(other)
            try:
                return a < b
            except TypeError:
                return [str(x) for x in a] < [str(x) for x in b]

        def __ge__(self, other: Any) -> bool:
            return not self.__lt__(other)

        def __eq__(self, other: Any) -> bool:
            a, b = self._key(other)
            return a == b

        def __le__(self, other: Any) -> bool:
            return self.__lt__(other) or self.__eq__(other)

        def __gt__(self, other: Any) -> bool:
            return not self.__le__(other)

    pkg = types.ModuleType("distutils")
    mod = types.ModuleType("distutils.version")
    mod.LooseVersion = LooseVersion  # type: ignore[attr-defined]
    # mxnet compares plain dotted versions with it (numpy_op_fallback): the same ordering does.
    mod.StrictVersion = LooseVersion  # type: ignore[attr-defined]
    pkg.version = mod  # type: ignore[attr-defined]
    sys.modules.setdefault("distutils", pkg)
    sys.modules.setdefault("distutils.version", mod)


def prepare_imports() -> None:
    """Make ``import mxnet`` work (numpy aliases, distutils) without importing it yet.

    Handlers from archives import mxnet themselves; this runs before they load.
    """
    patch_numpy()
    _patch_distutils()


#: Modules mxnet imports at start-up and uses only in functions a server never calls (ONNX export,
#: downloads): memory and start-up every worker would pay for nothing. See :func:`_deferred_imports`.
DEFERRED = ("onnx", "requests")


class _Deferred(types.ModuleType):
    """Stands for a module until something reads one of its attributes, then forwards to the real one."""

    def __getattr__(self, attr: str) -> Any:
        import importlib

        real = sys.modules.get(self.__name__)
        if real is None or real is self:
            sys.modules.pop(self.__name__, None)
            real = importlib.import_module(self.__name__)
        return getattr(real, attr)


@contextlib.contextmanager
def _deferred_imports(names: tuple[str, ...] = DEFERRED) -> Iterator[None]:
    """While mxnet imports, ``import onnx`` (and the others) binds a stand-in that loads the real
    module on first use; afterwards the stand-ins leave ``sys.modules``, so code that imports
    them later gets the real modules as usual. Names not installed are left alone (mxnet's own
    ``try: import onnx / except ImportError`` then works as before)."""
    import importlib.util

    placed = []
    for name in names:
        if name in sys.modules:
            continue
        try:
            if importlib.util.find_spec(name) is None:
                continue
        except (ImportError, ValueError):
            continue
        sys.modules[name] = _Deferred(name)
        placed.append(name)
    try:
        yield
    finally:
        for name in placed:
            if isinstance(sys.modules.get(name), _Deferred):
                del sys.modules[name]


#: The mxnet modules that write each operator wrapper's documentation (see leave_out_operator_docs).
_DOC_MODULES = ("mxnet.ndarray_doc", "mxnet.symbol_doc")
_operator_docs = True


def leave_out_operator_docs() -> None:
    """Have :func:`import_mxnet` give mxnet's ~2,500 operator wrappers a one-line docstring instead
    of the generated reference text: for worker processes, which never show it (it costs memory and
    start-up in each). Call it before mxnet is imported."""
    global _operator_docs
    _operator_docs = False


def _short_doc(func_name: str, *args: Any, **kwargs: Any) -> str:
    return f"MXNet operator {func_name} (its documentation is left out in mmsctl's worker processes)."


class _ShortDocs(importlib.abc.MetaPathFinder):
    """Finds mxnet's doc-writing modules as usual and swaps their ``_build_doc`` once they have run."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in _DOC_MODULES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        real = spec.loader.exec_module

        def exec_module(module: types.ModuleType) -> None:
            real(module)
            module._build_doc = _short_doc  # type: ignore[attr-defined]

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


@contextlib.contextmanager
def _operator_doc_choice() -> Iterator[None]:
    if _operator_docs:
        yield
        return
    finder = _ShortDocs()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


_mx: Any = None


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while mxnet imports.

    The import makes tens of thousands of objects that live as long as the process, and Python runs
    collection after collection among them that free nothing, paid by every worker, `predict` and
    Lambda cold start.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def import_mxnet() -> Any:
    """Import mxnet once, with the compatibility patches applied first.

    Returns:
        The ``mxnet`` module.

    Raises:
        EngineError: mxnet is not installed or fails to load.
    """
    global _mx
    if _mx is not None:
        return _mx
    from mmsctl.errors import EngineError

    # MXNet prints a warning per process about its OpenMP settings; quieten it.
    os.environ.setdefault("MXNET_SUBGRAPH_VERBOSE", "0")
    from mmsctl.engine._lazy_ops import lazy_operator_wrappers

    try:
        with _collector_paused():
            prepare_imports()
            with warnings.catch_warnings(), lazy_operator_wrappers(), _deferred_imports(), _operator_doc_choice():
                warnings.simplefilter("ignore")
                import mxnet as mx
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise EngineError(
            f"mxnet cannot be imported: {exc}",
            hint="install it with: pip install 'mxnet==1.9.1' 'numpy<2'",
        ) from exc
    _mx = mx
    return mx
