"""``mms.model_service.gluon_vision_service``: MMS 0.x's image classifier over a Gluon network.

Each image is decoded, resized to the signature's height and width, scaled to 0..1 and normalised with
ImageNet's mean and deviation, laid out NCHW; the network's softmax is answered as its top 5 classes.
"""

from __future__ import annotations

from typing import Any

from ..utils.mxnet import ndarray
from .._mxnet import mxnet as _mx
from .mxnet_model_service import GluonImperativeBaseService

__all__ = ["GluonVisionService"]


class GluonVisionService(GluonImperativeBaseService):
    """Images in, the top 5 classes of each out, through ``self.net``."""

    def _preprocess(self, data: Any) -> Any:
        mx = _mx()
        arrays = []
        for idx, buf in enumerate(data):
            height, width = self.signature["inputs"][idx]["data_shape"][2:]
            decoded = mx.image.imresize(mx.img.imdecode(buf), width, height).astype("float32") / 255
            normalised = mx.image.color_normalize(decoded, mean=mx.nd.array([0.485, 0.456, 0.406]),
                                                  std=mx.nd.array([0.229, 0.224, 0.225]))
            arrays.append(mx.nd.transpose(normalised, (2, 0, 1)).expand_dims(axis=0))
        return arrays

    def _inference(self, data: Any) -> Any:
        super()._inference(data)
        return self.net(data[0]).softmax()

    def _postprocess(self, data: Any) -> Any:
        assert hasattr(self, "labels"), ("Can't find labels attribute. Did you put synset.txt file into model "
                                         "archive or manually load class label file in __init__?")
        return [ndarray.top_probability(output, self.labels, top=5) for output in data]
