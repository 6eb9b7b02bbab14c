"""``mms.utils.mxnet.nlp``: sentences as token ids, padded into buckets, for MMS 0.x text services."""

from __future__ import annotations

import bisect
from typing import Any, Optional

from ..._mxnet import mxnet as _mx

__all__ = ["encode_sentences", "pad_sentence"]


def encode_sentences(sentences: list[list[str]], vocab: Optional[dict[str, int]] = None, invalid_label: int = -1,
                     invalid_key: str = "\n", start_label: int = 0) -> tuple[list[list[int]], dict[str, int]]:
    """Each sentence's tokens as ids, and the vocabulary: without *vocab* one is built (new words get the next id,
    skipping *invalid_label*); with one, unknown words are *invalid_label*."""
    building = vocab is None
    words: dict[str, int] = {invalid_key: invalid_label} if vocab is None else vocab
    next_id = start_label
    encoded = []
    for sentence in sentences:
        ids = []
        for word in sentence:
            if word not in words:
                if not building:
                    ids.append(invalid_label)
                    continue
                if next_id == invalid_label:
                    next_id += 1
                words[word] = next_id
                next_id += 1
            ids.append(words[word])
        encoded.append(ids)
    return encoded, words


def pad_sentence(sentence: list[int], buckets: list[int], invalid_label: int = -1, data_name: str = "data",
                 layout: str = "NT") -> Any:
    """An encoded sentence padded with *invalid_label* to the smallest bucket that holds it, as a DataBatch of
    one (``layout`` "NT": (1, length); "TN": (length, 1))."""
    import numpy as np

    mx = _mx()
    length = buckets[bisect.bisect_left(buckets, len(sentence))]
    padded = np.full((length,), invalid_label, dtype="float32")
    padded[:len(sentence)] = sentence
    shape = (1, length) if layout == "NT" else (length, 1)
    return mx.io.DataBatch([mx.nd.array([padded], dtype="float32")], pad=0, bucket_key=length,
                           provide_data=[mx.io.DataDesc(name=data_name, shape=shape, layout=layout)])
