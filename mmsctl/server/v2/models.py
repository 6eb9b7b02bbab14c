"""What a registered model looks like to the Open Inference Protocol, and how its tensors reach its handler.

Two kinds of model:

* an image classifier (the built-in handler): its input is the archive's ``signature.json``
  (``data_0`` FP32 ``[-1, 3, 224, 224]``), and it takes either that FP32 tensor or a BYTES tensor of
  encoded images under any name. Each image is one request of the handler; the images of one infer
  request are a client's batch, queued as one job and run in handler calls of up to
  max(batchSize, :data:`CLIENT_BATCH`) images (one forward pass each, at batchSize 1 too); an FP32
  image reaches the handler as a ``.npy`` array. Its output is the
  probability of every class (FP32 ``[n, classes]``), or with ``classification: k`` Triton's
  ``"score:index:label"`` strings of the top k (BYTES ``[n, k]``).
* any other handler: one request per infer request; a BYTES input of one element is its raw
  body (a parameter named after the input), any other tensor its ``.npy`` bytes; the handler's
  answer is the one element of the BYTES output ``output``. A handler declares other names
  and datatypes with a ``signature.json`` beside it (``{"inputs": [{"data_name", "datatype",
  "data_shape"}], "outputs": [...]}``).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

from mmsctl.engine.builtin import VISION_HANDLER_MODULE
from mmsctl.engine.protocol import Parameter, RequestItem, ResponseItem
from mmsctl.engine.spec import ServiceSpec
from mmsctl.engine.tensors import DATATYPES, RequestedOutput, Tensor, TensorError
from mmsctl.error_body import parse_error_body
from mmsctl.server.errors import ApiException, BadRequest
from mmsctl.server.workers.model import Model

__all__ = ["ModelSignature", "V2Failure", "signature_of"]

#: What a classifier's input metadata says it also takes: encoded images (JPEG, PNG, HEIC…), one per element,
#: as a BYTES tensor under any name (``content_type`` as Seldon's MLServer names a tensor's content).
IMAGE_BYTES = {"datatype": "BYTES", "shape": [-1], "content_type": "image"}
#: The classifier's output when signature.json names none.
DEFAULT_OUTPUT = "probabilities"
#: Signatures read, by the spec a model's workers load.
_SIGNATURES: dict[ServiceSpec, "ModelSignature"] = {}
#: How many times :data:`_SIGNATURES` was emptied: while it is unchanged, a signature kept elsewhere for a spec is
#: still what :func:`signature_of` gives for it (:mod:`~mmsctl.server.v2.calls`' recipes check it instead of
#: hashing the spec).
generation = 0
#: What the handler is asked for when every class's probability is wanted.
ALL_CLASSES = 1 << 30
#: The built-in handler's answer to ``scores=npy``: every class's score, a float32 ``.npy`` vector.
NPY_TYPE = "application/x-npy"
#: The most images of one infer request the built-in handler gets in one call (one forward pass) where the
#: model's batchSize is smaller: a client's batch (tritonclient's, ``mmsctl predict DIR``'s) runs as a batch.
CLIENT_BATCH = 8
#: The most input elements a built-in handler's worker binds (its ``MAX_INPUT_ELEMENTS``): a client's batch of
#: large images is cut to fit.
MAX_BATCH_ELEMENTS = 2**28


class V2Failure(ApiException):
    """A handler's error answer for one request of an infer call (its status and message)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class TensorSpec:
    name: str
    datatype: str
    shape: list[int]

    def metadata(self) -> dict[str, Any]:
        return {"name": self.name, "datatype": self.datatype, "shape": self.shape}


@dataclass
class ModelSignature:
    """A model's v2 inputs and outputs, and (a classifier) its labels."""

    classifier: bool
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    labels: Optional[list[str]] = None
    _index: dict[str, list[int]] = field(default_factory=dict, repr=False)

    def input_metadata(self) -> list[dict[str, Any]]:
        """The inputs as model metadata lists them. A classifier's one FP32 tensor also says, in its
        ``parameters``, that encoded images go as a BYTES ``[n]`` tensor of any name: one input stays one
        (Triton's image_client and ``mmsctl predict``'s lean path take ``inputs[0]`` and expect no second)."""
        inputs = [t.metadata() for t in self.inputs]
        if self.classifier:
            inputs[0]["parameters"] = {"also_accepts": [IMAGE_BYTES]}
        return inputs

    def label_index(self, label: str, used: set[int]) -> int:
        """The class index of *label* (labels that repeat get their indices in order)."""
        if not self._index and self.labels:
            for i, name in enumerate(self.labels):
                self._index.setdefault(name, []).append(i)
        for index in self._index.get(label, []):
            if index not in used:
                return index
        try:
            return int(label)  # no synset: the handler names classes by index
        except ValueError:
            return -1


def _read_json(path: Path) -> Any:
    try:
        if path.is_file() and path.stat().st_size < 1 << 20:
            return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        pass
    return None


def _declared(entries: Any, default: str) -> list[TensorSpec]:
    """Tensors a signature.json declares (``data_name``, ``datatype``, ``data_shape``; 0 means any)."""
    specs = []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("data_name"), str):
            continue
        datatype = entry.get("datatype") or entry.get("data_type") or default
        shape = entry.get("data_shape")
        dims = [int(d) if isinstance(d, int) and d > 0 else -1 for d in shape] if isinstance(shape, list) else [-1]
        specs.append(TensorSpec(entry["data_name"], datatype if datatype in DATATYPES else default, dims))
    return specs


def signature_of(model: Model) -> ModelSignature:
    """*model*'s v2 signature, from its folder (read once per folder and handler)."""
    global generation
    cached = _SIGNATURES.get(model.spec)
    if cached is not None:
        return cached
    root = Path(model.spec.root)
    signature = _read_json(root / "signature.json") or {}
    handler = model.spec.chosen_handler
    inputs = _declared(signature.get("inputs") if isinstance(signature, dict) else None, "FP32")
    classifier = (handler is None or handler.split(":")[0] == VISION_HANDLER_MODULE) \
        and len(inputs) == 1 and len(inputs[0].shape) == 4
    if classifier:
        labels = _labels(root / "synset.txt")
        outputs = _declared(signature.get("outputs"), "FP32")[:1] or [TensorSpec(DEFAULT_OUTPUT, "FP32", [])]
        classes = len(labels) if labels else -1
        result = ModelSignature(True, [TensorSpec(inputs[0].name, "FP32", [-1, *inputs[0].shape[1:]])],
                                [TensorSpec(outputs[0].name, "FP32", [-1, classes])], labels)
    else:
        declared_out = _declared(signature.get("outputs") if isinstance(signature, dict) else None, "BYTES")
        result = ModelSignature(False, inputs or [TensorSpec("body", "BYTES", [-1])],
                                declared_out or [TensorSpec("output", "BYTES", [-1])])
    if len(_SIGNATURES) >= 1024:
        generation += 1
        _SIGNATURES.clear()
    _SIGNATURES[model.spec] = result
    return result


def _labels(path: Path) -> Optional[list[str]]:
    try:
        if path.is_file() and path.stat().st_size < 16 << 20:
            return [line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines()]
    except OSError:
        pass
    return None


def _npy(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, np.ascontiguousarray(array), allow_pickle=False)
    return out.getvalue()


# -- requests -------------------------------------------------------------------------------------
def client_batch(model: Model, sig: ModelSignature) -> int:
    """How many images of one infer request a classifier's handler gets in one call."""
    per_image = 1
    for dim in sig.inputs[0].shape[1:]:
        per_image *= max(dim, 1)
    return max(model.batch_size, min(CLIENT_BATCH, MAX_BATCH_ELEMENTS // per_image))


def classifier_items(sig: ModelSignature, tensor: Tensor, request_id: str, top_k: int) -> list[RequestItem]:
    """One request per image of *tensor* (BYTES: encoded images; numeric: ``[n,] C, H, W``), for the handler's
    top *top_k*; :data:`ALL_CLASSES` also asks for every class's score as a vector (``scores=npy``), which an
    archive's copy of the handler older than that parameter answers as the full ranked list instead."""
    k = Parameter("topk", str(top_k))
    extra = [Parameter("scores", "npy")] if top_k >= ALL_CLASSES else []
    images: list[tuple[bytes, Optional[str]]]
    if tensor.datatype == "BYTES":
        images = [(bytes(v), None) for v in tensor.data.ravel()]
    else:
        shape = _image_shape(sig, tensor.name, tensor.shape)
        chw = np.asarray(tensor.data, dtype=np.float32).reshape(shape)
        images = [(_npy(img.transpose(1, 2, 0)), "application/x-npy") for img in chw]
    if not images:
        raise BadRequest(f"input {tensor.name!r} holds no image")
    return [RequestItem(f"{request_id}-{i}", [Parameter("body", data, mime), k, *extra]) for i, (data, mime) in
            enumerate(images)]


def _image_shape(sig: ModelSignature, name: str, shape: list[int]) -> list[int]:
    """A classifier's numeric input's *shape* as ``[n, C, H, W]``, or the BadRequest when it is not one."""
    want = sig.inputs[0].shape[1:]
    full = shape if len(shape) == 4 else [1, *shape]
    if len(full) != 4 or [d if w > 0 else -1 for d, w in zip(full[1:], want)] != [w if w > 0 else -1 for w in want]:
        raise BadRequest(f"input {name!r}: shape {shape} does not match [-1, {', '.join(map(str, want))}]")
    return full


def generic_item(inputs: list[Tensor], request_id: str) -> RequestItem:
    """The whole infer request as one request of the handler."""
    parameters = []
    for tensor in inputs:
        if tensor.datatype == "BYTES" and tensor.data.size == 1:
            parameters.append(Parameter(tensor.name, bytes(tensor.data.ravel()[0])))
        else:
            if tensor.datatype == "BYTES":
                raise BadRequest(f"input {tensor.name!r}: this model takes one BYTES element per input")
            array = np.asarray(tensor.data, dtype=DATATYPES[tensor.datatype]).reshape(tensor.shape)
            parameters.append(Parameter(tensor.name, _npy(array), "application/x-npy"))
    return RequestItem(request_id, parameters)


def failure(answer: ResponseItem) -> V2Failure:
    """A handler's error answer as the error of the infer call: a 4xx or 5xx keeps its status; any other status
    that is not a success (a 1xx would end no exchange, a 3xx points nowhere) is the server's 500."""
    if type(answer.status) is not int or not 400 <= answer.status <= 599:
        return V2Failure(500, "Invalid response from the model.")
    _, message = parse_error_body(answer.body)
    return V2Failure(answer.status, message or f"the model answered {answer.status}")


# -- answers --------------------------------------------------------------------------------------
def _ranked(sig: ModelSignature, answer: ResponseItem) -> list[tuple[float, int, str]]:
    """``(probability, index, label)`` of a classifier's answer, best first."""
    try:
        ranked = json.loads(answer.body)
        used: set[int] = set()
        out = []
        for entry in ranked:
            label = str(entry["class"])
            index = sig.label_index(label, used)
            used.add(index)
            out.append((float(entry["probability"]), index, label))
        return out
    except (ValueError, TypeError, KeyError, RecursionError):
        raise V2Failure(500, "the model's answer is not a list of {probability, class}") from None


def _scores(sig: ModelSignature, answer: ResponseItem) -> np.ndarray:
    """Every class's score of a ``scores=npy`` answer: a float32 vector, one entry per class."""
    classes = sig.outputs[0].shape[-1]
    fh = io.BytesIO(answer.body)
    try:  # the header is checked before any data is taken: its shape is the worker's word, not a size to allocate
        version = np.lib.format.read_magic(fh)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read(fh)
    except (ValueError, SyntaxError, TypeError, EOFError):
        shape, fortran, dtype = None, True, None
    data = answer.body[fh.tell():]
    if dtype != np.dtype("<f4") or fortran or not isinstance(shape, tuple) or len(shape) != 1 or \
            len(data) != 4 * shape[0] or (classes > 0 and shape[0] != classes):
        raise V2Failure(500, "the model's answer is not a vector of class scores")
    return np.frombuffer(data, dtype="<f4")


def _top(sig: ModelSignature, row: np.ndarray, k: int) -> list[tuple[float, int, str]]:
    """The *k* best of a score vector, as :func:`_ranked` gives them (ties in class order, as the handler ranks)."""
    labels = sig.labels
    return [(float(row[i]), int(i), labels[i] if labels is not None and i < len(labels) else str(int(i)))
            for i in np.argsort(-row, kind="stable")[:k]]


def classifier_outputs(sig: ModelSignature, answers: list[ResponseItem],
                       wanted: list[RequestedOutput]) -> list[Tensor]:
    """The output tensors of *answers* (one per image), as *wanted* asks (all: probabilities as FP32)."""
    if answers and all(a.content_type == NPY_TYPE for a in answers):
        return _score_outputs(sig, [_scores(sig, a) for a in answers], wanted)
    rows = [_ranked(sig, a) for a in answers]
    spec = sig.outputs[0]
    out = []
    for request in wanted or [RequestedOutput(spec.name)]:
        if request.name != spec.name:
            raise BadRequest(f"unknown output {request.name!r}; this model has {spec.name!r}")
        if request.classification:
            texts = [[f"{p:f}:{i}:{label}" for p, i, label in row[:request.classification]] for row in rows]
            width = max(len(t) for t in texts)
            data = np.array([t + [""] * (width - len(t)) for t in texts], dtype=object)
            out.append(Tensor(spec.name, "BYTES", [len(rows), width], data))
            continue
        classes = max(max((i for _, i, _ in row), default=-1) for row in rows) + 1
        probs = np.zeros((len(rows), max(classes, 0)), dtype=np.float32)
        for r, row in enumerate(rows):
            for p, i, _ in row:
                if i >= 0:
                    probs[r, i] = p
        out.append(Tensor(spec.name, "FP32", list(probs.shape), probs))
    return out


def _score_outputs(sig: ModelSignature, rows: list[np.ndarray], wanted: list[RequestedOutput]) -> list[Tensor]:
    """The output tensors from every class's score per image."""
    spec = sig.outputs[0]
    if len({row.size for row in rows}) != 1:
        raise V2Failure(500, "the model's answers are score vectors of different lengths")
    out = []
    for request in wanted or [RequestedOutput(spec.name)]:
        if request.name != spec.name:
            raise BadRequest(f"unknown output {request.name!r}; this model has {spec.name!r}")
        if request.classification:
            texts = [[f"{p:f}:{i}:{label}" for p, i, label in _top(sig, row, request.classification)] for row in rows]
            width = max(len(t) for t in texts)
            data = np.array([t + [""] * (width - len(t)) for t in texts], dtype=object)
            out.append(Tensor(spec.name, "BYTES", [len(rows), width], data))
        else:
            probs = np.stack(rows)
            out.append(Tensor(spec.name, "FP32", list(probs.shape), probs))
    return out


def generic_outputs(sig: ModelSignature, answer: ResponseItem, wanted: list[RequestedOutput]) -> list[Tensor]:
    """The handler's answer as the one BYTES element of the model's output."""
    spec = sig.outputs[0]
    for request in wanted:
        if request.name != spec.name:
            raise BadRequest(f"unknown output {request.name!r}; this model has {spec.name!r}")
        if request.classification:
            raise BadRequest("classification is for image classifiers")
    data = np.empty(1, dtype=object)
    data[0] = answer.body
    return [Tensor(spec.name, "BYTES", [1], data)]


def check_inputs(sig: ModelSignature, inputs: list[Tensor]) -> None:
    """The inputs a model takes: a classifier one (its FP32 tensor or BYTES images), others what they declare."""
    for tensor in inputs:
        check_input(sig, len(inputs), tensor.name, tensor.datatype, tensor.shape)


def check_input(sig: ModelSignature, inputs: int, name: str, datatype: str, shape: list[int]) -> None:
    """One of a request's *inputs* as the model takes it, from its head alone (the codec calls this before it
    converts the input's data, so a tensor the model cannot take costs no per-element work):
    :data:`~mmsctl.engine.tensors.InputCheck`."""
    if sig.classifier:
        if inputs != 1:
            raise BadRequest(f"this model takes one input ({sig.inputs[0].name!r}), got {inputs}")
        if datatype not in ("BYTES", "FP32"):
            raise BadRequest(f"input {name!r}: FP32 or BYTES (encoded images), not {datatype}")
        if datatype == "FP32":
            _image_shape(sig, name, shape)
        return
    names = {s.name for s in sig.inputs}
    if name not in names:
        raise BadRequest(f"unknown input {name!r}; this model takes {', '.join(sorted(names))}"[:300])


def as_bad_request(exc: TensorError) -> BadRequest:
    return BadRequest(str(exc))
