"""The answer for one input of ``mmsctl predict``, local or remote: the body as the server sends it.

A local run hands the handler each input as the raw request body, exactly what
``curl -T image.jpg http://host:8080/predictions/model`` would, so the answer is
byte-for-byte the server's response body either way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

from mmsctl.engine.protocol import ResponseItem
from mmsctl.error_body import parse_error_body
from mmsctl.errors import MmsError

__all__ = ["Prediction", "from_response", "truncate_top_k"]


@dataclass
class Prediction:
    """The answer for one input: the response body as the server would send it, or why it failed."""

    input: str
    status: int
    body: bytes = b""
    content_type: Optional[str] = None
    error: Optional[str] = None
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


def _failed(name: str, response: ResponseItem) -> Prediction:
    """A failed answer: the message of its MMS error body, else ``HTTP 503: <text>``."""
    kind, text = parse_error_body(response.body)
    if kind is not None and text:
        message = text
    else:
        message = f"HTTP {response.status}" + (f": {text[:200]}" if text else "")
    return Prediction(name, response.status, response.body, response.content_type, message)


def from_response(name: str, response: ResponseItem) -> Prediction:
    """The prediction for input *name* answered with *response*."""
    if response.ok:
        return Prediction(name, response.status, response.body, response.content_type)
    return _failed(name, response)


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
