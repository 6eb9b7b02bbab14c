"""A script under scripts/ imported as a module, for the tests of its functions."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.support.paths import REPO

__all__ = ["load_script"]


def load_script(name: str) -> ModuleType:
    """``scripts/NAME.py`` as the module ``NAME`` (loaded once per process)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module
