"""What goes into a model service and what comes out: plain, picklable data.

The local ``predict`` command and the server's workers both speak this, so the
same handler code answers both. A :class:`RequestItem` is one request of a
batch, as MMS's front end hands it to a worker: named parameters (the raw body
is the parameter ``body``; multipart fields keep their names) each with its
own content type, plus the HTTP headers. A :class:`ResponseItem` is what the
handler produced for that request, already encoded to bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

from mmsctl.error_body import error_body

__all__ = ["Parameter", "RequestItem", "ResponseItem"]


@dataclass
class Parameter:
    """One named input of a request (``body`` for a raw body, else the form field name)."""

    name: str
    value: Union[bytes, str]
    content_type: Optional[str] = None


@dataclass
class RequestItem:
    """One request inside a batch."""

    request_id: str
    parameters: list[Parameter] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_body(
        cls, request_id: str, body: bytes, content_type: Optional[str] = None, name: str = "body"
    ) -> "RequestItem":
        """A request whose whole input is one raw body (what ``curl -T file`` sends)."""
        headers = {"content-type": content_type} if content_type else {}
        return cls(request_id, [Parameter(name, body, content_type)], headers)


@dataclass
class ResponseItem:
    """The answer for one request: status, encoded body, content type and extra headers."""

    status: int = 200
    body: bytes = b""
    content_type: Optional[str] = None
    headers: dict[str, str] = field(default_factory=dict)
    reason: Optional[str] = None

    @property
    def ok(self) -> bool:
        return type(self.status) is int and 200 <= self.status < 300

    @classmethod
    def error(cls, status: int, type: str, message: str) -> "ResponseItem":
        """An answer carrying MMS's error body ``{"code", "type", "message"}``."""
        return cls(status, error_body(status, type, message), "application/json")
