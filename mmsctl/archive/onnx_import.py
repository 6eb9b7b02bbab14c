"""ONNX -> MXNet checkpoint folder, ready for ``create_archive`` and the built-in vision handler.

mxnet 1.9.1's importer (``mxnet.contrib.onnx.import_model``) does the graph
translation; we fix its input first with the ``onnx`` package:

* fp16 weights and inputs become fp32 (MXNet's CPU kernels and the vision
  handler work in fp32; the public SqueezeNet ONNX file is fp16);
* before opset 13, ONNX ``Softmax(axis=a)`` means "flatten to 2-D at *a*, then
  softmax over the second dimension", but the importer applies a plain softmax
  on axis *a* (on SqueezeNet's ``[N, 1000, 1, 1]`` output that gives all ones).
  Where the flattening matters, we insert an explicit ``Flatten`` so the
  importer produces ``softmax(flatten(x), axis=1)`` - the same network as
  ``SoftmaxActivation(flatten(x))``, with an ``[N, classes]`` output.

The folder gets ``<name>-symbol.json``, ``<name>-0000.params``, a
``signature.json`` from the ONNX input (batch dimension 0 = any) and, if
given, ``synset.txt``.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from mmsctl.errors import ArchiveError, InputNotFoundError

__all__ = ["OnnxImport", "import_onnx", "onnx_install_hint"]


@dataclass(frozen=True)
class OnnxImport:
    """The checkpoint written from an ONNX file."""

    folder: Path
    prefix: str
    input_name: str
    input_shape: list[int]
    opset: int
    converted_fp16: bool
    fixed_softmax: int


def _load_onnx() -> Any:
    try:
        import onnx
    except ImportError as exc:
        raise ArchiveError("ONNX import needs the onnx package", hint=onnx_install_hint()) from exc
    return onnx


def onnx_install_hint(package_dir: Optional[Path] = None, cwd: Optional[Path] = None) -> str:
    """How to add the ``onnx`` extra to *this* mmsctl: from a checkout (``pyproject.toml`` beside the
    package) ``pip install -e '.[onnx]'``, else ``pip install 'mmsctl[onnx]'``."""
    package_dir = (package_dir or Path(__file__).resolve().parents[1])
    repo = package_dir.parent
    project = repo / "pyproject.toml"
    try:
        checkout = 'name = "mmsctl"' in project.read_text(encoding="utf-8")
    except OSError:
        checkout = False
    if not checkout:
        return "pip install 'mmsctl[onnx]'  (or: pip install onnx)"
    here = (cwd or Path.cwd()).resolve()
    where = "." if here == repo else str(repo)
    return f"pip install -e '{where}[onnx]'  (this mmsctl runs from a checkout; or: pip install onnx)"


def _to_fp32(onnx: Any, model: Any) -> bool:
    """Turn every fp16 initializer, input, output and value_info into fp32."""
    from onnx import TensorProto, numpy_helper

    changed = False
    graph = model.graph
    for i, tensor in enumerate(graph.initializer):
        if tensor.data_type == TensorProto.FLOAT16:
            arr = numpy_helper.to_array(tensor).astype("float32")
            graph.initializer[i].CopyFrom(numpy_helper.from_array(arr, tensor.name))
            changed = True
    for value in list(graph.input) + list(graph.output) + list(graph.value_info):
        if value.type.tensor_type.elem_type == TensorProto.FLOAT16:
            value.type.tensor_type.elem_type = TensorProto.FLOAT
            changed = True
    for node in graph.node:
        if node.op_type == "Cast":
            for attr in node.attribute:
                if attr.name == "to" and attr.i == TensorProto.FLOAT16:
                    attr.i = TensorProto.FLOAT
                    changed = True
    return changed


def _ranks(onnx: Any, model: Any) -> dict[str, int]:
    """Rank of every tensor ONNX shape inference can tell."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - inference is best effort; unknown ranks are handled
        inferred = model
    ranks: dict[str, int] = {}
    g = inferred.graph
    for value in list(g.input) + list(g.output) + list(g.value_info):
        tt = value.type.tensor_type
        if tt.HasField("shape"):
            ranks[value.name] = len(tt.shape.dim)
    return ranks


def _fix_softmax(onnx: Any, model: Any, opset: int) -> int:
    """Make pre-opset-13 Softmax nodes mean what ONNX says (see module docstring). Returns the count."""
    if opset >= 13:
        return 0
    from onnx import helper

    ranks = _ranks(onnx, model)
    graph = model.graph
    outputs = {o.name for o in graph.output}
    new_nodes = []
    fixed = 0
    for node in graph.node:
        if node.op_type != "Softmax":
            new_nodes.append(node)
            continue
        axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
        rank = ranks.get(node.input[0])
        if rank is not None and axis < 0:
            axis += rank
        if rank is not None and axis == rank - 1:
            # flattening at the last axis changes nothing: plain softmax over it
            del node.attribute[:]
            node.attribute.extend([helper.make_attribute("axis", -1)])
            new_nodes.append(node)
            continue
        if axis != 1:
            raise ArchiveError(
                f"ONNX Softmax over axis {axis} of a rank-{rank} tensor is not supported by the importer"
            )
        if node.output[0] not in outputs:
            raise ArchiveError(
                "ONNX Softmax (opset < 13) on a 4-D tensor inside the graph is not supported; "
                "only as the network's output"
            )
        flat = node.input[0] + "__mmsctl_flat"
        new_nodes.append(helper.make_node("Flatten", [node.input[0]], [flat], axis=1))
        new_nodes.append(helper.make_node("Softmax", [flat], list(node.output), name=node.name, axis=1))
        for out in graph.output:
            if out.name == node.output[0] and out.type.tensor_type.HasField("shape"):
                dims = out.type.tensor_type.shape.dim
                if len(dims) > 2 and all(d.HasField("dim_value") for d in dims[1:]):
                    size = 1
                    for d in dims[1:]:
                        size *= d.dim_value
                    keep = dims[0]
                    shape = [keep.dim_value if keep.HasField("dim_value") else None, size]
                    out.type.tensor_type.ClearField("shape")
                    out.type.tensor_type.shape.SetInParent()
                    for value in shape:
                        dim = out.type.tensor_type.shape.dim.add()
                        if value is not None:
                            dim.dim_value = value
        fixed += 1
    del graph.node[:]
    graph.node.extend(new_nodes)
    return fixed


def _data_input(model: Any) -> tuple[str, list[int]]:
    initializers = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    if len(inputs) != 1:
        names = ", ".join(i.name for i in inputs) or "none"
        raise ArchiveError(f"the ONNX model has {len(inputs)} data inputs ({names}); the vision handler needs one")
    value = inputs[0]
    dims = [d.dim_value if d.HasField("dim_value") else 0 for d in value.type.tensor_type.shape.dim]
    if dims:
        dims[0] = 0  # any batch size
    return value.name, dims


def import_onnx(
    onnx_file: Path | str,
    out_dir: Path,
    *,
    prefix: str = "model",
    synset: Optional[Path] = None,
) -> OnnxImport:
    """Convert an ONNX model into an MXNet checkpoint folder.

    Args:
        onnx_file: the ``.onnx`` file.
        out_dir: the folder to write (created; must not hold another checkpoint).
        prefix: checkpoint prefix (use the model name).
        synset: a labels file to copy in as ``synset.txt``.

    Raises:
        InputNotFoundError: a file is missing.
        ArchiveError: not an ONNX model, or an operator the importer cannot take.
    """
    src = Path(onnx_file).expanduser()
    if not src.is_file():
        raise InputNotFoundError(f"{src}: no such file")
    if synset is not None and not Path(synset).is_file():
        raise InputNotFoundError(f"{synset}: no such file", param="synset")
    onnx = _load_onnx()
    try:
        model = onnx.load(str(src))
    except Exception as exc:  # noqa: BLE001 - protobuf raises many types for a bad file
        raise ArchiveError(f"{src}: not an ONNX model: {exc}") from exc
    if not len(model.graph.node):
        raise ArchiveError(f"{src}: not an ONNX model (no graph nodes)")
    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=1)
    input_name, input_shape = _data_input(model)
    converted = _to_fp32(onnx, model)
    fixed = _fix_softmax(onnx, model, opset)

    from mmsctl.engine.mxnet_compat import import_mxnet

    mx = import_mxnet()
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mmsctl-onnx-") as tmp:
        fixed_file = Path(tmp) / "model.onnx"
        onnx.save(model, str(fixed_file))
        try:
            from mxnet.contrib import onnx as onnx_mxnet

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sym, arg_params, aux_params = _quiet(lambda: onnx_mxnet.import_model(str(fixed_file)))
        except (NotImplementedError, AttributeError, KeyError, RuntimeError, ValueError, TypeError) as exc:
            raise ArchiveError(f"{src}: mxnet cannot import this ONNX model: {type(exc).__name__}: {exc}") from exc
    mx.model.save_checkpoint(str(out_dir / prefix), 0, sym, arg_params, aux_params)
    signature = {"inputs": [{"data_name": input_name, "data_shape": input_shape}]}
    (out_dir / "signature.json").write_text(json.dumps(signature) + "\n")
    if synset is not None:
        shutil.copyfile(synset, out_dir / "synset.txt")
    return OnnxImport(out_dir, prefix, input_name, input_shape, opset, converted, fixed)


def _quiet(call: Any) -> Any:
    """The importer prints a deprecation notice on stdout; keep stdout for data."""
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        return call()
