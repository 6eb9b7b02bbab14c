"""Builders for the engine's tests: tiny random-weight checkpoints and extracted model folders."""

from __future__ import annotations

import json
import os
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

from mmsctl.engine.protocol import Parameter, RequestItem
from mmsctl.engine.service import ModelService, load_service
from mmsctl.engine.spec import ServiceSpec

TINY_CLASSES = ["n0 ant", "n1 bee", "n2 cat", "n3 dog"]
TINY_SIZE = 16


def load(spec: ServiceSpec, **changes: Any) -> ModelService:
    """``load_service`` with some fields of *spec* changed (``batch_size=4``, ``handler_override=…``)."""
    return load_service(replace(spec, **changes))


def build_tiny_checkpoint(out_dir: Path, *, seed: int = 0, prefix: str = "tiny") -> Path:
    """A 4-class conv net on 16x16 RGB with random weights: symbol, params, signature, synset."""
    from mmsctl.engine.mxnet_compat import import_mxnet

    mx = import_mxnet()
    out_dir.mkdir(parents=True, exist_ok=True)
    data = mx.sym.Variable("data")
    net = mx.sym.Convolution(data, num_filter=4, kernel=(3, 3), name="conv")
    net = mx.sym.Pooling(net, global_pool=True, pool_type="avg", kernel=(1, 1), name="pool")
    net = mx.sym.FullyConnected(mx.sym.flatten(net), num_hidden=len(TINY_CLASSES), name="fc")
    net = mx.sym.SoftmaxActivation(net, name="prob")
    mx.random.seed(seed)
    module = mx.mod.Module(net, data_names=["data"], label_names=None)
    module.bind(data_shapes=[("data", (1, 3, TINY_SIZE, TINY_SIZE))], for_training=False)
    module.init_params(mx.init.Uniform(0.1))
    args, aux = module.get_params()
    mx.model.save_checkpoint(str(out_dir / prefix), 0, net, args, aux)
    (out_dir / "signature.json").write_text(
        json.dumps({"inputs": [{"data_name": "data", "data_shape": [0, 3, TINY_SIZE, TINY_SIZE]}]})
    )
    (out_dir / "synset.txt").write_text("\n".join(TINY_CLASSES) + "\n")
    return out_dir


def png_bytes(seed: int = 0, size: int = 20) -> bytes:
    """A small random RGB PNG."""
    import io

    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    img = Image.fromarray(rng.integers(0, 255, (size, size + 3, 3), dtype=np.uint8), "RGB")
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def write_manifest(root: Path, *, model_name: str, handler: Optional[str]) -> None:
    model = {"modelName": model_name, "modelVersion": "1.0"}
    if handler:
        model["handler"] = handler
    (root / "MAR-INF").mkdir(parents=True, exist_ok=True)
    (root / "MAR-INF" / "MANIFEST.json").write_text(
        json.dumps(
            {
                "runtime": "python",
                "model": model,
                "modelServerVersion": "1.0",
                "implementationVersion": "1.0",
                "specificationVersion": "1.0",
            },
            indent=2,
        )
    )


def handler_archive(
    root: Path, files: dict[str, str], *, handler: Optional[str], model_name: str = "m"
) -> ServiceSpec:
    """An extracted archive folder holding the given handler source files."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    write_manifest(root, model_name=model_name, handler=handler)
    return ServiceSpec(root, model_name, handler)


def link_checkpoint(src: Path, dst: Path) -> None:
    """Make *src*'s checkpoint files appear in *dst* without copying them (symlinks)."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        target = dst / f.name
        if not target.exists():
            os.symlink(f, target)


def body_item(request_id: str, body: bytes, content_type: Optional[str] = None, **params: str) -> RequestItem:
    item = RequestItem.from_body(request_id, body, content_type)
    item.parameters.extend(Parameter(k, v) for k, v in params.items())
    return item
