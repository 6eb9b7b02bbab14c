"""The answer for one input of ``mmsctl predict``, local or remote: the body as the server sends it.

A local run hands the handler each input as the raw request body, exactly what
``curl -T image.jpg http://host:8080/predictions/model`` would, so the answer is
byte-for-byte the server's response body either way.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, NamedTuple, Optional

from mmsctl.errors import MmsError

if TYPE_CHECKING:
    from mmsctl.engine.protocol import ResponseItem

__all__ = ["Prediction", "from_answer", "from_response", "truncate_top_k"]


class Prediction(NamedTuple):
    """The answer for one input: the response body as the server would send it, or why it failed.

    A NamedTuple, not a dataclass: the lean ``predict`` imports this module (see
    :class:`~mmsctl.predict.warm.WarmTarget`).
    """

    input: str
    status: int
    body: bytes = b""
    content_type: Optional[str] = None
    error: Optional[str] = None
    #: the mmsctl error behind a failure, for a one-input run to raise as it is.
    cause: Optional[MmsError] = None

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


def from_answer(name: str, status: int, body: bytes, content_type: Optional[str]) -> Prediction:
    """The prediction for input *name* answered with *status* and *body*: a failure's message is that of its
    MMS error body, else ``HTTP 503: <text>``."""
    if 200 <= status < 300:
        return Prediction(name, status, body, content_type)
    from mmsctl.error_body import parse_error_body

    kind, text = parse_error_body(body)
    if kind is not None and text:
        message = text
    else:
        message = f"HTTP {status}" + (f": {text[:200]}" if text else "")
    return Prediction(name, status, body, content_type, message)


def from_response(name: str, response: ResponseItem) -> Prediction:
    """The prediction for input *name* answered with *response*."""
    return from_answer(name, response.status, response.body, response.content_type)


def truncate_top_k(prediction: Prediction, top_k: Optional[int]) -> Prediction:
    """Keep the first *top_k* entries of a classification answer (a JSON list); others as they are."""
    if top_k is None or not prediction.ok:
        return prediction
    try:
        parsed = json.loads(prediction.body)
    except ValueError:
        return prediction
    if isinstance(parsed, list) and len(parsed) > top_k:
        return prediction._replace(body=json.dumps(parsed[:top_k], indent=2).encode("utf-8"))
    return prediction
