"""``mms.utils.mxnet.image``: images as MXNet NDArrays (HWC, RGB) for MMS 0.x services."""

from __future__ import annotations

import base64
from io import BytesIO
from typing import Any, Optional

from ..._mxnet import mxnet as _mx

__all__ = ["color_normalize", "fixed_crop", "read", "resize", "transform_shape", "write"]


def transform_shape(img_arr: Any, dim_order: str = "NCHW") -> Any:
    """An HWC image as a batch of one: NCHW (``dim_order="NCHW"``) or NHWC."""
    assert dim_order in "NCHW" or dim_order in "NHWC", "dim_order must be 'NCHW' or 'NHWC'."
    mx = _mx()
    if dim_order == "NCHW":
        img_arr = mx.nd.transpose(img_arr, (2, 0, 1))
    return mx.nd.expand_dims(img_arr, axis=0)


def read(buf: Any, flag: int = 1, to_rgb: bool = True, out: Optional[Any] = None) -> Any:
    """Encoded image bytes decoded to an HWC NDArray (``flag=0``: grayscale; ``to_rgb=False``: BGR)."""
    return _mx().img.imdecode(buf, flag, to_rgb, out)


def write(img_arr: Any, flag: int = 1, format: str = "jpeg", dim_order: str = "CHW") -> str:  # noqa: A002
    """An image NDArray (CHW or HWC) encoded as *format*, in base64 text."""
    assert dim_order in "CHW" or dim_order in "HWC", "dim_order must be 'CHW' or 'HWC'."
    from PIL import Image

    mx = _mx()
    if dim_order == "CHW":
        img_arr = mx.nd.transpose(img_arr, (1, 2, 0))
    mode = "RGB" if flag == 1 else "L"
    if mode == "L":
        img_arr = mx.nd.reshape(img_arr, (img_arr.shape[0], img_arr.shape[1]))
    out = BytesIO()
    Image.fromarray(img_arr.astype("uint8").asnumpy(), mode).save(out, format=format)
    return base64.b64encode(out.getvalue()).decode("utf-8")


def resize(src: Any, new_width: int, new_height: int, interp: int = 2) -> Any:
    """An HWC image resized (``interp`` as MXNet's: 2 is area-based)."""
    return _mx().img.imresize(src, new_width, new_height, interp)


def fixed_crop(src: Any, x0: int, y0: int, w: int, h: int, size: Optional[tuple[int, int]] = None,
               interp: int = 2) -> Any:
    """The *w* × *h* area at (*x0*, *y0*) of an HWC image, resized to *size* where given."""
    return _mx().img.fixed_crop(src, x0, y0, w, h, size, interp)


def color_normalize(src: Any, mean: Any, std: Optional[Any] = None) -> Any:
    """``(src - mean) / std`` in float32."""
    return _mx().img.color_normalize(src.astype("float32"), mean, std)
