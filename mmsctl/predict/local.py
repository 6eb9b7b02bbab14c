"""Run inputs through a loaded model in batches, in order: ``mmsctl predict`` without ``--context``.

Each input is sent as the raw request body, exactly what ``curl -T image.jpg`` hands
the handler in MMS. Reading inputs (files, stdin, URLs) happens on a background
thread ahead of the forward passes, so disk and network time overlap with inference.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Iterable, Iterator, Optional, Protocol

from mmsctl.engine.protocol import Parameter, RequestItem, ResponseItem
from mmsctl.errors import MmsError
from mmsctl.predict.inputs import InputSource
from mmsctl.predict.prediction import Prediction, from_response, truncate_top_k

__all__ = ["PredictService", "predict_local"]

_READ_AHEAD = 4  # batches read ahead of the one running


class PredictService(Protocol):
    """What runs the batches of ``mmsctl predict``: a :class:`~mmsctl.engine.service.ModelService` in this
    process (one batch at a time) or a :class:`~mmsctl.predict.pool.ServicePool` (several, in workers)."""

    @property
    def last_failure(self) -> Optional[str]:
        """``Type: text`` of the last batch answered that failed as a whole, or None."""

    def map(self, batches: Iterable[list[RequestItem]]) -> Iterator[list[ResponseItem]]:
        """The responses of each batch (one per request, in order), in the order the batches came."""

    def close(self) -> None:
        """Stop running the model."""


def _read_all(sources: list[InputSource], read: Callable[[InputSource], bytes]) -> Iterator["Future[bytes]"]:
    """Futures of each input's bytes, read on one background thread, in order (one input: read here, as
    a Lambda invocation does, without starting a thread for it)."""
    if len(sources) == 1:
        done: Future[bytes] = Future()
        try:
            done.set_result(read(sources[0]))
        except Exception as exc:  # noqa: BLE001 - handed over as the thread's would be
            done.set_exception(exc)
        yield done
        return
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
    service: PredictService,
    sources: list[InputSource],
    *,
    batch_size: int,
    top_k: Optional[int] = None,
    read: Optional[Callable[[InputSource], bytes]] = None,
) -> Iterator[Prediction]:
    """Run every input through a loaded model, in order.

    Args:
        service: a :class:`PredictService`: a :class:`~mmsctl.engine.service.ModelService` from
            :func:`~mmsctl.engine.service.load_service` (batches run here, one at a time), or
            a :class:`~mmsctl.predict.pool.ServicePool` (batches run in worker processes,
            several at once).
        sources: from :func:`~mmsctl.predict.inputs.expand_inputs`.
        batch_size: inputs per ``handle`` call (at most the service's batch size).
        top_k: sent as the ``topk`` request parameter (honoured by the built-in handler) and
            applied to list answers.
        read: how to read an input (default :meth:`InputSource.read`).

    Yields:
        One :class:`Prediction` per input, in input order.
    """
    reader = read or (lambda s: s.read())
    sent: deque[list[tuple[InputSource, Optional[bytes], Optional[MmsError]]]] = deque()

    for responses in service.map(_requests(sources, batch_size, reader, top_k, sent)):
        batch = sent.popleft()
        detail = service.last_failure
        it = iter(responses)
        for source, _body, error in batch:
            if error is not None:
                yield Prediction(source.name, 0, error=error.message, cause=error)
                continue
            prediction = from_response(source.name, next(it))
            if not prediction.ok and detail is not None and prediction.status >= 500:
                prediction = prediction._replace(error=f"{prediction.error} ({detail})")
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
