"""``mms.model_service.mxnet_model_service``: MMS 0.x's MXNet services.

``MXNetBaseService`` binds the checkpoint the manifest names (``Model.Symbol``, ``Model.Parameters``) at
batch size 1 with the signature's input shapes (a 0 in a shape counts as 1), reads ``synset.txt`` into
``labels`` where the archive has one, and runs ``mx.nd.array`` on each input, a forward pass, and
``str(output.asnumpy().tolist())`` on each output. ``GluonImperativeBaseService`` holds a Gluon network
given to it instead. MXNet is imported through mmsctl (:func:`mmsctl.engine.mxnet_compat.import_mxnet`) when a
service is built, not when this module is imported: a service that only subclasses ``SingleNodeService``
never loads it.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Optional

from .._mxnet import mxnet as _mx
from .model_service import ModelService, SingleNodeService

__all__ = ["GluonImperativeBaseService", "MXNetBaseService", "ModelService", "SingleNodeService",
           "check_input_shape"]

log = logging.getLogger(__name__)


def check_input_shape(inputs: Any, signature: dict[str, Any]) -> None:
    """Assert that *inputs* are NDArrays of the signature's ranks and (past the batch axis) its non-zero sizes."""
    mx = _mx()
    assert isinstance(inputs, list), "Input data must be a list."
    wanted = signature["inputs"]
    assert len(inputs) == len(wanted), \
        f"Input number mismatches with signature. {len(wanted)} expected but got {len(inputs)}."
    for array, spec in zip(inputs, wanted):
        shape = spec["data_shape"]
        assert isinstance(array, mx.nd.NDArray), "Each input must be NDArray."
        assert len(array.shape) == len(shape), (
            f"Shape dimension of input {spec['data_name']} mismatches with signature. "
            f"{len(shape)} expected but got {len(array.shape)}.")
        for axis, size in enumerate(array.shape):
            assert axis == 0 or shape[axis] == 0 or shape[axis] == size, (
                f"Input {spec['data_name']} has different shape with signature. {shape} expected but got "
                f"{array.shape}.")


def _signature_of(model_dir: str, manifest: dict[str, Any]) -> Any:
    path = os.path.join(model_dir, manifest["Model"]["Signature"])
    if not os.path.isfile(path):
        raise RuntimeError("Signature file is not found. Please put signature.json into the model file "
                           "directory..." + path)
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except Exception:  # noqa: BLE001 - unreadable or not JSON: MMS's message
        raise Exception(f"Failed to open model signature file: {path}") from None


class _MXNetService(SingleNodeService):
    """What both MXNet services have: the model's name, its MXNet context, its signature, ``labels`` from
    ``synset.txt`` (where the archive has one), ``ping`` (MXNet's version)."""

    def __init__(self, model_name: str, model_dir: str, manifest: dict[str, Any], gpu: Any = None) -> None:
        super().__init__(model_name, model_dir, manifest, gpu)
        mx = _mx()
        self.model_name = model_name
        self.param_filename: Optional[str] = None
        self.ctx = mx.gpu(int(gpu)) if gpu is not None else mx.cpu()
        self._signature = _signature_of(model_dir, manifest)

    def _read_labels(self, model_dir: str) -> None:
        path = os.path.join(model_dir, "synset.txt")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as fh:
                self.labels = [line.strip() for line in fh]

    def ping(self) -> Any:
        return _mx().__version__

    @property
    def signature(self) -> Any:
        return self._signature


class MXNetBaseService(_MXNetService):
    """A symbolic MXNet checkpoint, bound for inference at batch size 1 (``labels`` from ``synset.txt``)."""

    def __init__(self, model_name: str, model_dir: str, manifest: dict[str, Any], gpu: Any = None) -> None:
        super().__init__(model_name, model_dir, manifest, gpu)
        mx = _mx()
        names, shapes = [], []
        for spec in self._signature["inputs"]:
            # batch size 1, and 1 for every 0 in the shape, in the signature itself (its check reads them so)
            spec["data_shape"][:] = [1] + [size or 1 for size in spec["data_shape"][1:]]
            names.append(spec["data_name"])
            shapes.append((spec["data_name"], tuple(spec["data_shape"])))
        epoch = 0
        try:
            self.param_filename = manifest["Model"]["Parameters"]
            epoch = int(self.param_filename[len(model_name) + 1:-len(".params")])
        except Exception:  # noqa: BLE001 - no epoch in the file name: epoch 0, as MMS does
            log.info("Failed to parse epoch from param file, setting epoch to 0")
        prefix = os.path.join(model_dir, manifest["Model"]["Symbol"][:-len("-symbol.json")])
        sym, arg_params, aux_params = mx.model.load_checkpoint(prefix, epoch)
        self.mx_model = mx.mod.Module(symbol=sym, context=self.ctx, data_names=names, label_names=None)
        self.mx_model.bind(for_training=False, data_shapes=shapes)
        self.mx_model.set_params(arg_params, aux_params, allow_missing=True, allow_extra=True)
        self._read_labels(model_dir)

    def _preprocess(self, data: Any) -> Any:
        return [_mx().nd.array(item) for item in data]

    def _postprocess(self, data: Any) -> Any:
        return [str(item.asnumpy().tolist()) for item in data]

    def _inference(self, data: Any) -> Any:
        mx = _mx()
        check_input_shape(data, self.signature)
        self.mx_model.forward(mx.io.DataBatch([item.as_in_context(self.ctx) for item in data]))
        outputs = self.mx_model.get_outputs()
        for output in outputs:
            for array in (output if isinstance(output, list) else [output]):
                if isinstance(array, mx.nd.NDArray):
                    array.wait_to_read()
        return outputs


class GluonImperativeBaseService(_MXNetService):
    """A Gluon network given as *net*, its parameters loaded from the manifest's ``Model.Parameters``."""

    def __init__(self, model_name: str, model_dir: str, manifest: dict[str, Any], net: Any = None,
                 gpu: Any = None) -> None:
        super().__init__(model_name, model_dir, manifest, gpu)
        self.net = net
        try:
            self.param_filename = manifest["Model"]["Parameters"]
            if self.param_filename or self.net is not None:
                self.net.load_params(os.path.join(model_dir, self.param_filename), ctx=self.ctx)
            else:
                log.info("No parameters file given for this imperative service")
        except Exception:  # noqa: BLE001 - no parameters to load: the network as given, as MMS does
            log.info("Failed to parse epoch from param file, setting epoch to 0")
        self._read_labels(model_dir)

    def _preprocess(self, data: Any) -> Any:
        return None

    def _postprocess(self, data: Any) -> Any:
        return None

    def _inference(self, data: Any) -> Any:
        check_input_shape(data, self.signature)
        return None
