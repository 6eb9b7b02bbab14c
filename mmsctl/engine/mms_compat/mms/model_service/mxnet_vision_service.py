"""``mms.model_service.mxnet_vision_service``: MMS 0.x's image classifier over ``MXNetBaseService``.

Each input image is decoded to RGB, resized to the signature's height and width, laid out NCHW, and each
output answered as its top 5 ``{"probability", "class"}`` by ``labels`` (the archive's ``synset.txt``).
"""

from __future__ import annotations

from typing import Any

from ..utils.mxnet import image, ndarray
from .mxnet_model_service import MXNetBaseService

__all__ = ["MXNetVisionService"]


class MXNetVisionService(MXNetBaseService):
    """Images in, the top 5 classes of each out."""

    def _preprocess(self, data: Any) -> Any:
        arrays = []
        for idx, buf in enumerate(data):
            height, width = self.signature["inputs"][idx]["data_shape"][2:]
            decoded = image.resize(image.read(buf), width, height)
            arrays.append(image.transform_shape(decoded))
        return arrays

    def _postprocess(self, data: Any) -> Any:
        assert hasattr(self, "labels"), ("Can't find labels attribute. Did you put synset.txt file into model "
                                         "archive or manually load class label file in __init__?")
        return [ndarray.top_probability(output, self.labels, top=5) for output in data]
