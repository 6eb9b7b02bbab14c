"""``mms.utils.mxnet.ndarray``: reading a classifier's output."""

from __future__ import annotations

from typing import Any

from ..._mxnet import mxnet as _mx

__all__ = ["top_probability"]


def top_probability(data: Any, labels: list[str], top: int = 5) -> list[dict[str, Any]]:
    """The *top* classes of the first row of *data* (axes past the second squeezed), most probable first,
    as ``{"probability": p, "class": label}``."""
    mx = _mx()
    if len(data.shape) > 2:
        data = mx.nd.array(data.asnumpy().squeeze(axis=tuple(range(2, len(data.shape)))))
    order = mx.nd.argsort(data[0], is_ascend=False)[:top].asnumpy().astype(int)
    return [{"probability": float(data[0, int(i)].asscalar()), "class": labels[int(i)]} for i in order]
