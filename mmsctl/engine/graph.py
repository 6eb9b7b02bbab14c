"""Inference-only rewrites of an MXNet symbol that let MKL-DNN run a network whole.

Networks imported from ONNX (SqueezeNet v1.1 as MMS's model zoo ships it) use the op ``relu``
instead of ``Activation(act_type='relu')`` and put a ``Pad`` of all-zero width before each max
pool. MXNet 1.9.1 has MKL-DNN kernels for neither, so every convolution's output is reordered
back to plain NCHW and the pools get NCHW input, for which oneDNN falls back to its reference
pooling, several times slower than the network run whole (docs/performance.md). The rewrites here
cannot change an output: ``relu`` and ``Activation(relu)`` are the same function and a zero-width
pad is the identity. Node names and the graph's outputs are kept. ``MMSCTL_GRAPH_REWRITE=0``
switches them off (debugging). A ``Dropout`` (the identity at inference) is left in: oneDNN's
verbose log shows it costs no reorder.

Works on the symbol's JSON text (``Symbol.tojson()``), so importing this module loads no mxnet.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any

__all__ = ["VERSION", "enabled", "normalise"]

#: Bumped whenever the rewrites change: part of the kernel choice's cache key (a new graph measures again).
VERSION = 1
#: ``0``/``off`` switches the rewrites off (read once per process).
SETTING_VAR = "MMSCTL_GRAPH_REWRITE"


@functools.lru_cache(maxsize=1)
def enabled() -> bool:
    """Whether the rewrites apply (``MMSCTL_GRAPH_REWRITE`` is not ``0``/``off``/``false``/``no``)."""
    return os.environ.get(SETTING_VAR, "").strip().lower() not in ("0", "off", "false", "no")


def _numbers(text: Any) -> list[float]:
    try:
        return [float(v) for v in str(text).strip("()[] ").split(",") if v.strip()]
    except ValueError:
        return [1.0]  # unreadable: treated as a real pad, kept


def _zero_pad(node: dict[str, Any]) -> bool:
    """Whether *node* is a ``Pad`` of width 0 on every side (whatever its mode): the identity."""
    if node["op"] != "Pad":
        return False
    widths = _numbers((node.get("attrs") or {}).get("pad_width", ""))
    return bool(widths) and not any(widths)


def normalise(symbol_json: str) -> tuple[str, list[str]]:
    """The symbol with the rewrites applied, and what changed (``["relu -> Activation(relu) x26", ...]``).

    The text comes back unchanged (and the list empty) where nothing applies or the rewrites are off.
    A node that is one of the graph's outputs is never removed, so the output names stay.
    """
    if not enabled():
        return symbol_json, []
    graph = json.loads(symbol_json)
    nodes: list[dict[str, Any]] = graph["nodes"]
    heads = {h[0] for h in graph.get("heads", [])}
    alias: dict[int, list[int]] = {}  # removed node -> the entry its consumers read instead
    counts: dict[str, int] = {}
    for i, node in enumerate(nodes):
        node["inputs"] = [alias.get(e[0], e) for e in node.get("inputs", [])]
        if node["op"] == "relu":
            keep = {k: v for k, v in (node.get("attrs") or {}).items() if k.startswith("__")}
            node["op"], node["attrs"] = "Activation", {**keep, "act_type": "relu"}
            counts["relu -> Activation(relu)"] = counts.get("relu -> Activation(relu)", 0) + 1
        elif i not in heads and node["inputs"] and _zero_pad(node):
            alias[i] = node["inputs"][0]
            counts["zero Pad removed"] = counts.get("zero Pad removed", 0) + 1
    if not counts:
        return symbol_json, []
    graph["nodes"], graph["arg_nodes"], graph["heads"] = _compact(nodes, set(alias), graph.get("heads", []))
    graph.pop("node_row_ptr", None)  # optional; MXNet recomputes it
    return json.dumps(graph), [f"{label} x{n}" for label, n in counts.items()]


def _compact(nodes: list[dict[str, Any]], removed: set[int],
             heads: list[list[int]]) -> tuple[list[dict[str, Any]], list[int], list[list[int]]]:
    """The nodes without *removed*, renumbered, with the argument list and heads to match."""
    new_index: dict[int, int] = {}
    kept: list[dict[str, Any]] = []
    for i, node in enumerate(nodes):
        if i in removed:
            continue
        new_index[i] = len(kept)
        node["inputs"] = [[new_index[e[0]], *e[1:]] for e in node["inputs"]]
        kept.append(node)
    args = [i for i, node in enumerate(kept) if node["op"] == "null"]
    return kept, args, [[new_index[h[0]], *h[1:]] for h in heads]
