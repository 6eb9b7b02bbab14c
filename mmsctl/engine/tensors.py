"""The Open Inference Protocol's (KServe v2) tensors on the wire: JSON, and Triton's binary tensor data extension.

One codec for both sides: the server (:mod:`mmsctl.server.v2.api`) decodes requests and encodes
responses, the client decodes responses and encodes requests, so both agree byte for byte. It needs
numpy and the standard library only. Everything a request declares is checked before it is used: a
shape whose elements do not match the data, more elements than :data:`MAX_ELEMENTS`, ragged or
wrongly typed JSON data, binary sizes that do not add up to the body: each is a :class:`TensorError`
(a 400), never a large allocation or a crash.

The binary extension (as Triton implements it): the body is a JSON header of
``Inference-Header-Content-Length`` bytes, then each binary tensor's bytes in order; a tensor's
``parameters.binary_data_size`` says how many. A BYTES tensor's elements are each a 4-byte
little-endian length and the bytes.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Callable, Iterable, Optional

import numpy as np

__all__ = [
    "DATATYPES", "HEADER_LENGTH", "MAX_ELEMENTS", "InferRequest", "InputCheck", "InferResponse", "RequestedOutput", "Tensor",
    "TensorError", "decode_request", "decode_response", "encode_request", "encode_response", "json_element",
    "pack_bytes",
]

#: The header that says how long the JSON part of a binary body is.
HEADER_LENGTH = "Inference-Header-Content-Length"
#: numpy dtype of each v2 datatype (BYTES: an object array of ``bytes``).
DATATYPES: dict[str, Any] = {
    "BOOL": np.bool_, "UINT8": np.uint8, "UINT16": "<u2", "UINT32": "<u4", "UINT64": "<u8",
    "INT8": np.int8, "INT16": "<i2", "INT32": "<i4", "INT64": "<i8",
    "FP16": "<f2", "FP32": "<f4", "FP64": "<f8", "BYTES": object,
}
#: The most elements one tensor may declare (its bytes are bounded by the request size anyway).
MAX_ELEMENTS = 1 << 28
_MAX_DIMS = 16
_MAX_TENSORS = 64
#: ``json.dumps(..., separators=(",", ":"))`` without building an encoder per call (the server's hot path).
_COMPACT = json.JSONEncoder(separators=(",", ":"))
#: A caller's check of one input before any of its data is converted (the server's: what the model takes), called
#: with how many inputs the request has, the input's name, datatype and shape; it raises to refuse the request.
InputCheck = Callable[[int, str, str, list[int]], None]


class TensorError(ValueError):
    """A tensor (or request) that does not follow the protocol: the client's mistake."""


@dataclass
class Tensor:
    """One named tensor: its v2 datatype, shape and data (flat or shaped; BYTES: bytes objects)."""

    name: str
    datatype: str
    shape: list[int]
    data: np.ndarray
    parameters: dict[str, Any] = field(default_factory=dict)


@dataclass
class RequestedOutput:
    """An output a request asks for: binary or JSON, a ``classification`` (top-k) count or not."""

    name: str
    binary: Optional[bool] = None
    classification: int = 0


@dataclass
class InferRequest:
    id: Optional[str]
    inputs: list[Tensor]
    outputs: list[RequestedOutput] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)

    @property
    def binary_output(self) -> bool:
        """The request-level default for outputs (``binary_data_output``)."""
        return self.parameters.get("binary_data_output") is True


@dataclass
class InferResponse:
    model_name: str
    model_version: Optional[str]
    id: Optional[str]
    outputs: list[Tensor]


# -- checks ---------------------------------------------------------------------------------------
def _elements(shape: Any, what: str) -> int:
    """The element count of *shape*; every dimension is bounded on its own too, so a 0 before a huge one
    (``[0, 2**70]``, 0 elements) is refused as the client's mistake, not met later by numpy."""
    if not isinstance(shape, list) or len(shape) > _MAX_DIMS:
        raise TensorError(f"{what}: shape must be a list of at most {_MAX_DIMS} dimensions")
    count = 1
    for i, dim in enumerate(shape):
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 0:
            raise TensorError(f"{what}: shape must hold non-negative integers, got {shape!r}"[:200])
        if dim > MAX_ELEMENTS:
            raise TensorError(f"{what}: shape[{i}] is more than {MAX_ELEMENTS}")
        count *= dim
        if count > MAX_ELEMENTS:
            raise TensorError(f"{what}: more than {MAX_ELEMENTS} elements")
    return count


def _dtype(datatype: Any, what: str) -> Any:
    if not isinstance(datatype, str) or datatype not in DATATYPES:
        raise TensorError(f"{what}: unknown datatype {datatype!r}; one of {', '.join(DATATYPES)}"[:300])
    return DATATYPES[datatype]


def _flatten(data: Any, what: str, limit: int) -> list[Any]:
    """Nested JSON lists flattened (row-major); at most *limit* elements. Lists nested evenly (every element of
    a level a list) are joined a level at a time in C; anything else is walked iteratively."""
    values = data if isinstance(data, list) else [data]
    depth = 0
    while True:
        kinds = set(map(type, values))
        if not any(issubclass(kind, list) for kind in kinds):
            if len(values) > limit:
                raise TensorError(f"{what}: more data than its shape holds")
            return values
        if depth == _MAX_DIMS or kinds != {list} or sum(map(len, values)) > limit:
            return _walk(values, what, limit, depth)
        values = list(chain.from_iterable(values))
        depth += 1


def _walk(data: list[Any], what: str, limit: int, depth: int) -> list[Any]:
    """*data* (*depth* levels flattened already) flattened one element at a time: lists nested unevenly."""
    out: list[Any] = []
    stack = [iter(data)]
    while stack:
        for value in stack[-1]:
            if isinstance(value, list):
                if len(stack) + depth > _MAX_DIMS:
                    raise TensorError(f"{what}: data nested deeper than {_MAX_DIMS} levels")
                stack.append(iter(value))
                break
            out.append(value)
            if len(out) > limit:
                raise TensorError(f"{what}: more data than its shape holds")
        else:
            stack.pop()
    return out


def _json_data(values: list[Any], datatype: str, what: str) -> np.ndarray:
    """*values* (flat) as *datatype*, every check made on the whole list at once (the types present, then
    numpy's conversion and range), so a large body costs C time, not a Python step per element."""
    if datatype == "BYTES":
        return _json_bytes(values, what)
    kinds = set(map(type, values))
    if datatype == "BOOL":
        if kinds - {bool}:
            raise TensorError(f"{what}: BOOL data must be true or false")
        return np.asarray(values, dtype=np.bool_)
    if any(not issubclass(kind, (int, float)) or issubclass(kind, bool) for kind in kinds):
        raise TensorError(f"{what}: {datatype} data must be numbers")
    dtype = np.dtype(DATATYPES[datatype])
    if dtype.kind in "iu":
        return _json_integers(values, kinds, dtype, datatype, what)
    try:
        wide = np.asarray(values, dtype=np.float64)
    except OverflowError:  # an integer past any float
        index = next(i for i, v in enumerate(values) if isinstance(v, int) and not _is_float(v))
        raise TensorError(f"{what}: data element {index} is outside the range of {datatype}") from None
    with np.errstate(over="ignore"):
        array = wide.astype(dtype)
    lost = np.flatnonzero(np.isinf(array) & np.isfinite(wide))
    if lost.size:  # a finite number that the datatype can only hold as infinity
        raise TensorError(f"{what}: data element {int(lost[0])} is outside the range of {datatype}")
    return array


def _is_float(value: int) -> bool:
    try:
        float(value)
    except OverflowError:
        return False
    return True


def _first_of(values: list[Any], kinds: Iterable[type]) -> int:
    """The index of the first element of *values* whose type is one of *kinds* (each present in *values*)."""
    types = list(map(type, values))
    return min(types.index(kind) for kind in kinds)


def _json_integers(values: list[Any], kinds: set[type], dtype: np.dtype, datatype: str, what: str) -> np.ndarray:
    """Integers as *dtype*, each in its range (numpy would wrap 300 into an INT8's 44 without a word): checked
    as int64 at once, or (a value past int64) as Python integers in an object array."""
    floats = [kind for kind in kinds if not issubclass(kind, int)]
    if floats:
        raise TensorError(f"{what}: data element {_first_of(values, floats)} is not an integer ({datatype})")
    info = np.iinfo(dtype)
    try:
        wide: np.ndarray = np.asarray(values, dtype=np.int64)
    except OverflowError:
        wide = np.asarray(values, dtype=object)
    outside = np.flatnonzero((wide < info.min) | (wide > info.max))
    if outside.size:
        raise TensorError(f"{what}: data element {int(outside[0])} is outside the range of {datatype} "
                          f"({info.min} to {info.max})")
    return wide.astype(dtype) if wide.dtype != dtype else wide


def _json_bytes(values: list[Any], what: str) -> np.ndarray:
    """JSON strings as BYTES elements (UTF-8; ``\\udc80``-``\\udcff`` stand for the bytes 0x80-0xff)."""
    if any(not issubclass(kind, str) for kind in set(map(type, values))):
        raise TensorError(f"{what}: BYTES data must be strings in JSON (or sent binary)")
    array = np.empty(len(values), dtype=object)
    try:
        array[:] = [value.encode("utf-8", "surrogateescape") for value in values]
    except UnicodeEncodeError:
        index = next(i for i, v in enumerate(values) if not _encodes(v))
        raise TensorError(f"{what}: data element {index} holds a lone surrogate (no UTF-8 bytes stand for it)") \
            from None
    return array


def _encodes(value: str) -> bool:
    try:
        value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return False
    return True


def unpack_bytes(raw: bytes, count: int, what: str) -> np.ndarray:
    """A binary BYTES tensor's *count* elements (each a 4-byte little-endian length, then the bytes)."""
    array = np.empty(count, dtype=object)
    view = memoryview(raw)
    pos = 0
    for i in range(count):
        if pos + 4 > len(view):
            raise TensorError(f"{what}: binary BYTES data ends inside element {i}")
        (size,) = struct.unpack_from("<I", view, pos)
        pos += 4
        if pos + size > len(view):
            raise TensorError(f"{what}: binary BYTES element {i} is longer than the data")
        array[i] = bytes(view[pos:pos + size])
        pos += size
    if pos != len(view):
        raise TensorError(f"{what}: binary BYTES data is longer than its {count} elements")
    return array


def pack_bytes(values: Any) -> bytes:
    """BYTES elements (bytes or str) in the binary form."""
    parts = []
    for value in np.asarray(values, dtype=object).ravel():
        data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        parts += [struct.pack("<I", len(data)), data]
    return b"".join(parts)


def _binary_data(raw: bytes, datatype: str, count: int, what: str) -> np.ndarray:
    if datatype == "BYTES":
        return unpack_bytes(raw, count, what)
    dtype = np.dtype(DATATYPES[datatype])
    if len(raw) != count * dtype.itemsize:
        raise TensorError(f"{what}: {len(raw)} bytes of binary data for {count} {datatype} elements")
    return np.frombuffer(raw, dtype=dtype)


def _text(value: Any) -> str:
    """A BYTES element as JSON carries it (bytes that are not UTF-8 cannot travel in JSON intact)."""
    return value if isinstance(value, str) else bytes(value).decode("utf-8", "replace")


def json_element(value: Any) -> bytes:
    """One BYTES element as :func:`encode_response` writes it in a JSON body (a JSON string, ASCII)."""
    return _COMPACT.encode(_text(value)).encode("utf-8")


def tensor_bytes(tensor: Tensor) -> bytes:
    """*tensor*'s data in the binary form."""
    if tensor.datatype == "BYTES":
        return pack_bytes(tensor.data)
    return np.ascontiguousarray(tensor.data, dtype=DATATYPES[tensor.datatype]).tobytes()


# -- bodies ---------------------------------------------------------------------------------------
def _split(body: bytes, header_length: Optional[int],
           parsed: Optional[dict[str, Any]] = None) -> tuple[dict[str, Any], memoryview]:
    """The JSON header (an object) and the binary part of a body (*parsed*: a JSON body, already parsed)."""
    if parsed is not None and header_length is None:
        return parsed, memoryview(b"")
    if header_length is None:
        header_length = len(body)
    if not 0 <= header_length <= len(body):
        raise TensorError(f"{HEADER_LENGTH} must be between 0 and the body's {len(body)} bytes")
    try:
        header = json.loads(bytes(body[:header_length]))
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise TensorError("the request is not valid JSON") from None
    if not isinstance(header, dict):
        raise TensorError("the request must be a JSON object")
    return header, memoryview(body)[header_length:]


def _tensor(spec: Any, binary: memoryview, pos: int, what: str,
            check: Optional[tuple[InputCheck, int]] = None) -> tuple[Tensor, int]:
    """One tensor of a header (its binary data from *binary* at *pos*; *check*: the caller's, and how many inputs
    the request has); returns it and the next position."""
    if not isinstance(spec, dict):
        raise TensorError(f"{what} must be an object")
    name, datatype, shape = spec.get("name"), str(spec.get("datatype")), spec.get("shape")
    if not isinstance(name, str) or not name:
        raise TensorError(f"{what}: name must be a non-empty string")
    what = f"{what} {name!r}"[:200]
    _dtype(datatype, what)
    count = _elements(shape, what)
    assert isinstance(shape, list)  # _elements checked it
    if check is not None:
        check[0](check[1], name, datatype, shape)
    params = spec.get("parameters") or {}
    if not isinstance(params, dict):
        raise TensorError(f"{what}: parameters must be an object")
    size = params.get("binary_data_size")
    if size is not None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 0 or pos + size > len(binary):
            raise TensorError(f"{what}: binary_data_size {size!r} does not fit the body"[:200])
        data = _binary_data(bytes(binary[pos:pos + size]), datatype, count, what)
        pos += size
    elif "data" in spec:
        values = _flatten(spec["data"], what, count)
        if len(values) != count:  # before any element is converted
            raise TensorError(f"{what}: {len(values)} elements of data for shape {shape}")
        data = _json_data(values, datatype, what)
    else:
        raise TensorError(f"{what}: no data (neither 'data' nor parameters.binary_data_size)")
    if data.size != count:
        raise TensorError(f"{what}: {data.size} elements of data for shape {shape}")
    return Tensor(name, datatype, list(shape), data, params), pos


def _requested(spec: Any) -> RequestedOutput:
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise TensorError("each requested output must be an object with a name")
    params = spec.get("parameters") or {}
    if not isinstance(params, dict):
        raise TensorError("an output's parameters must be an object")
    binary = params.get("binary_data")
    classes = params.get("classification", 0)
    if isinstance(classes, bool) or not isinstance(classes, int) or not 0 <= classes <= MAX_ELEMENTS:
        raise TensorError(f"classification must be a non-negative integer, got {classes!r}"[:200])
    return RequestedOutput(spec["name"], binary if isinstance(binary, bool) else None, classes)


def _list(header: dict[str, Any], key: str) -> list[Any]:
    value = header.get(key) or []
    if not isinstance(value, list) or len(value) > _MAX_TENSORS:
        raise TensorError(f"'{key}' must be a list of at most {_MAX_TENSORS} tensors")
    return value


@dataclass(frozen=True)
class _Layout:
    """What a binary request's JSON header says, checked: a client sends the same header with every request
    (only the binary part changes), so the server parses and checks it once (:func:`decode_request`)."""

    #: Per input: what its errors call it, name, datatype, shape, elements, binary bytes, parameters.
    inputs: tuple[tuple[str, str, str, tuple[int, ...], int, int, dict[str, Any]], ...]
    outputs: tuple[RequestedOutput, ...]
    parameters: dict[str, Any]
    id: Optional[str]
    #: The binary part's length.
    total: int

    @classmethod
    def of(cls, request: InferRequest) -> Optional["_Layout"]:
        """The layout of a request just decoded, if all its inputs are binary (else None)."""
        inputs = []
        for i, t in enumerate(request.inputs):
            size = t.parameters.get("binary_data_size")
            if size is None:
                return None
            inputs.append((f"input {i} {t.name!r}"[:200], t.name, t.datatype, tuple(t.shape), t.data.size, size,
                           dict(t.parameters)))
        return cls(tuple(inputs), tuple(request.outputs), dict(request.parameters), request.id,
                   sum(spec[5] for spec in inputs))

    def request(self, binary: memoryview) -> Optional[InferRequest]:
        """The request this header makes with *binary*, or None when the sizes do not add up (then the
        whole body is decoded again, for the error it gets there)."""
        if len(binary) != self.total:
            return None
        inputs, pos = [], 0
        for what, name, datatype, shape, count, size, params in self.inputs:
            data = _binary_data(bytes(binary[pos:pos + size]), datatype, count, what)
            pos += size
            inputs.append(Tensor(name, datatype, list(shape), data, dict(params)))
        outputs = [RequestedOutput(o.name, o.binary, o.classification) for o in self.outputs]
        return InferRequest(self.id, inputs, outputs, dict(self.parameters))


#: Layouts by header bytes (at most so many, of headers at most so long).
_LAYOUTS: dict[bytes, _Layout] = {}
_LAYOUTS_KEPT = 256
_LAYOUT_HEADER = 4096


def decode_request(body: bytes, header_length: Optional[int] = None,
                   parsed: Optional[dict[str, Any]] = None, check: Optional[InputCheck] = None) -> InferRequest:
    """An infer request's body (JSON, or JSON + binary with *header_length*) as tensors; *parsed*: a JSON body
    as a caller that looked into it already parsed it (it is not parsed again); *check*: called on each input
    before its data is converted (a request whose layout is known skips it: its binary data costs nothing)."""
    if header_length is not None and 0 < header_length <= min(len(body), _LAYOUT_HEADER):
        key = bytes(body[:header_length])
        layout = _LAYOUTS.get(key)
        request = layout.request(memoryview(body)[header_length:]) if layout is not None else None
        if request is not None:
            return request
        request = _decode_request(body, header_length, None, check)
        layout = _Layout.of(request)
        if layout is not None:
            if len(_LAYOUTS) >= _LAYOUTS_KEPT:
                _LAYOUTS.clear()
            _LAYOUTS[key] = layout
        return request
    return _decode_request(body, header_length, parsed, check)


def _decode_request(body: bytes, header_length: Optional[int], parsed: Optional[dict[str, Any]] = None,
                    check: Optional[InputCheck] = None) -> InferRequest:
    header, binary = _split(body, header_length, parsed)
    specs = _list(header, "inputs")
    if not specs:
        raise TensorError("the request has no inputs")
    inputs, pos = [], 0
    for i, spec in enumerate(specs):
        tensor, pos = _tensor(spec, binary, pos, f"input {i}", None if check is None else (check, len(specs)))
        inputs.append(tensor)
    if pos != len(binary):
        raise TensorError(f"{len(binary) - pos} bytes of binary data that no input claims")
    params = header.get("parameters") or {}
    request_id = header.get("id")
    if not isinstance(params, dict) or not isinstance(request_id, (str, type(None))):
        raise TensorError("'parameters' must be an object and 'id' a string")
    return InferRequest(request_id, inputs, [_requested(o) for o in _list(header, "outputs")], params)


def encode_response(response: InferResponse, binary: set[str]) -> tuple[bytes, Optional[int]]:
    """A response body; the outputs named in *binary* go binary. Returns the body and the JSON part's
    length (None when nothing is binary: a plain JSON body)."""
    outputs, blobs = [], []
    for tensor in response.outputs:
        entry: dict[str, Any] = {"name": tensor.name, "datatype": tensor.datatype, "shape": tensor.shape}
        params = dict(tensor.parameters)
        if tensor.name in binary:
            blob = tensor_bytes(tensor)
            params["binary_data_size"] = len(blob)
            blobs.append(blob)
        elif tensor.datatype == "BYTES":
            entry["data"] = [_text(v) for v in np.asarray(tensor.data).ravel().tolist()]
        else:
            entry["data"] = np.asarray(tensor.data).ravel().tolist()
        if params:
            entry["parameters"] = params
        outputs.append(entry)
    head: dict[str, Any] = {"model_name": response.model_name, "outputs": outputs}
    if response.model_version is not None:
        head["model_version"] = response.model_version
    if response.id is not None:
        head["id"] = response.id
    text = _COMPACT.encode(head).encode("utf-8")
    if not blobs:
        return text, None
    return text + b"".join(blobs), len(text)


# -- the client's side ----------------------------------------------------------------------------
def encode_request(inputs: list[Tensor], outputs: list[RequestedOutput], *, binary: bool = True,
                   request_id: Optional[str] = None) -> tuple[bytes, Optional[int]]:
    """A request body (inputs binary if *binary*); returns it and the JSON part's length (None: all JSON)."""
    specs, blobs = [], []
    for tensor in inputs:
        spec: dict[str, Any] = {"name": tensor.name, "datatype": tensor.datatype, "shape": tensor.shape}
        if binary:
            blob = tensor_bytes(tensor)
            spec["parameters"] = {"binary_data_size": len(blob)}
            blobs.append(blob)
        elif tensor.datatype == "BYTES":
            spec["data"] = [_text(v) for v in np.asarray(tensor.data).ravel()]
        else:
            spec["data"] = np.asarray(tensor.data).ravel().tolist()
        specs.append(spec)
    head: dict[str, Any] = {"inputs": specs}
    if request_id is not None:
        head["id"] = request_id
    if outputs:
        head["outputs"] = [{"name": o.name, "parameters": {
            **({"binary_data": o.binary} if o.binary is not None else {}),
            **({"classification": o.classification} if o.classification else {})}} for o in outputs]
    text = json.dumps(head, separators=(",", ":")).encode("utf-8")
    return (text + b"".join(blobs), len(text)) if binary else (text, None)


def decode_response(body: bytes, header_length: Optional[int] = None) -> InferResponse:
    """An infer response's body as tensors (the server's mistakes are TensorErrors too)."""
    header, binary = _split(body, header_length)
    outputs, pos = [], 0
    for i, spec in enumerate(_list(header, "outputs")):
        tensor, pos = _tensor(spec, binary, pos, f"output {i}")
        outputs.append(tensor)
    name, version, response_id = header.get("model_name"), header.get("model_version"), header.get("id")
    return InferResponse(str(name or ""), None if version is None else str(version),
                         None if response_id is None else str(response_id), outputs)
