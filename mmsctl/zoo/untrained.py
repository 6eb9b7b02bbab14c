"""Random-weight MXNet checkpoints of zoo architectures, built locally in seconds.

For the demo on a machine without internet or test data, and for benchmarks
(a random ResNet-18 costs the same to run as a trained one). The network comes
from ``mxnet.gluon.model_zoo.vision`` with ``pretrained=False``, gets a softmax
on top (MMS's zoo checkpoints end in one, so outputs are probabilities), and is
exported like MMS's zoo checkpoints: ``<arch>-symbol.json``,
``<arch>-0000.params``, ``signature.json`` and ``synset.txt``. The labels are
placeholders: the predictions of an untrained network mean nothing.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmsctl.errors import UsageError

__all__ = ["ARCHITECTURES", "Architecture", "build_checkpoint"]


@dataclass(frozen=True)
class Architecture:
    """A zoo architecture and the gluon model-zoo constructor that builds it."""

    name: str
    gluon: str
    size: int = 224
    classes: int = 1000


ARCHITECTURES: dict[str, Architecture] = {
    a.name: a
    for a in (
        Architecture("squeezenet_v1.1", "squeezenet1.1"),
        Architecture("squeezenet_v1.0", "squeezenet1.0"),
        Architecture("resnet-18", "resnet18_v1"),
        Architecture("resnet-34", "resnet34_v1"),
        Architecture("resnet-50", "resnet50_v1"),
        Architecture("resnet-101", "resnet101_v1"),
        Architecture("resnet-152", "resnet152_v1"),
        Architecture("resnet18-v2", "resnet18_v2"),
        Architecture("resnet50-v2", "resnet50_v2"),
        Architecture("alexnet", "alexnet"),
        Architecture("vgg16", "vgg16"),
        Architecture("vgg19", "vgg19"),
        Architecture("mobilenet", "mobilenetv2_1.0"),
        Architecture("densenet121", "densenet121"),
        Architecture("inception-v3", "inceptionv3", size=299),
    )
}
_ALIASES = {"squeezenet": "squeezenet_v1.1", "resnet18": "resnet-18", "resnet-18_v1": "resnet-18"}


def _architecture(arch: str) -> Architecture:
    key = arch.strip().casefold()
    key = _ALIASES.get(key, key)
    for name, spec in ARCHITECTURES.items():
        if name.casefold() == key:
            return spec
    import difflib

    close = difflib.get_close_matches(key, list(ARCHITECTURES), n=2)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise UsageError(
        f"no untrained build for architecture {arch!r}; {hint}known: {', '.join(ARCHITECTURES)}"
    )


def build_checkpoint(arch: str, out_dir: Path, *, seed: int = 0) -> Path:
    """Write a random-weight MXNet checkpoint folder for *arch* into *out_dir*.

    Args:
        arch: an architecture name such as ``squeezenet_v1.1`` or ``resnet-18``
            (see :data:`ARCHITECTURES`).
        out_dir: the folder to write (created; existing files of the same names
            are replaced).
        seed: the random seed; the same seed gives the same weights.

    Returns:
        *out_dir*, holding ``<arch>-symbol.json``, ``<arch>-0000.params``,
        ``signature.json`` and ``synset.txt``.

    Raises:
        UsageError: an architecture without an untrained build.
        EngineError: mxnet cannot be imported.

    Example:
        >>> build_checkpoint("resnet-18", Path("/tmp/r18"))  # doctest: +SKIP
    """
    spec = _architecture(arch)
    from mmsctl.engine.mxnet_compat import import_mxnet

    mx = import_mxnet()
    import numpy as np

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    mx.random.seed(seed)
    np.random.seed(seed)

    net = _with_softmax(mx, spec)
    net.initialize(mx.init.Xavier(magnitude=2.0), ctx=mx.cpu())
    net.hybridize()
    net(mx.nd.zeros((1, 3, spec.size, spec.size)))

    # Export into a temp folder beside the target, then move the files in:
    # a crash never leaves a symbol without its params.
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".build-") as tmp:
        prefix = Path(tmp) / spec.name
        net.export(str(prefix), epoch=0)
        (Path(tmp) / "signature.json").write_text(json.dumps(_signature(spec), indent=2) + "\n")
        (Path(tmp) / "synset.txt").write_text(_synset(spec.classes))
        for name in (f"{spec.name}-symbol.json", f"{spec.name}-0000.params", "signature.json", "synset.txt"):
            shutil.move(str(Path(tmp) / name), str(out_dir / name))
    return out_dir


def _with_softmax(mx: Any, spec: Architecture) -> Any:
    from mxnet.gluon import nn
    from mxnet.gluon.model_zoo import vision

    # A fresh name manager: the same arch gets the same parameter names in every
    # build of a process (``squeezenet0_…``), so equal seeds give equal files.
    with mx.name.NameManager():
        body = vision.get_model(spec.gluon, pretrained=False, classes=spec.classes)
        net = nn.HybridSequential(prefix="")
        with net.name_scope():
            net.add(body)
            net.add(nn.HybridLambda(lambda F, x: F.softmax(x, axis=1), prefix="prob_"))
    return net


def _signature(spec: Architecture) -> dict[str, Any]:
    """The signature.json layout of MMS's zoo archives."""
    return {
        "inputs": [{"data_name": "data", "data_shape": [0, 3, spec.size, spec.size]}],
        "input_type": "image/jpeg",
        "outputs": [{"data_name": "softmax", "data_shape": [0, spec.classes]}],
        "output_type": "application/json",
    }


def _synset(classes: int) -> str:
    """Placeholder labels in the ImageNet synset form (``n00000000 untrained class 0``)."""
    return "".join(f"n{i:08d} untrained class {i}\n" for i in range(classes))
