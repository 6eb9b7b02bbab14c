"""A loaded model: request items in, response items out, with MMS 1.1.11's batch semantics.

Both ``mmsctl predict`` and the server's worker processes call :func:`load_service`
and then :meth:`ModelService.handle` per batch. What the handler sees and what
comes back follow MMS's Python worker exactly:

* each request becomes a dict of its parameters (the raw body is ``body``);
  ``application/json`` values are parsed, ``text/*`` values are ``str``, the
  rest are ``bytearray`` (and so is a value that is not valid JSON or UTF-8 text:
  MMS fails the whole batch there);
* results are encoded per item: bytes as-is, ``str`` as UTF-8, anything else as
  ``json.dumps(value, indent=2)``; status, reason, content type and headers the
  handler set through the context are applied per item;
* if the handler raises, returns something that is not a list, or a list of the
  wrong length, every item of the batch fails with MMS's error body
  (``503 Prediction failed`` and so on).
"""

from __future__ import annotations

import json
import logging
import re
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional

import mmsctl
from mmsctl.engine import mxnet_compat
from mmsctl.engine.context import Context, MetricsStore, RequestProcessor
from mmsctl.engine.loader import LoadedHandler, load_handler, load_legacy_handler, split_handler
from mmsctl.engine.mms_compat import provide_mms
from mmsctl.engine.protocol import RequestItem, ResponseItem
from mmsctl.engine.spec import ServiceSpec
from mmsctl.errors import EngineError, HandlerError, NoHandlerError

__all__ = ["ModelService", "load_service"]

log = logging.getLogger("mmsctl.engine")

#: The message of the 500 that answers a handler's answer no server can send (the servers' own for such an answer).
_INVALID_ANSWER = "Invalid response from the model."

PREDICTION_METRIC = "PredictionTime"


def _mime(content_type: Optional[str]) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def _decode_value(value: Any, content_type: str, decode: bool) -> Any:
    """JSON values parsed and text values as ``str``, as MMS does; a value that is not what its
    content type says (image bytes sent as ``text/html`` by hey, or as JSON) stays raw bytes."""
    raw = value.encode("utf-8") if isinstance(value, str) else value
    try:
        if decode and content_type == "application/json":
            return json.loads(bytes(raw).decode("utf-8"))
        if decode and content_type.startswith("text"):
            return bytes(raw).decode("utf-8")
    except (UnicodeDecodeError, ValueError, RecursionError):  # RecursionError: JSON nested too deep
        pass
    return bytearray(raw)


def _read_manifest(root: Path, legacy: bool) -> Optional[dict[str, Any]]:
    path = root / ("MANIFEST.json" if legacy else "MAR-INF/MANIFEST.json")
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _is_legacy(spec: ServiceSpec) -> bool:
    """An MMS 0.4 archive (its manifest at the top), unless the user chose another handler."""
    if spec.handler_override is not None:
        return False
    root = Path(spec.root)
    return spec.legacy or (
        (root / "MANIFEST.json").is_file() and not (root / "MAR-INF" / "MANIFEST.json").is_file()
    )


def _looks_like_checkpoint(root: Path) -> bool:
    return (root / "signature.json").is_file() and any(root.glob("*-symbol.json"))


def _check_gpu(gpu_id: Optional[int]) -> None:
    if gpu_id is None:
        return
    if gpu_id < 0:
        raise EngineError(f"GPU {gpu_id}: a GPU id is 0 or more", param="gpu_id")
    from mmsctl.engine.mxnet_compat import import_mxnet

    mx = import_mxnet()
    try:
        count = int(mx.context.num_gpus())
    except Exception:  # noqa: BLE001 - a CPU-only build may raise instead of returning 0
        count = 0
    if count == 0:
        raise EngineError(
            f"GPU {gpu_id}: no GPU available (this mxnet build has no CUDA support or no GPU is visible)",
            hint="run on the CPU, or install a CUDA build such as mxnet-cu112",
            param="gpu_id",
        )
    if gpu_id >= count:
        raise EngineError(f"GPU {gpu_id}: only {count} GPU(s) visible (ids 0..{count - 1})", param="gpu_id")


class ModelService:
    """One model with its handler started; answers batches of requests.

    Not thread-safe: one batch at a time, like an MMS worker.
    """

    def __init__(self, handler: LoadedHandler, context: Context, *, decode_input: bool = True) -> None:
        self._handler = handler
        self.context = context
        self.decode_input = decode_input
        #: the exception of the last batch that failed as a whole (for logs and `predict`).
        self.last_exception: Optional[BaseException] = None
        #: what the handler reported through ``context.metrics`` in the last batch.
        self.last_metrics: Optional[MetricsStore] = None
        self._closed = False

    @property
    def model_name(self) -> str:
        return self.context.model_name

    @property
    def batch_size(self) -> int:
        return int(self.context.system_properties["batch_size"])

    @property
    def last_failure(self) -> Optional[str]:
        """``Type: text`` of the last batch that failed as a whole, or None (as a worker pool reports it)."""
        exc = self.last_exception
        return f"{type(exc).__name__}: {exc}" if exc is not None else None

    def map(self, batches: Iterable[list[RequestItem]]) -> Iterator[list[ResponseItem]]:
        """The responses of each batch, in order, one batch at a time in this process (a worker pool's
        ``map`` runs several at once); :attr:`last_failure` is the latest batch's."""
        for batch in batches:
            yield self.handle(batch) if batch else []

    def _to_input(self, item: RequestItem) -> tuple[dict[str, Any], dict[str, Any]]:
        data: dict[str, Any] = {}
        headers: dict[str, Any] = {}
        for param in item.parameters:
            mime = _mime(param.content_type)
            try:
                data[param.name] = _decode_value(param.value, mime, self.decode_input)
            except ValueError:  # text with a lone surrogate: no bytes stand for it
                raise ValueError(f"parameter {str(param.name)[:100]!r} is not valid text") from None
            headers[param.name] = {"content-type": mime}
        headers.update(item.headers)
        return data, headers

    def handle(self, batch: list[RequestItem]) -> list[ResponseItem]:
        """Run the handler on one batch; always one :class:`ResponseItem` per request, in order."""
        if self._closed:
            raise EngineError(f"model {self.model_name!r} is closed")
        results: list[Optional[ResponseItem]] = [None] * len(batch)
        inputs: list[dict[str, Any]] = []
        processors: list[RequestProcessor] = []
        positions: list[int] = []
        for pos, item in enumerate(batch):
            try:
                data, headers = self._to_input(item)
            except ValueError as exc:  # raised above, with a message of its own
                results[pos] = ResponseItem.error(400, "BadRequestException", f"Invalid request body: {exc}")
                continue
            inputs.append(data)
            processors.append(RequestProcessor(headers))
            positions.append(pos)
        if inputs:
            answered = self._run(inputs, processors, [batch[p].request_id for p in positions])
            for pos, response in zip(positions, answered):
                results[pos] = response
        if all(r is not None for r in results):
            return results  # type: ignore[return-value]
        failed = ResponseItem.error(503, "InternalServerException", "Prediction failed")  # built only when used
        return [r if r is not None else failed for r in results]

    def _run(
        self, inputs: list[dict[str, Any]], processors: list[RequestProcessor], request_ids: list[str]
    ) -> list[ResponseItem]:
        """Call the handler once for the batch and turn what it returned into responses."""
        ctx = self.context
        ctx.request_ids = dict(enumerate(request_ids))
        ctx.request_processor = processors
        metrics = MetricsStore(ctx.request_ids, ctx.model_name)
        ctx.metrics = metrics
        self.last_metrics = metrics
        self.last_exception = None
        n = len(inputs)
        start = time.perf_counter()
        try:
            with self._handler.scope:
                ret = self._handler.entry(inputs, ctx)
        except Exception as exc:  # noqa: BLE001 - user code: any failure fails the batch, as in MMS
            self.last_exception = exc
            return [self._failure(exc)] * n
        if not isinstance(ret, list):
            self.last_exception = TypeError(f"handler returned {type(ret).__name__}, not a list")
            log.warning("model %s: invalid return type %s", ctx.model_name, type(ret))
            return [ResponseItem.error(503, "InternalServerException", "Invalid model predict output")] * n
        if len(ret) != n:
            self.last_exception = ValueError(f"handler returned {len(ret)} results for {n} requests")
            log.warning("model %s: batch of %d got %d responses", ctx.model_name, n, len(ret))
            return [ResponseItem.error(503, "InternalServerException", "number of batch response mismatched")] * n
        metrics.add_time(PREDICTION_METRIC, round((time.perf_counter() - start) * 1000, 2))
        try:
            return [_encode(value, proc) for value, proc in zip(ret, processors)]
        except (TypeError, ValueError) as exc:
            self.last_exception = exc
            log.warning("model %s: cannot serialise output", ctx.model_name, exc_info=True)
            return [ResponseItem.error(503, "InternalServerException", "Unsupported model output data type.")] * n

    def _failure(self, exc: Exception) -> ResponseItem:
        """The answer for every request of a batch whose handler raised *exc* (MMS's codes)."""
        name = self.context.model_name
        if isinstance(exc, MemoryError):
            log.error("model %s: out of memory", name, exc_info=True)
            return ResponseItem.error(507, "InternalServerException", "Out of resources")
        if type(exc).__name__ == "PredictionException" and hasattr(exc, "error_code"):
            log.error("model %s: prediction error", name, exc_info=True)
            code = int(getattr(exc, "error_code", 500))
            return ResponseItem.error(code, "InternalServerException", str(getattr(exc, "message", exc)))
        log.warning("model %s: invoking the handler failed", name, exc_info=True)
        return ResponseItem.error(503, "InternalServerException", "Prediction failed")

    def pin(self) -> None:
        """This process serves only this model from now on: its modules stay in ``sys.modules``
        (a worker; ``mmsctl predict`` in one process may load several models and does not pin)."""
        self._handler.scope.pin()

    def close(self) -> None:
        """Drop the handler and its modules (MMS ``unload``); the service cannot be used after."""
        self._closed = True
        self._handler.scope.modules.clear()

    def __enter__(self) -> "ModelService":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _encode(value: Any, processor: RequestProcessor) -> ResponseItem:
    """One handler result as a response: bytes as-is, str as UTF-8, anything else as JSON.

    Raises:
        TypeError, ValueError: the value cannot be serialised.
    """
    if isinstance(value, (bytes, bytearray)):
        body = bytes(value)
    elif isinstance(value, str):
        body = value.encode("utf-8")
    else:
        body = json.dumps(value, indent=2).encode("utf-8")
    status = processor.get_response_status_code() or 200
    if type(status) is not int or not 100 <= status <= 999:
        # MMS packs the status as a 4-byte int: anything else (a str such as "404") is no status it can send.
        log.warning("the handler set the response status %.40r, not an int from 100 to 999: answered 500", status)
        return ResponseItem.error(500, "InternalServerException", _INVALID_ANSWER)
    headers = dict(processor.get_response_headers())
    content_type = headers.pop("content-type", None) or None
    return ResponseItem(
        status=status,
        body=body,
        content_type=content_type,
        headers=headers,
        reason=processor.get_response_status_phrase() or None,
    )


def _locate_handler(
    handler: Optional[str], root: Path, *, override: bool
) -> tuple[str, Optional[Path]]:
    """The handler string to import and, where it is not a module of the archive, its file.

    No handler means the built-in vision handler; ``mmsctl_vision_service`` missing from the
    archive is taken from mmsctl itself; an override naming an existing ``.py`` file outside the
    archive (``--handler ~/h.py:fn``) is loaded from there.
    """
    from mmsctl.engine.builtin import VISION_HANDLER, VISION_HANDLER_FILE, VISION_HANDLER_MODULE

    handler = handler or VISION_HANDLER
    module_part, _, function = handler.partition(":")
    module_name = split_handler(handler)[0]
    candidate = Path(module_part).expanduser()
    in_archive = not candidate.is_absolute() and (root / module_part).is_file()
    if override and module_part.endswith(".py") and not in_archive and candidate.is_file():
        return (f"{module_name}:{function}" if function else module_name), candidate.resolve()
    if module_name == VISION_HANDLER_MODULE and not (root / f"{VISION_HANDLER_MODULE}.py").is_file():
        return f"{VISION_HANDLER_MODULE}:{function or 'handle'}", VISION_HANDLER_FILE
    return handler, None


def _preload_mxnet(handler: str, root: Path, handler_file: Optional[Path]) -> None:
    """Import mxnet through :func:`~mmsctl.engine.mxnet_compat.import_mxnet` before a handler
    that uses it does, so the import gets the patches and the operator wrappers compiled on first call
    (most of a cold start's import).

    Handlers that never mention mxnet (no-op, custom pure-Python ones) stay light.
    """
    module_name = split_handler(handler)[0]
    source = handler_file or (root / f"{module_name}.py")
    try:
        with open(source, "rb") as fh:
            uses_mxnet = b"mxnet" in fh.read()
    except OSError:
        uses_mxnet = False
    if uses_mxnet:
        mxnet_compat.import_mxnet()


def load_service(
    spec: ServiceSpec,
    *,
    server_name: str = "mmsctl",
    server_version: str = mmsctl.__version__,
) -> ModelService:
    """Start the handler of an (extracted) model folder.

    Args:
        spec: the folder, the handler and the batch size and GPU to run with
            (:meth:`mmsctl.archive.ModelArchive.service_spec` makes one for an archive).
        server_name, server_version: what ``context.system_properties`` reports.

    Returns:
        A started :class:`ModelService`.

    Raises:
        HandlerError: no handler, or it cannot be imported or initialised.
        EngineError: a GPU was asked for and none is available.

    Example:
        >>> svc = load_service(open_archive(Path("squeezenet.mar")).service_spec(batch_size=8))
        >>> svc.handle([RequestItem.from_body("1", jpeg_bytes)])[0].body
    """
    if spec.batch_size < 1:
        raise EngineError(f"batch size must be 1 or more, not {spec.batch_size}")
    _check_gpu(spec.gpu_id)
    mxnet_compat.prepare_imports()
    root = Path(spec.root)
    legacy = _is_legacy(spec)
    name = spec.model_name or root.name
    manifest = _read_manifest(root, legacy) or spec.manifest
    context = Context(name, str(root), manifest, spec.batch_size, spec.gpu_id, server_version, server_name)
    loaded = _start_legacy(spec, context) if legacy else _start_handler(spec, context)
    return ModelService(loaded, context, decode_input=spec.decode_input)


def _start_legacy(spec: ServiceSpec, context: Context) -> LoadedHandler:
    """A legacy 0.x service, over MMS's service classes: mmsctl's own (:mod:`~mmsctl.engine.mms_compat`, which
    import mxnet through mmsctl when a service needs it), or an installed ``mms`` (whose classes import it)."""
    if not spec.handler:
        raise HandlerError("legacy archive names no service file (Model.Service in MANIFEST.json)")
    root = Path(spec.root)
    if not provide_mms(root, legacy=True) or _imports_mxnet(root / spec.handler):
        mxnet_compat.import_mxnet()
    return load_legacy_handler(spec.handler, root, context.manifest, context)


_MXNET_IMPORT = re.compile(rb"^[ \t]*(?:import|from)[ \t]+mxnet\b", re.MULTILINE)


def _imports_mxnet(source: Path) -> bool:
    """Whether the file *source* (``.py`` added where missing) imports mxnet itself."""
    try:
        with open(source if source.suffix == ".py" else source.with_name(source.name + ".py"), "rb") as fh:
            return bool(_MXNET_IMPORT.search(fh.read()))
    except OSError:
        return False


def _start_handler(spec: ServiceSpec, context: Context) -> LoadedHandler:
    root = Path(spec.root)
    chosen = spec.chosen_handler
    if not chosen and not _looks_like_checkpoint(root):
        raise NoHandlerError(
            f"model {context.model_name!r} names no handler and is not an MXNet checkpoint "
            "(signature.json + *-symbol.json)",
            hint="give it a handler (module:function) in its manifest",
        )
    handler_name, handler_file = _locate_handler(chosen, root, override=spec.handler_override is not None)
    if chosen:
        provide_mms(root, legacy=False, handler_file=handler_file)  # one raising mms.service.PredictionException
    _preload_mxnet(handler_name, root, handler_file)
    _check_network_memory(spec, handler_name)
    return load_handler(handler_name, root, context, handler_file=handler_file,
                        overridden=spec.handler_override is not None)


def _check_network_memory(spec: ServiceSpec, handler: str) -> None:
    """Refuse a checkpoint whose network, bound at the batch size the built-in handler binds first (the
    largest), would take more than ``max_model_memory`` (:mod:`mmsctl.engine.memory`). Other handlers
    bind what they like: the worker's process limit bounds them. On a GPU the host's limit does not apply.

    Raises:
        EngineError: over the limit.
    """
    from mmsctl.engine.builtin import VISION_HANDLER_MODULE
    from mmsctl.engine.kernels import find_checkpoint
    from mmsctl.engine.memory import check_network, limit_from_env

    if spec.gpu_id is not None or split_handler(handler)[0] != VISION_HANDLER_MODULE:
        return
    ckpt = find_checkpoint(Path(spec.root))
    if ckpt is not None:  # else the handler refuses it itself (no checkpoint, or a signature too large to bind)
        check_network(str(ckpt.symbol), ckpt.data_name, (spec.batch_size,) + ckpt.shape[1:], limit_from_env())
