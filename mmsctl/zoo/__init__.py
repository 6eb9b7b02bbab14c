"""The model zoo: names → archives, the download cache, mirrors and untrained builds.

``resolve_model("squeezenet")`` returns a local archive path, from the cache, a
mirror or the MMS model zoo. Importing this package is light: httpx is imported
only when something must be downloaded, mxnet only by :mod:`mmsctl.zoo.untrained`.
"""

from __future__ import annotations

from mmsctl.zoo.catalog import CATALOG, ZooEntry, find_entry, lookup, suggest
from mmsctl.zoo.resolve import ResolvedModel, cached_model, pull_model, resolve_model

__all__ = [
    "CATALOG",
    "ResolvedModel",
    "ZooEntry",
    "cached_model",
    "find_entry",
    "lookup",
    "pull_model",
    "resolve_model",
    "suggest",
]
