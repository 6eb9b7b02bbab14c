"""Send ``predict``'s inputs to a warm local server (:mod:`mmsctl.predict.warm`) from a lean process.

The lean ``mmsctl predict`` (:mod:`mmsctl.cli.lean`) cannot afford httpx's import (with h11 and
httpcore; docs/performance.md): requests are written here, on plain sockets, and answers read with the
HTTP/1.1 codec the server and ``mmsctl bench`` use (:mod:`mmsctl.http1.answers`), over keep-alive
connections. Several inputs go over twice as many connections as the model has
workers, so a worker finds the next input queued when it finishes one. All or nothing: the
first input that cannot be read, a connection that fails, an answer that is not a success, and
the answers are None, so the caller can hand the whole run to the full path.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from typing import Any, Callable, Optional
from urllib.parse import quote, urlsplit

from mmsctl.predict.inputs import InputSource
from mmsctl.predict.prediction import Prediction, from_answer, truncate_top_k
from mmsctl.predict.warm import WarmTarget

__all__ = ["WarmConnection", "predict_all"]


class WarmConnection:
    """One keep-alive HTTP/1.1 connection to a server's inference API."""

    def __init__(self, url: str, token: Optional[str], timeout: float, max_bytes: int) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise OSError(f"not a plain http URL: {url}")
        # bytes: a str host goes through the idna codec (an import the lean path avoids) even when it is an address
        self._address = (parts.hostname.encode("ascii", "ignore") if parts.hostname.isascii() else parts.hostname,
                         parts.port or 80)
        self._host = parts.netloc
        self._token = token
        self._timeout = timeout
        self._max_bytes = max_bytes
        self._sock: Optional[socket.socket] = None
        self.last_headers: dict[str, str] = {}

    def request(self, method: str, path: str, body: bytes = b"", content_type: Optional[str] = None,
                headers: Optional[dict[str, str]] = None) -> tuple[int, Optional[str], bytes]:
        """Status, content type and body of ``METHOD path`` (its headers in :attr:`last_headers`, lower case).

        Raises:
            OSError: the connection failed or the answer was malformed or too large (head and body over
                *max_bytes*: the connection is dropped, not read on).
        """
        from mmsctl.http1.answers import BodyReader
        from mmsctl.http1.errors import AnswerTooLarge, ParseError

        if self._sock is None:
            self._sock = socket.create_connection(self._address, timeout=self._timeout)  # type: ignore[arg-type]
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        head = [f"{method} {path} HTTP/1.1", f"Host: {self._host}", "Accept: */*", f"Content-Length: {len(body)}"]
        if content_type:
            head.append(f"Content-Type: {content_type}")
        if self._token:
            head.append(f"Authorization: Bearer {self._token}")
        head.extend(f"{name}: {value}" for name, value in (headers or {}).items())
        self._sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
        answer = BodyReader(self._max_bytes)
        try:
            while True:
                data = self._sock.recv(65536)
                if not data:
                    raise OSError("the server closed the connection")
                if answer.feed(data):
                    break
        except (ParseError, AnswerTooLarge) as exc:
            self.close()
            raise OSError(f"unusable answer: {exc}") from exc
        if not answer.keep_alive:
            self.close()
        self.last_headers = answer.headers
        return answer.status, answer.headers.get("content-type"), answer.body

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


#: The largest batch size taken from a server's answer, and the most images (connections, threads) in flight
#: whatever the server says of its workers and batches.
_MAX_BATCH = 64
_MAX_IN_FLIGHT = 64


def predict_all(target: WarmTarget, sources: list[InputSource], *, top_k: Optional[int], timeout: float,
                progress: Optional[Callable[[int], None]] = None) -> Optional[list[Prediction]]:
    """Every input's answer from *target*, in input order (an input the handler refused: its error answer); None
    if any input could not be read, a connection failed, or an answer was any other failure.

    Several images for the built-in classifier go :data:`~mmsctl.predict.warm_v2.GROUP` to a request
    (:mod:`mmsctl.predict.warm_v2`: one forward pass for them, the same output); anything else one by one.
    *progress* is called with the number of inputs answered, from the sending threads, as answers come."""
    from mmsctl.errors import MmsError

    state = target.state
    try:
        token = _token(state.token_file, "inference")
        limit = _max_bytes()
    except MmsError:
        return None
    path = "/predictions/" + quote(target.model, safe="")
    groups = _classifier(target, token, timeout, limit) if len(sources) > 1 else None
    if groups is not None:
        from mmsctl.predict.warm_v2 import GROUP, predict_batch

        units = [list(range(i, min(i + GROUP, len(sources)))) for i in range(0, len(sources), GROUP)]
        count = min(len(units), _in_flight(target, timeout, group=True))
    else:
        units = [[i] for i in range(len(sources))]
        count = 1 if len(sources) == 1 else min(len(sources), _in_flight(target, timeout))
    results: list[Optional[Prediction]] = [None] * len(sources)
    order = iter(units)
    lock, failed = threading.Lock(), threading.Event()

    def work() -> None:
        conn = WarmConnection(state.inference_url, token, timeout, limit)
        try:
            while not failed.is_set():
                with lock:
                    unit = next(order, None)
                if unit is None:
                    return
                answers = None
                if groups is not None:
                    answers = predict_batch(conn, groups, [sources[i] for i in unit], top_k)
                if answers is None:  # one by one (a batch one of whose images the handler refused: each its answer)
                    answers = [_one(conn, path, sources[i], top_k) for i in unit]
                for i, answer in zip(unit, answers):
                    results[i] = answer
                if not all(answer.ok or _refused_input(answer) for answer in answers):
                    failed.set()
                elif progress is not None:
                    progress(len(unit))
        except (OSError, MmsError):
            failed.set()
        finally:
            conn.close()

    if count == 1:
        work()
    else:
        threads = [threading.Thread(target=work, daemon=True) for _ in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if failed.is_set() or any(r is None for r in results):
        return None
    return [r for r in results if r is not None]


def _refused_input(answer: Prediction) -> bool:
    """The handler's own refusal of one input (400 or 415 with an MMS error body): the answer in-process too."""
    from mmsctl.error_body import parse_error_body

    return answer.status in (400, 415) and parse_error_body(answer.body)[0] is not None


def _classifier(target: WarmTarget, token: Optional[str], timeout: float, limit: int) -> Optional[Any]:
    """The served model as the built-in classifier (:func:`mmsctl.predict.warm_v2.classifier`), or None."""
    from mmsctl.config import cache_dir
    from mmsctl.predict.warm_v2 import classifier

    from mmsctl.engine.builtin import VISION_HANDLER_MODULE

    served = target.state.served.get(target.model)
    digest = served.get("archive") if isinstance(served, dict) else None
    handler = served.get("handler") if isinstance(served, dict) else None
    if not isinstance(digest, str) or not digest.isalnum() or \
            (handler and str(handler).split(":")[0] != VISION_HANDLER_MODULE):
        return None  # not the built-in handler: no v2 metadata to ask for
    conn = WarmConnection(target.state.inference_url, token, timeout, limit)
    try:
        return classifier(conn, target.model, cache_dir() / "extracted" / digest)
    except OSError:
        return None
    finally:
        conn.close()


def _one(conn: WarmConnection, path: str, source: InputSource, top_k: Optional[int]) -> Prediction:
    status, content_type, body = conn.request("POST", path, source.read(), source.content_type)
    return truncate_top_k(from_answer(source.name, status, body, content_type), top_k)


def _token(token_file: Optional[str], api: Any) -> Optional[str]:
    if not token_file:
        return None
    from mmsctl.tokens import read_token

    return read_token(token_file, api)


def _max_bytes() -> int:
    from mmsctl.config import max_response_bytes

    return max_response_bytes()


def _in_flight(target: WarmTarget, timeout: float, group: bool = False) -> int:
    """How many images (with *group*: requests of several) to keep in flight: enough for each worker to fill
    its batch (the model's ``batchSize`` from the management API) with one more batch queued behind it; two
    per worker when it does not batch, or a request carries a batch. Without the management API: two per
    core of this machine."""
    from mmsctl.errors import MmsError

    fallback = min(2 * (os.cpu_count() or 1), _MAX_IN_FLIGHT)
    try:
        token = _token(target.state.token_file, "management")
    except MmsError:
        return fallback
    conn = WarmConnection(target.state.management_url, token, timeout, 1 << 20)
    try:
        status, _, body = conn.request("GET", "/models/" + quote(target.model, safe=""))
        described = json.loads(body) if status == 200 else None
    except (OSError, ValueError):
        return fallback
    finally:
        conn.close()
    if isinstance(described, list) and described:
        described = described[0]
    if not isinstance(described, dict) or not isinstance(described.get("workers"), list):
        return fallback
    batch = described.get("batchSize")
    batch = batch if isinstance(batch, int) and not isinstance(batch, bool) and 1 <= batch <= _MAX_BATCH else 1
    if group:
        batch = 1
    return min(max(len(described["workers"]), 1) * 2 * batch, _MAX_IN_FLIGHT)
