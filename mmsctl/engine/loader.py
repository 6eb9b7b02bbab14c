"""Find and start a handler the way MMS 1.1.11's model loader does.

A handler string is ``module`` or ``module:function`` (a trailing ``.py`` and any
folder part are dropped, as MMS does). The module is imported from the model
folder; then, like MMS:

* if it has the function (default ``handle``), that function is the entry point
  and is called once with ``(None, context)`` at load time;
* otherwise the module must define exactly one class: it is instantiated, its
  ``initialize(context)`` is called, and its ``handle(data, context)`` bound
  method is the entry point;
* a legacy MMS 0.4 archive (``MANIFEST.json`` at the top) names a service file
  whose ``SingleNodeService`` subclass is built with
  ``(model_name, model_dir, manifest, gpu)`` and initialised.

Handler modules of different models often share names (``model_handler``,
``mxnet_utils``…), so each model's modules live in a :class:`ModuleScope`: they
are in ``sys.modules`` (and the model folder on ``sys.path``) only while that
model's code runs.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Optional

from mmsctl.engine.context import Context, MetricsStore
from mmsctl.errors import HandlerError

__all__ = ["LoadedHandler", "ModuleScope", "load_handler", "split_handler"]

log = logging.getLogger("mmsctl.engine")

_MMS_HINT = (
    "mmsctl provides MMS's service classes (mms.model_service.*, mms.service, mms.utils.mxnet.*) but not this "
    "module: install multi-model-server==1.1.11 in this environment (its `mms` package is then used instead)"
)


@dataclass
class ModuleScope:
    """The modules one model imported, swapped into ``sys.modules`` only while its code runs."""

    paths: list[str]
    modules: dict[str, ModuleType] = field(default_factory=dict)
    _hidden: dict[str, ModuleType] = field(default_factory=dict, repr=False)
    _before: frozenset[str] = field(default_factory=frozenset, repr=False)
    _depth: int = field(default=0, repr=False)

    def owns(self, module: ModuleType) -> bool:
        files = [getattr(module, "__file__", None)] + list(getattr(module, "__path__", None) or [])
        for f in files:
            if not f:
                continue
            f = os.path.abspath(f)
            if any(f == p or f.startswith(p + os.sep) for p in self.paths):
                return True
        return False

    def __enter__(self) -> "ModuleScope":
        self._depth += 1
        if self._depth > 1:  # already in: a worker process pins its one model's scope (see pin)
            return self
        for p in reversed(self.paths):
            sys.path.insert(0, p)
        self._hidden = {}
        for name, mod in self.modules.items():
            prev = sys.modules.get(name)
            if prev is not None and prev is not mod:
                self._hidden[name] = prev
            sys.modules[name] = mod
        self._before = frozenset(sys.modules)
        return self

    def pin(self) -> None:
        """Stay in this scope for the rest of the process (a worker serves one model): entering and
        leaving it per batch walks ``sys.modules`` twice, a large share of a no-op batch's cost."""
        self.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth > 0:
            return
        for p in self.paths:
            try:
                sys.path.remove(p)
            except ValueError:
                pass
        for name in set(sys.modules) - self._before:
            mod = sys.modules.get(name)
            if mod is not None and self.owns(mod):
                self.modules[name] = mod
        for name, mod in self.modules.items():
            if sys.modules.get(name) is mod:
                del sys.modules[name]
        sys.modules.update(self._hidden)
        self._hidden = {}


@dataclass
class LoadedHandler:
    """A started handler: call ``entry(data, context)`` inside ``scope``."""

    entry: Callable[[Any, Context], Any]
    scope: ModuleScope
    module: ModuleType
    instance: Any = None
    description: str = ""


def split_handler(handler: str) -> tuple[str, Optional[str]]:
    """``"pkg/mod.py:fn"`` -> ``("mod", "fn")``, the way MMS reads a manifest's handler."""
    module_name, _, function = handler.partition(":")
    if module_name.endswith(".py"):
        module_name = module_name[:-3]
    module_name = module_name.split("/")[-1]
    return module_name, (function or None)


def _import_error(what: str, exc: BaseException) -> HandlerError:
    missing = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
    if missing and missing.split(".")[0] == "mms":
        return HandlerError(f"{what} needs `{missing}`, which is not installed", hint=_MMS_HINT)
    return HandlerError(f"{what} failed to import: {type(exc).__name__}: {exc}")


def _not_found(what: str, model_dir: Path, overridden: bool) -> HandlerError:
    """The handler module is nowhere: the caller's handler (the argument is wrong), or the manifest's."""
    if overridden:
        return HandlerError(f"{what} not found: no such module in the archive and no such .py file",
                            hint="name a module inside the archive (module or module:function) or a .py file "
                            "(path/to/file.py or path/to/file.py:function)", param="handler")
    return HandlerError(f"{what} not found in {model_dir}",
                        hint="the manifest's handler must name a .py file inside the archive (module or module:function)")


def _module_from_file(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, str(path))
    if spec is None or spec.loader is None:
        raise HandlerError(f"cannot load handler file {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _classes_of(module: ModuleType) -> list[type]:
    return [
        member
        for _, member in inspect.getmembers(module, inspect.isclass)
        if member.__module__ == module.__name__
    ]


def load_handler(
    handler: str,
    model_dir: Path,
    context: Context,
    *,
    handler_file: Optional[Path] = None,
    overridden: bool = False,
) -> LoadedHandler:
    """Import and start an MMS 1.x handler for the model in *model_dir*.

    Args:
        handler: ``module`` or ``module:function`` as in the manifest.
        model_dir: the extracted archive; it goes first on ``sys.path``.
        context: the context passed to the entry point at load time.
        handler_file: load the module from this file instead of importing it by name
            (the built-in handler, or ``--handler path/to/file.py``).
        overridden: *handler* is the caller's, not the manifest's (an error is about the ``handler`` argument).

    Raises:
        HandlerError: the module cannot be imported, has no entry point, or fails to start.
    """
    module_name, function = split_handler(handler)
    if not module_name:
        raise HandlerError(f"invalid handler {handler!r}: expected module or module:function")
    paths = [os.path.abspath(model_dir)]
    if handler_file is not None:
        paths.append(os.path.abspath(handler_file.parent))
    scope = ModuleScope(paths)
    with scope:
        module = _import_handler(module_name, model_dir, handler_file, overridden)
        function = function or "handle"
        if hasattr(module, function):
            entry = _start_function(module, module_name, function, context)
            return LoadedHandler(entry, scope, module, None, f"{module_name}:{function}")
        instance = _start_class(module, module_name, function, context)
        return LoadedHandler(instance.handle, scope, module, instance,
                             f"{module_name}.{type(instance).__name__}")


def _import_handler(module_name: str, model_dir: Path, handler_file: Optional[Path],
                    overridden: bool = False) -> ModuleType:
    """Import the handler module (inside its scope); any failure of user code is a HandlerError."""
    what = f"handler module {module_name!r}"
    try:
        if handler_file is not None:
            return _module_from_file(module_name, handler_file)
        importlib.invalidate_caches()
        return importlib.import_module(module_name)
    except HandlerError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise _not_found(what, model_dir, overridden) from exc
        raise _import_error(what, exc) from exc
    except BaseException as exc:  # noqa: BLE001 - any failure in user code is a handler error
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise _import_error(what, exc) from exc


def _start_function(module: ModuleType, module_name: str, function: str, context: Context) -> Callable[..., Any]:
    """A function entry point, called once with ``(None, context)`` as MMS does at load time."""
    entry = getattr(module, function)
    if not callable(entry):
        raise HandlerError(f"{module_name}:{function} is not callable")
    context.metrics = MetricsStore({}, context.model_name)
    try:
        entry(None, context)  # MMS initialises function handlers with data=None
    except Exception as exc:  # noqa: BLE001
        raise HandlerError(
            f"handler {module_name}:{function} failed to initialise: {type(exc).__name__}: {exc}"
        ) from exc
    return entry


def _start_class(module: ModuleType, module_name: str, function: str, context: Context) -> Any:
    """The module's one class, instantiated and initialised (it has ``handle(data, context)``)."""
    classes = _classes_of(module)
    if len(classes) != 1:
        names = ", ".join(c.__name__ for c in classes) or "none"
        raise HandlerError(
            f"handler module {module_name!r} has no function {function!r} and defines {len(classes)} classes "
            f"({names}); expected a function entry point or exactly one class"
        )
    cls = classes[0]
    try:
        instance = cls()
    except Exception as exc:  # noqa: BLE001
        raise HandlerError(f"handler class {cls.__name__}() failed: {type(exc).__name__}: {exc}") from exc
    if not callable(getattr(instance, "handle", None)):
        raise HandlerError(f"handler class {cls.__name__} has no handle(data, context) method")
    initialize = getattr(instance, "initialize", None)
    if callable(initialize):
        try:
            initialize(context)
        except Exception as exc:  # noqa: BLE001
            # MMS only logs this and fails every request later; failing the load is clearer.
            raise HandlerError(f"{cls.__name__}.initialize() failed: {type(exc).__name__}: {exc}") from exc
    return instance


def load_legacy_handler(
    service_file: str,
    model_dir: Path,
    manifest: Optional[dict[str, Any]],
    context: Context,
) -> LoadedHandler:
    """Start an MMS 0.4 ``SingleNodeService`` subclass named by a legacy manifest.

    Raises:
        HandlerError: the file is missing, ``mms`` is not installed, or no service class is found.
    """
    if not service_file.endswith(".py"):
        service_file += ".py"
    path = Path(model_dir) / service_file
    if not path.is_file():
        raise HandlerError(f"legacy service file {service_file!r} not found in the archive")
    scope = ModuleScope([os.path.abspath(model_dir)])
    name = path.stem
    with scope:
        try:
            module = _module_from_file(name, path)
            from mms.model_service.mxnet_model_service import SingleNodeService
        except Exception as exc:  # noqa: BLE001
            raise _import_error(f"legacy service {service_file!r}", exc) from exc
        classes = [c for c in _classes_of(module) if issubclass(c, SingleNodeService)]
        if not classes:
            raise HandlerError(f"legacy service {service_file!r} defines no SingleNodeService subclass")
        cls = classes[0]
        try:
            instance = cls(context.model_name, str(model_dir), manifest, context.system_properties["gpu_id"])
            instance.initialize(context)
        except Exception as exc:  # noqa: BLE001
            raise HandlerError(
                f"legacy service {cls.__name__} failed to initialise: {type(exc).__name__}: {exc}"
            ) from exc
    return LoadedHandler(instance.handle, scope, module, instance, f"{name}.{cls.__name__} (legacy)")
