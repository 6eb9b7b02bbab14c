"""How one value reads in a table cell: shared by rich's tables (:mod:`mmsctl.cli.render`) and the lean
predict's plain columns (:mod:`mmsctl.cli.lean`), which must print the same text without importing rich."""

from __future__ import annotations

from typing import Any

__all__ = ["cell"]


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ",".join(cell(v) for v in value)
    return str(value)
