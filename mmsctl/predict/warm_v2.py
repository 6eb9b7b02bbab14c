"""A warm ``predict DIR`` of an image classifier: several images per request, one forward pass for them all.

Sent one by one (the MMS API), a model registered at MMS's default batch size 1 runs every image through
its own forward pass, where a batch costs less per image (docs/performance.md). The
Open Inference Protocol takes a batch: a BYTES tensor of encoded images, which an mmsctl server runs
through the built-in handler in one call (:data:`mmsctl.server.v2.models.CLIENT_BATCH`). Its answer is
every class's probability (FP32 ``[n, classes]``, binary); the ranked ``[{"probability", "class"}]`` list
the MMS API would have answered is rebuilt here from it with the labels of the archive's own
``synset.txt`` (the same archive: the warm path matched its SHA-256), ranked as the handler ranks
(descending, ties in class order), and encoded as the server encodes a handler's answer
(``json.dumps(..., indent=2)``), so the output is byte for byte the one-request-per-image output.

Only for a model whose v2 metadata is the built-in classifier's (one FP32 ``[-1, C, H, W]`` input, one
FP32 ``[-1, classes]`` output); anything else, and any failure, is the caller's to send one by one.
"""

from __future__ import annotations

import json
import struct
from array import array
from pathlib import Path
from typing import Any, NamedTuple, Optional
from urllib.parse import quote

from mmsctl.predict.inputs import InputSource
from mmsctl.predict.prediction import Prediction

__all__ = ["Classifier", "classifier", "predict_batch"]

#: Images per request: the server's CLIENT_BATCH, one forward pass each.
GROUP = 8
#: The ranked classes the built-in handler answers by default (its DEFAULT_TOP_K).
DEFAULT_TOP_K = 5
_HEADER_LENGTH = "inference-header-content-length"


class Classifier(NamedTuple):
    """What a served classifier's answers are rebuilt with: its infer path, labels (None: class numbers) and
    number of classes."""

    path: str
    labels: Optional[list[str]]
    classes: int


def classifier(conn: Any, model: str, extraction: Path) -> Optional[Classifier]:
    """The served model as the built-in classifier, from its v2 metadata and the archive's ``synset.txt``; None
    for anything else (another handler, no v2 API, labels the server would read differently)."""
    path = "/v2/models/" + quote(model, safe="")
    status, _, body = conn.request("GET", path)
    if status != 200:
        return None
    try:
        meta = json.loads(body)
        (inp,), (out,) = meta["inputs"], meta["outputs"]
        if not (inp["datatype"] == "FP32" and len(inp["shape"]) == 4 and out["datatype"] == "FP32"
                and len(out["shape"]) == 2):
            return None
        classes = int(out["shape"][1])
    except (ValueError, KeyError, TypeError, IndexError):
        return None
    usable, labels = _labels(extraction / "synset.txt")
    if not usable or (labels is not None and classes != len(labels)):
        return None
    return Classifier(path + "/infer", labels, classes)


def _labels(path: Path) -> tuple[bool, Optional[list[str]]]:
    """The labels as the built-in handler reads them (a line each, stripped; None without a synset), and
    whether they can be used: not where the server's v2 side would split them otherwise (it maps the
    handler's labels back to class indices)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return True, None
    except (OSError, UnicodeDecodeError):
        return False, None
    handler = [line.strip() for line in text.split("\n")]
    if handler and handler[-1] == "" and text.endswith("\n"):
        handler.pop()
    return handler == [line.strip() for line in text.splitlines()], handler


def predict_batch(conn: Any, target: Classifier, sources: list[InputSource],
                  top_k: Optional[int]) -> Optional[list[Prediction]]:
    """One request for *sources*; their predictions as the MMS API would have answered each, or None where
    the handler refused one of the images (400, 415: the whole request fails; each is then sent alone).

    Raises:
        OSError: the request failed otherwise, or its answer is not the classifier's.
    """
    images = [source.read() for source in sources]
    header = json.dumps({"inputs": [{"name": "images", "datatype": "BYTES", "shape": [len(images)],
                                     "parameters": {"binary_data_size": sum(4 + len(i) for i in images)}}],
                         "parameters": {"binary_data_output": True}}).encode("utf-8")
    body = b"".join([header, *(struct.pack("<I", len(i)) + i for i in images)])
    status, _, answer = conn.request("POST", target.path, body, "application/octet-stream",
                                     {"Inference-Header-Content-Length": str(len(header))})
    if status in (400, 415):
        return None
    if status != 200:
        raise OSError(f"HTTP {status}")
    rows = _probabilities(answer, conn.last_headers.get(_HEADER_LENGTH), len(images), target.classes)
    k = top_k or DEFAULT_TOP_K
    return [Prediction(source.name, 200, _ranked(row, target.labels, k), "application/json")
            for source, row in zip(sources, rows)]


def _probabilities(body: bytes, header_length: Optional[str], n: int, classes: int) -> list[array]:
    """The ``[n, classes]`` FP32 output of a binary infer answer, a row per image."""
    try:
        length = int(header_length or "")
        header = json.loads(body[:length])
        (out,) = header["outputs"]
        ok = out["datatype"] == "FP32" and out["shape"] == [n, classes] \
            and out["parameters"]["binary_data_size"] == 4 * n * classes == len(body) - length
    except (ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        raise OSError("the answer is not the classifier's probabilities")
    values = array("f")
    values.frombytes(body[length:])
    if struct.pack("=I", 1) != struct.pack("<I", 1):
        values.byteswap()
    return [values[i * classes:(i + 1) * classes] for i in range(n)]


def _ranked(row: array, labels: Optional[list[str]], k: int) -> bytes:
    """The handler's answer for one image: the top *k* classes by probability (ties in class order)."""
    order = sorted(range(len(row)), key=lambda i: -row[i])[:k]
    return json.dumps([{"probability": row[i], "class": labels[i] if labels is not None else str(i)}
                       for i in order], indent=2).encode("utf-8")
