"""``mmsctl predict --context``: the same inputs and answers, sent to a server's ``/predictions``."""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Iterator, Optional

from mmsctl.engine.protocol import ResponseItem
from mmsctl.errors import ApiError, MmsError
from mmsctl.predict.inputs import InputSource
from mmsctl.predict.prediction import Prediction, from_response, truncate_top_k

__all__ = ["predict_remote"]


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
    reader = read or (lambda s: s.read())
    kwargs = {"version": version} if version else {}

    def one(source: InputSource) -> Prediction:
        try:
            body = reader(source)
        except MmsError as exc:
            return Prediction(source.name, 0, error=exc.message, cause=exc)
        try:
            result = client.predict(model, body, source.content_type, **kwargs)
        except ApiError as exc:
            return Prediction(source.name, exc.status or 0, error=exc.message, cause=exc)
        response = ResponseItem(
            status=int(getattr(result, "status", 200)),
            body=bytes(getattr(result, "body", b"")),
            content_type=getattr(result, "content_type", None),
        )
        return truncate_top_k(from_response(source.name, response), top_k)

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
