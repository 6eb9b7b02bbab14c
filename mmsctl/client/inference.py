"""The inference API: health, predictions, and telling MMS, TorchServe and mmsctl apart.

The operations are written once (:class:`_InferenceOps`); :class:`InferenceClient` runs
them with ``httpx.Client``, :class:`AsyncInferenceClient` with ``httpx.AsyncClient``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Optional

from mmsctl.client._base import Call, Operation, json_of, url_path
from mmsctl.client._errors import server_label
from mmsctl.client._http import AsyncHttpApi, HttpApi
from mmsctl.client.auth import read_token
from mmsctl.client.contexts import Context, check_mms_api
from mmsctl.errors import AuthenticationFailed, MmsError

if TYPE_CHECKING:  # pragma: no cover
    import httpx

__all__ = [
    "AsyncInferenceClient",
    "InferenceClient",
    "PingResult",
    "PredictResult",
    "ServerKind",
    "kind_from_api_description",
]

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


class _InferenceOps:
    """The inference operations, each written once as data (see :mod:`mmsctl.client._base`)."""

    context: Context
    server: str
    _retries: int

    def _setup(self, context: Context, retries: int) -> Optional[str]:
        """Set the fields both faces share; return the inference token (None without a token file)."""
        check_mms_api(context, "inference")
        self.context = context
        self.server = server_label(context.inference_url)
        self._retries = retries
        return read_token(context.token_file, "inference")

    def _ping(self, detect: bool) -> Operation[PingResult]:
        url = self.context.inference_url
        started = time.perf_counter()
        try:
            response = yield Call("GET", "/ping", operation="ping", ok_statuses=(500, 503),
                                  retries=min(1, self._retries))
        except AuthenticationFailed as exc:
            return PingResult(url, False, "authentication failed", "torchserve", error=exc)
        except MmsError as exc:
            return PingResult(url, False, exc.message, error=exc)
        latency = (time.perf_counter() - started) * 1000
        try:
            data = json_of(response)
            status = str(data.get("status", "")) if isinstance(data, dict) else ""
        except MmsError:
            status = response.text.strip()[:80]
        healthy = response.status_code == 200 and status.lower() in ("healthy", "")
        result = PingResult(url, healthy, status or f"HTTP {response.status_code}", latency_ms=latency)
        if detect:
            result.server, result.version = yield from self._detect()
        return result

    def _detect(self) -> Operation[tuple[ServerKind, Optional[str]]]:
        try:
            response = yield Call("OPTIONS", "/", operation="describe API", retries=0)
            return kind_from_api_description(json_of(response), dict(response.headers))
        except MmsError:
            return "unknown", None

    def _predict(self, model: str, body: bytes, content_type: Optional[str], version: Optional[str],
                 timeout: Optional[float]) -> Operation[PredictResult]:
        headers = {"Accept": "*/*"}
        if content_type:
            headers["Content-Type"] = content_type
        path = "/predictions" + url_path(model, version)
        response = yield Call("POST", path, content=body, headers=headers, model=model, operation="predict",
                              timeout=timeout)
        return PredictResult(response.status_code, response.headers.get("content-type"), response.content)


class InferenceClient(_InferenceOps):
    """Talk to a server's inference API (port 8080 by default)."""

    def __init__(
        self,
        context: Context,
        *,
        timeout: float = 60.0,
        retries: int = 2,
        transport: Optional["httpx.BaseTransport"] = None,
        max_response_bytes: Optional[int] = None,
    ) -> None:
        token = self._setup(context, retries)
        self._api = HttpApi(context.inference_url, token, timeout, retries, transport=transport,
                            max_response_bytes=max_response_bytes)

    def ping(self, *, detect: bool = True) -> PingResult:
        """``GET /ping``; never raises for an unhealthy or unreachable server: the result says so.

        With *detect*, an ``OPTIONS /`` names the server kind (MMS, TorchServe, mmsctl).
        """
        return self._api.run(self._ping(detect))

    def detect(self) -> tuple[ServerKind, Optional[str]]:
        """The server kind from ``OPTIONS /`` (the API description all three serve); unknown on failure."""
        return self._api.run(self._detect())

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
        return self._api.run(self._predict(model, body, content_type, version, timeout))

    def close(self) -> None:
        self._api.close()

    def __enter__(self) -> "InferenceClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncInferenceClient(_InferenceOps):
    """:class:`InferenceClient` for asyncio: the same operations, awaited."""

    def __init__(
        self,
        context: Context,
        *,
        timeout: float = 60.0,
        retries: int = 2,
        transport: Optional["httpx.AsyncBaseTransport"] = None,
        max_response_bytes: Optional[int] = None,
    ) -> None:
        token = self._setup(context, retries)
        self._api = AsyncHttpApi(context.inference_url, token, timeout, retries, transport=transport,
                                 max_response_bytes=max_response_bytes)

    async def ping(self, *, detect: bool = True) -> PingResult:
        """``GET /ping`` (see :meth:`InferenceClient.ping`)."""
        return await self._api.run(self._ping(detect))

    async def detect(self) -> tuple[ServerKind, Optional[str]]:
        """The server kind from ``OPTIONS /``; unknown on failure."""
        return await self._api.run(self._detect())

    async def predict(
        self,
        model: str,
        body: bytes,
        content_type: Optional[str] = None,
        *,
        version: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> PredictResult:
        """``POST /predictions/{model}[/{version}]`` (see :meth:`InferenceClient.predict`)."""
        return await self._api.run(self._predict(model, body, content_type, version, timeout))

    async def aclose(self) -> None:
        await self._api.aclose()

    async def __aenter__(self) -> "AsyncInferenceClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
