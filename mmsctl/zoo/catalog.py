"""The MMS model zoo: every archive MMS documents, by name, with aliases and did-you-mean.

The table follows ``docs/model_zoo.md`` of awslabs/multi-model-server (1.0 archives
under ``https://s3.amazonaws.com/model-server/model_archive_1.0/``). The canonical
name of an entry is the archive's file name without ``.mar`` (``squeezenet_v1.1``,
``resnet-18``, ``onnx-mobilenet``); its aliases include the name the MMS docs
register it under (``mobilenet``, ``resnet18-v1``, ``SSD``…). Lookups ignore case.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Iterable, Optional

from mmsctl.errors import ModelNotFoundError

__all__ = [
    "CATALOG",
    "ZOO_BASE_URL",
    "ZooEntry",
    "find_entry",
    "lookup",
    "suggest",
    "unknown_model_message",
]

#: Where MMS's model zoo keeps its 1.0 archives.
ZOO_BASE_URL = "https://s3.amazonaws.com/model-server/model_archive_1.0/"


@dataclass(frozen=True)
class ZooEntry:
    """One pre-trained archive of the MMS model zoo."""

    name: str
    title: str
    task: str
    dataset: str
    framework: str
    size_mb: float
    path: str = ""
    aliases: tuple[str, ...] = field(default_factory=tuple)

    @property
    def filename(self) -> str:
        """The archive's file name (what a mirror folder holds)."""
        return self.path.rsplit("/", 1)[-1] if self.path else f"{self.name}.mar"

    @property
    def url(self) -> str:
        """The archive's URL in the real MMS model zoo."""
        return ZOO_BASE_URL + (self.path or self.filename)

    @property
    def size_bytes(self) -> int:
        """The documented size (MMS's table gives decimal megabytes)."""
        return int(self.size_mb * 1_000_000)


_IC = "image classification"


def _e(
    name: str,
    title: str,
    task: str,
    dataset: str,
    framework: str,
    size_mb: float,
    *aliases: str,
    path: str = "",
) -> ZooEntry:
    return ZooEntry(name, title, task, dataset, framework, size_mb, path, tuple(aliases))


#: The MMS model zoo, in the order of its documentation table.
CATALOG: tuple[ZooEntry, ...] = (
    _e("alexnet", "AlexNet", _IC, "ImageNet", "ONNX", 233),
    _e("onnx-arcface-resnet100", "ArcFace-ResNet100", "face recognition", "MS-Celeb1M", "ONNX",
       236.4, "arcface", "arcface-resnet100"),
    _e("crepe", "Character-level CNN for text classification", "text classification",
       "Amazon Product Data", "Gluon", 40, "char-cnn"),
    _e("caffenet", "CaffeNet", _IC, "ImageNet", "MXNet", 216, path="caffenet/caffenet.mar"),
    _e("FERPlus", "FERPlus", "emotion detection", "FER2013", "ONNX", 35, "onnx-ferplus"),
    _e("onnx-inception_v1", "Inception v1", _IC, "ImageNet", "ONNX", 27,
       "onnx-inception-v1", "inception_v1", "inception-v1"),
    _e("inception-bn", "Inception v3 w/BatchNorm", _IC, "ImageNet", "MXNet", 45,
       "inception_bn", "inception-v3", "inception_v3"),
    _e("lstm_ptb", "LSTM PTB", "language modeling", "PennTreeBank", "MXNet", 16, "lstm-ptb"),
    _e("onnx-mobilenet", "MobileNetv2-1.0", _IC, "ImageNet", "ONNX", 13.7,
       "mobilenet", "mobilenetv2", "mobilenetv2-1.0"),
    _e("nin", "Network in Network (NiN)", _IC, "ImageNet", "MXNet", 30, "network-in-network"),
    _e("resnet-152", "ResNet-152", _IC, "ImageNet", "MXNet", 241, "resnet152"),
    _e("resnet-18", "ResNet-18", _IC, "ImageNet", "MXNet", 43, "resnet18", "resnet"),
    _e("resnet50_ssd", "ResNet50-SSD", "object detection (SSD)", "ImageNet", "MXNet", 124,
       "ssd", "resnet50-ssd"),
    _e("resnext-101-64x4d", "ResNext101-64x4d", _IC, "ImageNet", "MXNet", 334,
       "resnext101", "resnext-101"),
    _e("onnx-resnet18v1", "ResNet-18v1", _IC, "ImageNet", "ONNX", 45, "resnet18-v1"),
    _e("onnx-resnet34v1", "ResNet-34v1", _IC, "ImageNet", "ONNX", 83, "resnet34-v1"),
    _e("onnx-resnet50v1", "ResNet-50v1", _IC, "ImageNet", "ONNX", 98, "resnet50-v1"),
    _e("onnx-resnet101v1", "ResNet-101v1", _IC, "ImageNet", "ONNX", 171, "resnet101-v1"),
    _e("onnx-resnet152v1", "ResNet-152v1", _IC, "ImageNet", "ONNX", 231, "resnet152-v1"),
    _e("onnx-resnet18v2", "ResNet-18v2", _IC, "ImageNet", "ONNX", 45, "resnet18-v2"),
    _e("onnx-resnet34v2", "ResNet-34v2", _IC, "ImageNet", "ONNX", 83, "resnet34-v2"),
    _e("onnx-resnet50v2", "ResNet-50v2", _IC, "ImageNet", "ONNX", 98, "resnet50-v2"),
    _e("onnx-resnet101v2", "ResNet-101v2", _IC, "ImageNet", "ONNX", 171, "resnet101-v2"),
    _e("onnx-resnet152v2", "ResNet-152v2", _IC, "ImageNet", "ONNX", 231, "resnet152-v2"),
    _e("shufflenet", "ShuffleNet", _IC, "ImageNet", "ONNX", 8.1, "shufflenet_v2"),
    _e("onnx-squeezenet", "SqueezeNet v1.1 (ONNX)", _IC, "ImageNet", "ONNX", 5,
       "onnx-squeezenet_v1.1"),
    _e("squeezenet_v1.1", "SqueezeNet v1.1", _IC, "ImageNet", "MXNet", 5,
       "squeezenet", "squeezenet-v1.1", "squeezenet1.1", "squeezenet1_1"),
    _e("vgg16", "VGG16", _IC, "ImageNet", "MXNet", 490),
    _e("onnx-vgg16", "VGG16 (ONNX)", _IC, "ImageNet", "ONNX", 527),
    _e("onnx-vgg16_bn", "VGG16_bn (ONNX)", _IC, "ImageNet", "ONNX", 527, "vgg16_bn"),
    _e("vgg19", "VGG19", _IC, "ImageNet", "MXNet", 509),
    _e("onnx-vgg19", "VGG19 (ONNX)", _IC, "ImageNet", "ONNX", 548),
    _e("onnx-vgg19_bn", "VGG19_bn (ONNX)", _IC, "ImageNet", "ONNX", 548, "vgg19_bn"),
)


def _index(entries: Iterable[ZooEntry]) -> dict[str, ZooEntry]:
    index: dict[str, ZooEntry] = {}
    for entry in entries:
        for key in (entry.name, *entry.aliases):
            folded = key.casefold()
            if folded in index and index[folded] is not entry:  # pragma: no cover - a table typo
                raise RuntimeError(f"zoo catalog: {key!r} names two entries")
            index[folded] = entry
    return index


_INDEX = _index(CATALOG)


def lookup(name: str) -> Optional[ZooEntry]:
    """The entry for a name or alias (any case), or None."""
    return _INDEX.get(name.strip().casefold())


def suggest(name: str, *, limit: int = 3) -> list[str]:
    """Close matches among names and aliases, for a did-you-mean line: per model, the spelling closest to
    *name* (``squeeznet`` → ``squeezenet``, the alias, not ``squeezenet_v1.1``), best first."""
    folded = name.strip().casefold()
    matches = difflib.get_close_matches(folded, list(_INDEX), n=limit * 4, cutoff=0.6)
    seen: dict[str, str] = {}
    for match in matches:
        seen.setdefault(_INDEX[match].name, match)
    return list(seen.values())[:limit]


def find_entry(name: str) -> ZooEntry:
    """The entry for *name*, or a ModelNotFoundError that suggests close names.

    Raises:
        ModelNotFoundError: no entry has that name or alias.
    """
    entry = lookup(name)
    if entry is not None:
        return entry
    raise ModelNotFoundError(unknown_model_message(name), hint="see `mmsctl zoo list` for every name")


def unknown_model_message(name: str) -> str:
    """``unknown model 'x'`` plus a did-you-mean where a close name exists."""
    close = suggest(name)
    message = f"unknown model {name!r}: not in the model zoo and not a file, folder or URL"
    if close:
        message += "; did you mean " + " or ".join(repr(c) for c in close) + "?"
    return message
