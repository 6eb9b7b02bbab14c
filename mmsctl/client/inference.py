"""The inference API: health, predictions, and telling MMS, TorchServe and mmsctl apart."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Optional
from urllib.parse import quote

from mmsctl.client._errors import server_label
from mmsctl.client._http import HttpApi
from mmsctl.client.auth import read_token
from mmsctl.client.contexts import Context
from mmsctl.errors import AuthenticationFailed, MmsError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    import httpx

__all__ = ["InferenceClient", "PingResult", "PredictResult", "ServerKind", "kind_from_api_description"]

ServerKind = Literal["mms", "torchserve", "mmsctl", "unknown"]


@dataclass
class PredictResult:
    """A prediction as the server sent it (MMS sends no Content-Type unless the handler sets one)."""

    status: int
    content_type: Optional[str]
    body: bytes

    def json(self) -> Any:
        import json

        return json.loads(self.body.decode("utf-8"))


@dataclass
class PingResult:
    """One server's health: ``status`` is the server's word (``Healthy``) or what went wrong."""

    url: str
    healthy: bool
    status: str
    server: ServerKind = "unknown"
    version: Optional[str] = None
    latency_ms: Optional[float] = None
    error: Optional[MmsError] = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "healthy": self.healthy,
            "status": self.status,
            "server": self.server,
            "version": self.version,
            "latencyMs": None if self.latency_ms is None else round(self.latency_ms, 1),
        }


def kind_from_api_description(data: Any, headers: Optional[dict[str, str]] = None) -> tuple[ServerKind, Optional[str]]:
    """Which server wrote this OpenAPI description (``OPTIONS /``), and its version."""
    server_header = (headers or {}).get("server", "")
    if "mmsctl" in server_header.lower():
        return "mmsctl", server_header.partition("/")[2] or None
    info = data.get("info", {}) if isinstance(data, dict) else {}
    title = str(info.get("title", ""))
    version = info.get("version")
    if "mmsctl" in title.lower() or "mmsctl" in str(info.get("description", "")).lower():
        return "mmsctl", version
    if "torchserve" in title.lower():
        return "torchserve", version
    if title == "Model Server APIs":
        return "mms", None  # MMS 1.1 reports its API version (1.0.0), not its own
    return "unknown", version


class InferenceClient:
    """Talk to a server's inference API (port 8080 by default)."""

    def __init__(
        self,
        context: Context,
        *,
        timeout: float = 60.0,
        retries: int = 2,
        transport: Optional["httpx.BaseTransport"] = None,
    ) -> None:
        self.context = context
        self.server = server_label(context.inference_url)
        self._api = HttpApi(
            context.inference_url,
            token=read_token(context.token_file, "inference"),
            timeout=timeout,
            retries=retries,
            transport=transport,
        )

    def ping(self, *, detect: bool = True) -> PingResult:
        """``GET /ping``; never raises for an unhealthy or unreachable server: the result says so.

        With *detect*, an ``OPTIONS /`` names the server kind (MMS, TorchServe, mmsctl).
        """
        url = self.context.inference_url
        started = time.perf_counter()
        try:
            response = self._api.request("GET", "/ping", operation="ping", ok_statuses=(500, 503), retries=1)
        except AuthenticationFailed as exc:
            return PingResult(url, False, "authentication failed", "torchserve", error=exc)
        except MmsError as exc:
            return PingResult(url, False, exc.message, error=exc)
        latency = (time.perf_counter() - started) * 1000
        try:
            data = response.json()
            status = str(data.get("status", "")) if isinstance(data, dict) else ""
        except ValueError:
            status = response.text.strip()[:80]
        healthy = response.status_code == 200 and status.lower() in ("healthy", "")
        result = PingResult(url, healthy, status or f"HTTP {response.status_code}", latency_ms=latency)
        if detect:
            result.server, result.version = self.detect()
        return result

    def detect(self) -> tuple[ServerKind, Optional[str]]:
        """The server kind from ``OPTIONS /`` (the API description all three serve); unknown on failure."""
        try:
            response = self._api.request("OPTIONS", "/", operation="describe API", retries=0)
            return kind_from_api_description(response.json(), dict(response.headers))
        except (MmsError, ValueError):
            return "unknown", None

    def predict(
        self,
        model: str,
        body: bytes,
        content_type: Optional[str] = None,
        *,
        version: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> PredictResult:
        """``POST /predictions/{model}[/{version}]`` with *body*; raises ApiError for non-2xx.

        Never retried once sent (a prediction may have side effects and costs time).
        """
        if not model:
            raise UsageError("model name is empty")
        path = "/predictions/" + quote(model, safe="")
        if version:
            path += "/" + quote(version, safe="")
        headers = {"Accept": "*/*"}
        if content_type:
            headers["Content-Type"] = content_type
        response = self._api.request(
            "POST", path, content=body, headers=headers, model=model, operation="predict", timeout=timeout
        )
        return PredictResult(response.status_code, response.headers.get("content-type"), response.content)

    def close(self) -> None:
        self._api.close()

    def __enter__(self) -> "InferenceClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
