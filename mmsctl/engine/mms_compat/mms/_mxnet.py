"""MXNet for the package's services, imported when first used and through mmsctl (its patches, its kernels)."""

from __future__ import annotations

from typing import Any

__all__ = ["mxnet"]


def mxnet() -> Any:
    """The ``mxnet`` module (:func:`mmsctl.engine.mxnet_compat.import_mxnet`)."""
    from mmsctl.engine.mxnet_compat import import_mxnet

    return import_mxnet()
