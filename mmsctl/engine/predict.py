"""The core of ``mmsctl predict``: find the model, feed inputs through it in batches, collect answers.

Local runs load the model in this process (:func:`load_service`) and send each
input as the raw request body, exactly what ``curl -T image.jpg
http://host:8080/predictions/model`` would hand the handler in MMS, so the
answer is byte-for-byte the server's response body. Remote runs
(``--context``) send the same body to a server instead.

Reading inputs (files, stdin, URLs) happens on a background thread ahead of
the forward passes, so disk and network time overlap with inference.
"""

from __future__ import annotations

import json
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional

from mmsctl.engine.inputs import InputSource
from mmsctl.engine.protocol import Parameter, RequestItem, ResponseItem
from mmsctl.engine.spec import ServiceSpec
from mmsctl.errors import MmsError

__all__ = [
    "Prediction", "open_model", "predict_local", "predict_remote", "start_service", "truncate_top_k",
]

_READ_AHEAD = 4  # batches read ahead of the one running


@dataclass
class Prediction:
    """The answer for one input: the response body as the server would send it, or why it failed."""

    input: str
    status: int
    body: bytes = b""
    content_type: Optional[str] = None
    error: Optional[str] = None
    error_type: Optional[str] = None
    #: the mmsctl error behind a failure, for a one-input run to raise as it is.
    cause: Optional[MmsError] = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.error is None and 200 <= self.status < 300

    def result(self) -> Any:
        """The body parsed as JSON where it is JSON, else text, else ``{"base64": …}``."""
        try:
            return json.loads(self.body)
        except ValueError:
            pass
        try:
            return self.body.decode("utf-8")
        except UnicodeDecodeError:
            import base64

            return {"base64": base64.b64encode(self.body).decode("ascii"), "content_type": self.content_type}

    def to_dict(self) -> dict[str, Any]:
        """The per-input object of ``-o json`` / ``-o jsonl`` with several inputs."""
        if self.ok:
            return {"input": self.input, "status": self.status, "result": self.result()}
        detail: Any = {"message": self.error}
        if self.body:
            parsed = self.result()
            detail = parsed if isinstance(parsed, dict) else {"message": self.error, "body": parsed}
        return {"input": self.input, "status": self.status, "error": detail}


def _failed_from_response(name: str, response: ResponseItem) -> Prediction:
    message = f"HTTP {response.status}"
    kind: Optional[str] = None
    try:
        parsed = json.loads(response.body)
        if isinstance(parsed, dict) and "message" in parsed:
            message, kind = str(parsed["message"]), parsed.get("type")
    except ValueError:
        text = response.body.decode("utf-8", "replace").strip()
        if text:
            message = f"{message}: {text[:200]}"
    return Prediction(name, response.status, response.body, response.content_type, message, kind)


def _from_response(name: str, response: ResponseItem) -> Prediction:
    if response.ok:
        return Prediction(name, response.status, response.body, response.content_type)
    return _failed_from_response(name, response)


def truncate_top_k(prediction: Prediction, top_k: Optional[int]) -> Prediction:
    """Keep the first *top_k* entries of a classification answer (a JSON list); others as they are."""
    if top_k is None or not prediction.ok:
        return prediction
    try:
        parsed = json.loads(prediction.body)
    except ValueError:
        return prediction
    if isinstance(parsed, list) and len(parsed) > top_k:
        prediction.body = json.dumps(parsed[:top_k], indent=2).encode("utf-8")
    return prediction


# -- the model ------------------------------------------------------------------------------


def _is_checkpoint_folder(path: Path) -> bool:
    return (
        path.is_dir()
        and not (path / "MAR-INF" / "MANIFEST.json").is_file()
        and not (path / "MANIFEST.json").is_file()
        and (path / "signature.json").is_file()
        and any(path.glob("*-symbol.json"))
    )


def open_model(location: str, *, progress: bool = True) -> ServiceSpec:
    """Find a model by zoo name, path, URL or ``name=location`` and open it.

    A bare MXNet checkpoint folder (``signature.json``, ``*-symbol.json``,
    ``*.params``, ``synset.txt``, no manifest) is served with the built-in vision
    handler as it is.

    Returns:
        What :func:`start_service` loads.

    Raises:
        ModelNotFoundError: nothing by that name or path.
        ArchiveError: the archive cannot be read.
    """
    from mmsctl.names import split_named

    name_override, target = split_named(location)
    path = Path(target).expanduser()
    if _is_checkpoint_folder(path):
        return ServiceSpec(path.resolve(), name_override or path.name.split("-")[0])
    from mmsctl.archive import open_archive
    from mmsctl.zoo import resolve_model

    resolved = resolve_model(target, progress=progress)
    path = Path(resolved.path)
    if _is_checkpoint_folder(path):
        return ServiceSpec(path.resolve(), name_override or resolved.name)
    archive = open_archive(path)
    return archive.service_spec(name=name_override or archive.model_name or resolved.name)


#: Inputs per forward pass for the built-in image handler (others get 1, as MMS's examples need).
AUTO_BATCH = 16


def default_batch_size(model: ServiceSpec, handler: Optional[str] = None) -> int:
    """The batch size `predict` uses when none is given."""
    from mmsctl.engine.builtin import VISION_HANDLER_MODULE
    from mmsctl.engine.loader import split_handler

    chosen = handler or model.handler
    if chosen is None or split_handler(chosen)[0] == VISION_HANDLER_MODULE:
        return AUTO_BATCH
    return 1


def start_service(
    model: ServiceSpec,
    inputs: int,
    *,
    batch_size: Optional[int] = None,
    handler: Optional[str] = None,
    gpu: Optional[int] = None,
    workers: Optional[int] = None,
) -> tuple[Any, int]:
    """Start what runs *model* for *inputs* inputs: this process, or a pool of one per core.

    Returns:
        The service (``handle``/``close``) and the batch size to feed it.
    """
    from mmsctl.engine.pool import choose_workers

    size = max(1, min(batch_size or default_batch_size(model, handler), inputs))
    spec = replace(model, batch_size=size, handler_override=handler, gpu_id=gpu)
    processes = choose_workers(workers, inputs, size, gpu=gpu)
    if processes > 1:
        from mmsctl.engine.pool import ServicePool

        return ServicePool(spec, workers=processes), size
    from mmsctl.engine.service import load_service

    return load_service(spec), size


# -- running ----------------------------------------------------------------------------------


def _read_all(sources: list[InputSource], read: Callable[[InputSource], bytes]) -> Iterator["Future[bytes]"]:
    """Futures of each input's bytes, read on one background thread, in order."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="mmsctl-read") as pool:
        pending: list[Future[bytes]] = []
        it = iter(sources)
        for source in it:
            pending.append(pool.submit(read, source))
            if len(pending) >= _READ_AHEAD * 8:
                break
        for source in it:
            yield pending.pop(0)
            pending.append(pool.submit(read, source))
        yield from pending


def _batches(
    sources: list[InputSource], batch_size: int, read: Callable[[InputSource], bytes]
) -> Iterator[list[tuple[InputSource, Optional[bytes], Optional[MmsError]]]]:
    batch: list[tuple[InputSource, Optional[bytes], Optional[MmsError]]] = []
    for source, future in zip(sources, _read_all(sources, read)):
        try:
            batch.append((source, future.result(), None))
        except MmsError as exc:
            batch.append((source, None, exc))
        if sum(1 for _, body, _ in batch if body is not None) >= batch_size:
            yield batch
            batch = []
    if batch:
        yield batch


def predict_local(
    service: Any,
    sources: list[InputSource],
    *,
    batch_size: int,
    top_k: Optional[int] = None,
    read: Optional[Callable[[InputSource], bytes]] = None,
) -> Iterator[Prediction]:
    """Run every input through a loaded model, in order.

    Args:
        service: a :class:`~mmsctl.engine.service.ModelService` from
            :func:`~mmsctl.engine.service.load_service` (batches run here, one at a time), or
            a :class:`~mmsctl.engine.pool.ServicePool` (batches run in worker processes,
            several at once).
        sources: from :func:`~mmsctl.engine.inputs.expand_inputs`.
        batch_size: inputs per ``handle`` call (at most the service's batch size).
        top_k: sent as the ``topk`` request parameter (honoured by the built-in handler) and
            applied to list answers.
        read: how to read an input (default :meth:`InputSource.read`).

    Yields:
        One :class:`Prediction` per input, in input order.
    """
    reader = read or (lambda s: s.read())
    sent: deque[list[tuple[InputSource, Optional[bytes], Optional[MmsError]]]] = deque()

    requests = _requests(sources, batch_size, reader, top_k, sent)
    pooled = getattr(service, "map", None)
    answers = pooled(requests) if callable(pooled) else (service.handle(b) if b else [] for b in requests)
    for responses in answers:
        batch = sent.popleft()
        detail = getattr(service, "last_exception", None)
        if detail is not None and not isinstance(detail, str):
            detail = f"{type(detail).__name__}: {detail}"
        it = iter(responses)
        for source, _body, error in batch:
            if error is not None:
                yield Prediction(source.name, 0, error=error.message, error_type=type(error).__name__, cause=error)
                continue
            prediction = _from_response(source.name, next(it))
            if not prediction.ok and detail is not None and prediction.status >= 500:
                prediction.error = f"{prediction.error} ({detail})"
            yield truncate_top_k(prediction, top_k)


def _requests(
    sources: list[InputSource],
    batch_size: int,
    read: Callable[[InputSource], bytes],
    top_k: Optional[int],
    sent: "deque[list[tuple[InputSource, Optional[bytes], Optional[MmsError]]]]",
) -> Iterator[list[RequestItem]]:
    """The request items of each batch; the batch itself goes to *sent* for matching answers."""
    counter = 0
    for batch in _batches(sources, batch_size, read):
        items: list[RequestItem] = []
        for source, body, _ in batch:
            if body is None:
                continue
            counter += 1
            item = RequestItem.from_body(f"predict-{counter}", body, source.content_type)
            if top_k is not None:
                item.parameters.append(Parameter("topk", str(top_k)))
            items.append(item)
        sent.append(batch)
        yield items


def predict_remote(
    client: Any,
    model: str,
    sources: list[InputSource],
    *,
    top_k: Optional[int] = None,
    version: Optional[str] = None,
    read: Optional[Callable[[InputSource], bytes]] = None,
    concurrency: int = 4,
) -> Iterator[Prediction]:
    """Send every input to a server's ``/predictions/MODEL`` with an ``InferenceClient``.

    Up to *concurrency* requests are in flight (so a server that batches can fill its
    batches); answers come back in input order. Connection, authentication and timeout
    failures stop the run (every input would fail the same way); an error answer fails
    only its input.
    """
    from collections import deque

    from mmsctl.errors import ApiError

    reader = read or (lambda s: s.read())
    kwargs = {"version": version} if version else {}

    def one(source: InputSource) -> Prediction:
        try:
            body = reader(source)
        except MmsError as exc:
            return Prediction(source.name, 0, error=exc.message, error_type=type(exc).__name__, cause=exc)
        try:
            result = client.predict(model, body, source.content_type, **kwargs)
        except ApiError as exc:
            return Prediction(
                source.name, exc.status or 0, error=exc.message, error_type=exc.type or None, cause=exc
            )
        response = ResponseItem(
            status=int(getattr(result, "status", 200)),
            body=bytes(getattr(result, "body", b"")),
            content_type=getattr(result, "content_type", None),
        )
        return truncate_top_k(_from_response(source.name, response), top_k)

    pool = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="mmsctl-predict")
    try:
        pending: deque[Future[Prediction]] = deque()
        it = iter(sources)
        for source in it:
            pending.append(pool.submit(one, source))
            if len(pending) >= 2 * concurrency:
                break
        while pending:
            prediction = pending.popleft().result()
            nxt = next(it, None)
            if nxt is not None:
                pending.append(pool.submit(one, nxt))
            yield prediction
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def count_failed(predictions: Iterable[Prediction]) -> int:
    return sum(1 for p in predictions if not p.ok)
