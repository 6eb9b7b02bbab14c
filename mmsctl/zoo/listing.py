"""The rows of ``mmsctl zoo list``: the catalog joined with what is in the cache."""

from __future__ import annotations

from typing import Any

from mmsctl.zoo import cache
from mmsctl.zoo.catalog import CATALOG

__all__ = ["zoo_rows"]


def zoo_rows(*, cached_only: bool = False) -> list[dict[str, Any]]:
    """One plain dict per zoo model, plus one per cached archive the zoo does not list.

    ``size`` is the cached file's size where cached, else the size MMS documents;
    ``cached`` says which.
    """
    by_path = {entry.path: entry for entry in cache.entries()}
    rows: list[dict[str, Any]] = []
    for zoo in CATALOG:
        path = cache.zoo_path(zoo.filename)
        hit = by_path.pop(path, None)
        rows.append(
            {
                "name": zoo.name,
                "title": zoo.title,
                "aliases": list(zoo.aliases),
                "task": zoo.task,
                "framework": zoo.framework,
                "dataset": zoo.dataset,
                "size": hit.size if hit else zoo.size_bytes,
                "cached": hit is not None,
                "path": str(path) if hit else None,
                "url": zoo.url,
            }
        )
    for extra in by_path.values():
        rows.append(
            {
                "name": extra.name,
                "title": None,
                "aliases": [],
                "task": None,
                "framework": None,
                "dataset": None,
                "size": extra.size,
                "cached": True,
                "path": str(extra.path),
                "url": extra.url,
            }
        )
    if cached_only:
        rows = [r for r in rows if r["cached"]]
    return rows
