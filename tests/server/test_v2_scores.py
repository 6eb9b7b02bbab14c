"""The v2 API's classifier outputs from the built-in handler's ``scores=npy`` answers: the same tensors as from
its ranked JSON lists, and a worker's answer that is not a plain float32 vector refused before anything is
allocated from its header."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from mmsctl.engine.protocol import ResponseItem
from mmsctl.engine.tensors import RequestedOutput
from mmsctl.server.v2.models import NPY_TYPE, ModelSignature, TensorSpec, V2Failure, classifier_outputs

LABELS = ["n0 zero", "n1 one", "n2 two", "n3 three", "n4 four"]


def _sig(labels: list[str] = LABELS) -> ModelSignature:
    return ModelSignature(True, [TensorSpec("data_0", "FP32", [-1, 3, 4, 4])],
                          [TensorSpec("probabilities", "FP32", [-1, len(labels)])], list(labels))


def _npy(row: np.ndarray) -> ResponseItem:
    out = io.BytesIO()
    np.save(out, row, allow_pickle=False)
    return ResponseItem(200, out.getvalue(), NPY_TYPE)


def _ranked(row: np.ndarray) -> ResponseItem:
    """What the handler answers for ``topk`` of every class: its ranked list."""
    order = np.argsort(-row, kind="stable")
    return ResponseItem(200, json.dumps([{"probability": float(row[i]), "class": LABELS[i]} for i in order],
                                        indent=2).encode(), "application/json")


@pytest.mark.parametrize("wanted", [[], [RequestedOutput("probabilities", classification=3)],
                                    [RequestedOutput("probabilities", classification=9)]])
def test_score_vectors_give_the_tensors_ranked_lists_give(wanted: list[RequestedOutput]) -> None:
    rows = [np.array([0.1, 0.3, 0.3, 0.2, 0.1], dtype=np.float32), np.array([0.5, 0.0, 0.25, 0.125, 0.125],
                                                                              dtype=np.float32)]
    from_scores = classifier_outputs(_sig(), [_npy(r) for r in rows], wanted)
    from_lists = classifier_outputs(_sig(), [_ranked(r) for r in rows], wanted)
    assert [(t.name, t.datatype, t.shape) for t in from_scores] == [(t.name, t.datatype, t.shape) for t in from_lists]
    for a, b in zip(from_scores, from_lists):
        assert a.data.tolist() == b.data.tolist()


def test_a_label_that_repeats_keeps_its_own_class_index() -> None:
    """A ranked list names classes by label only; a score vector keeps each class where it is."""
    twice = ["n0 zero", "n1 one", "n1 one", "n3 three", "n4 four"]  # as real synsets have
    row = np.array([0.5, 0.0, 0.25, 0.125, 0.125], dtype=np.float32)
    (probs,) = classifier_outputs(_sig(twice), [_npy(row)], [])
    (top,) = classifier_outputs(_sig(twice), [_npy(row)], [RequestedOutput("probabilities", classification=2)])
    assert probs.data.tolist() == [row.tolist()] and top.data.tolist() == [["0.500000:0:n0 zero", "0.250000:2:n1 one"]]


def _header(descr: str, shape: str, fortran: str = "False") -> bytes:
    text = f"{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}"
    text += " " * (63 - (10 + len(text)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode("latin-1")


@pytest.mark.parametrize("body", [
    _header("<f4", "(1000000000000,)") + b"\0" * 20,   # a shape that would allocate 4 TB
    _header("<f4", "(5,)") + b"\0" * 16,               # fewer bytes than it says
    _header("<f4", "(5,)") + b"\0" * 24,               # more
    _header("<f8", "(5,)") + b"\0" * 40,               # not float32
    _header("<f4", "(5, 1)") + b"\0" * 20,             # not a vector
    _header("<f4", "(4,)") + b"\0" * 16,               # not one score per class
    _header("|O", "(5,)") + b"\0" * 40,                # objects (pickles)
    _header("<f4", "(5,)", "True") + b"\0" * 20,
    b"\x93NUMPY\x09\x00garbage",
    b"",
])
def test_a_worker_answer_that_is_not_a_score_vector_is_a_500(body: bytes) -> None:
    with pytest.raises(V2Failure) as caught:
        classifier_outputs(_sig(), [ResponseItem(200, body, NPY_TYPE)], [])
    assert caught.value.status == 500
