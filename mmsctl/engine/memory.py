"""What a model's network may take from memory: checked before it is bound, and enforced on the process.

An archive's ``signature.json`` says the input shape, and binding the network allocates
whatever that shape implies: a SqueezeNet asked for 3000x3000 inputs wants 6 GiB. So before
the built-in handler binds, and before the kernel measurement times a model, the network's
size is worked out from the symbol alone (MXNet infers every internal shape without
allocating): the output of every node, every argument (weights and the input) and every
auxiliary state, in bytes of their types, at the batch size that will be bound. A network over
``max_model_memory`` is refused with an :class:`~mmsctl.errors.EngineError` that names both
figures and the setting.

The estimate counts every intermediate output as if all were alive at once: MXNet reuses
buffers, so the real figure is lower, but MKL-DNN keeps reordered copies beside it. What the
estimate misses is bounded by the process limit (:func:`limit_this_process`): each worker and
each measuring child runs under ``RLIMIT_DATA`` = twice the network limit plus 1 GiB (room for the
interpreter, MXNet and its threads, and a decoded image: docs/performance.md).
``RLIMIT_DATA`` counts memory a process can write to (heap, anonymous mappings), not address
space that is only reserved, so MXNet's and OpenMP's reservations do not trip it the way
``RLIMIT_AS`` would; an allocation past it fails (``MemoryError``, or MXNet's "Failed to
allocate CPU Memory") and fails its load or batch, never the machine.
"""

from __future__ import annotations

import os
from typing import Any, Optional

from mmsctl.errors import EngineError

__all__ = [
    "MEMORY_VAR",
    "SETTING_TEXT",
    "check_network",
    "limit_from_env",
    "limit_this_process",
    "network_bytes",
    "process_limit",
]

#: The variable a worker reads its limit from (the server sets it from ``max_model_memory``).
MEMORY_VAR = "MMSCTL_MAX_MODEL_MEMORY"
#: How the setting is named in messages.
SETTING_TEXT = "max_model_memory in config.properties for serve, MMSCTL_MAX_MODEL_MEMORY for predict"
#: What a worker needs beside its network: the interpreter, MXNet, OpenMP threads, a decoded image.
_PROCESS_OVERHEAD = 1024**3


def limit_from_env() -> int:
    """The network limit in bytes: :data:`MEMORY_VAR` (what a parent passes its workers), else the setting."""
    value = os.environ.get(MEMORY_VAR, "").strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    from mmsctl.config import max_model_memory

    return max_model_memory()


def process_limit(model_limit: int) -> int:
    """The ``RLIMIT_DATA`` of a process whose network may take *model_limit* bytes."""
    return 2 * model_limit + _PROCESS_OVERHEAD


def limit_this_process(model_limit: int) -> Optional[int]:
    """Cap this process's data memory at :func:`process_limit` (soft and hard: user code cannot lift it).

    Call it before mxnet loads. Returns the cap, or None where the platform has no ``RLIMIT_DATA``.
    """
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return None
    if not hasattr(resource, "RLIMIT_DATA"):  # pragma: no cover
        return None
    cap = process_limit(model_limit)
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if soft != resource.RLIM_INFINITY and soft < cap:
        cap = soft  # never raise a limit the user set
    resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
    return cap


def network_bytes(symbol: Any, data_name: str, shape: tuple[int, ...]) -> int:
    """Bytes of every node output, argument and auxiliary state of *symbol* (an ``mx.sym.Symbol``) when
    its input *data_name* has *shape*. Inputs whose shape cannot be inferred count as nothing.

    Raises:
        EngineError: MXNet cannot infer the shapes (the input shape does not fit the network).
    """
    import numpy as np

    internals = symbol.get_internals()
    try:
        arg_shapes, out_shapes, aux_shapes = internals.infer_shape_partial(**{data_name: shape})
        arg_types, out_types, aux_types = internals.infer_type_partial(**{data_name: np.float32})
    except Exception as exc:  # noqa: BLE001 - MXNetError, or a bad shape: both say the same
        raise EngineError(f"the network does not take input {data_name!r} of shape {shape}: "
                          f"{str(exc).strip().splitlines()[0] if str(exc).strip() else exc}") from None
    variables = set(internals.list_arguments()) | set(internals.list_auxiliary_states())
    outputs = [(s, t) for name, s, t in zip(internals.list_outputs(), out_shapes, out_types) if name not in variables]
    every = list(zip(arg_shapes, arg_types)) + list(zip(aux_shapes, aux_types)) + outputs
    return sum(_bytes(s, t) for s, t in every)


def _bytes(shape: Optional[tuple[int, ...]], dtype: Any) -> int:
    import numpy as np

    if not shape or any(int(d) <= 0 for d in shape):
        return 0
    size = np.dtype(dtype).itemsize if dtype is not None else 4
    return int(np.prod([int(d) for d in shape], dtype=np.int64)) * size


def check_network(symbol_file: str, data_name: str, shape: tuple[int, ...], limit: int) -> int:
    """The bytes of the network in *symbol_file* bound for *shape*; raise if over *limit*.

    The one check both the built-in handler's load and the kernel measurement use.

    Raises:
        EngineError: over the limit (the message names the figure, the limit and the setting).
    """
    from mmsctl.engine.mxnet_compat import import_mxnet

    mx = import_mxnet()
    needed = network_bytes(mx.sym.load(symbol_file), data_name, tuple(shape))
    if needed > limit:
        raise EngineError(
            f"the network needs {needed} bytes ({_gib(needed)}) for input {data_name} of shape "
            f"{tuple(shape)}, over the limit of {limit} bytes ({_gib(limit)}) ({SETTING_TEXT})",
            hint="raise max_model_memory (serve) or MMSCTL_MAX_MODEL_MEMORY (predict), "
                 "or use a smaller batch size or input shape",
            param="max_model_memory",
        )
    return needed


def _gib(size: int) -> str:
    return f"{size / 1024**3:.2f} GiB"
