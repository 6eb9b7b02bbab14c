"""The management API of MMS 1.1, TorchServe 0.12 and mmsctl's server: one set of operations, two faces.

Every operation (request and parsing) is written once, in :class:`_ManagementOps`;
:class:`ManagementClient` runs them with ``httpx.Client`` and
:class:`AsyncManagementClient` with ``httpx.AsyncClient`` (``mmsctl top``).

Differences it smooths over:

- ``GET /models`` pages: ``nextPageToken`` is followed until there is none or a
  page is empty (MMS sends a token even after the last full page);
- describe: MMS answers an object, TorchServe a list (one item per version);
- 202 (accepted) and 210 (partial success) mean "workers still starting":
  :meth:`ManagementClient.scale` can wait for the ready count by polling describe;
- TorchServe's versions: ``/models/{name}/{version}``.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

from mmsctl.client._base import Call, Operation, Pause, json_of, status_message, url_path
from mmsctl.client._errors import WorkersNotReady, server_label
from mmsctl.client._http import AsyncHttpApi, HttpApi
from mmsctl.client.auth import read_token
from mmsctl.client.contexts import Context, check_mms_api
from mmsctl.client.inference import kind_from_api_description
from mmsctl.errors import ApiError, MmsError, UsageError
from mmsctl.names import ARCHIVE_SUFFIXES

if TYPE_CHECKING:  # pragma: no cover
    import httpx

__all__ = [
    "IN_PROGRESS",
    "AsyncManagementClient",
    "ManagementClient",
    "ModelDetail",
    "ModelSummary",
    "OperationResult",
    "ScaleResult",
    "Worker",
    "response_timeout_param",
]

IN_PROGRESS = (202, 210)
_PAGE_LIMIT = 100
_MAX_PAGES = 10_000


@dataclass
class ModelSummary:
    """One row of ``GET /models``."""

    name: str
    url: str

    def to_dict(self) -> dict[str, Any]:
        return {"modelName": self.name, "modelUrl": self.url}


@dataclass
class Worker:
    id: str
    status: str
    start_time: Optional[str] = None
    gpu: bool = False
    memory_usage: Optional[int] = None
    pid: Optional[int] = None

    @property
    def ready(self) -> bool:
        return self.status.upper() == "READY"


@dataclass
class ModelDetail:
    """A described model; ``raw`` keeps the server's own JSON for ``-o json``."""

    name: str
    version: Optional[str]
    url: Optional[str]
    runtime: Optional[str]
    min_workers: int
    max_workers: int
    batch_size: Optional[int]
    max_batch_delay: Optional[int]
    workers: list[Worker] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)
    #: Seconds a batch may take (``responseTimeout``: TorchServe and mmsctl say it; MMS 1.1 does not).
    response_timeout: Optional[int] = None
    #: True when the server described the model with a list (TorchServe), not an object (MMS, mmsctl).
    listed: bool = False

    @property
    def ready_workers(self) -> int:
        return sum(1 for w in self.workers if w.ready)

    @classmethod
    def from_json(cls, data: dict[str, Any], *, listed: bool = False) -> "ModelDetail":
        workers = [
            Worker(
                id=str(w.get("id", "")),
                status=str(w.get("status", "UNKNOWN")),
                start_time=w.get("startTime"),
                gpu=bool(w.get("gpu", False)),
                memory_usage=w.get("memoryUsage"),
                pid=w.get("pid"),
            )
            for w in data.get("workers") or []
            if isinstance(w, dict)
        ]
        return cls(
            name=str(data.get("modelName", "")),
            version=(str(data["modelVersion"]) if data.get("modelVersion") is not None else None),
            url=data.get("modelUrl"),
            runtime=data.get("runtime"),
            min_workers=int(data.get("minWorkers") or 0),
            max_workers=int(data.get("maxWorkers") or 0),
            batch_size=data.get("batchSize"),
            max_batch_delay=data.get("maxBatchDelay"),
            workers=workers,
            raw=data,
            listed=listed,
            response_timeout=data.get("responseTimeout") if isinstance(data.get("responseTimeout"), int) else None,
        )


@dataclass
class OperationResult:
    """What register/unregister/scale answered: HTTP status and the server's status line.

    ``model`` is the model's name where the answer (or the request) says it; ``note`` says how a
    value was adapted to the server (a response timeout in MMS's minutes).
    """

    status: int
    message: str
    model: Optional[str] = None
    note: Optional[str] = None

    @property
    def in_progress(self) -> bool:
        return self.status in IN_PROGRESS


@dataclass
class ScaleResult:
    """The outcome of a scale: what was asked, what the server said, and (after a wait) the counts."""

    model: str
    min_workers: int
    max_workers: Optional[int]
    status: int
    message: str
    ready: Optional[int] = None
    total: Optional[int] = None
    waited: bool = False

    @property
    def in_progress(self) -> bool:
        return self.status in IN_PROGRESS

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "minWorkers": self.min_workers,
            "maxWorkers": self.max_workers,
            "status": self.status,
            "message": self.message,
            "readyWorkers": self.ready,
            "workers": self.total,
        }




_WAIT_S = 120.0


def _model_path(name: str, version: Optional[str] = None) -> str:
    return "/models" + url_path(name, version)


def _check_counts(min_workers: int, max_workers: Optional[int]) -> None:
    if min_workers < 0:
        raise UsageError(f"min_workers must be 0 or more, not {min_workers}")
    if max_workers is not None and max_workers < min_workers:
        raise UsageError(f"max_workers ({max_workers}) is below min_workers ({min_workers})")


class _ManagementOps:
    """The management operations, each written once as data (see :mod:`mmsctl.client._base`)."""

    context: Context
    server: str
    _timeout: float

    def _setup(self, context: Context, timeout: float) -> Optional[str]:
        """Set the fields both faces share; return the management token (None without a token file)."""
        check_mms_api(context, "management")
        self.context = context
        self.server = server_label(context.management_url)
        self._timeout = timeout
        return read_token(context.token_file, "management")

    def _list_models(self, limit: int) -> Operation[list[ModelSummary]]:
        models: list[ModelSummary] = []
        token: Optional[str] = None
        seen: set[str] = set()
        for _ in range(_MAX_PAGES):
            response = yield Call("GET", "/models", {"limit": limit, "next_page_token": token},
                                  operation="list models")
            data = json_of(response)
            page = (data.get("models") or []) if isinstance(data, dict) else []
            models.extend(ModelSummary(str(item.get("modelName", "")), str(item.get("modelUrl", "")))
                          for item in page if isinstance(item, dict))
            token = data.get("nextPageToken") if isinstance(data, dict) else None
            if not token or not page or str(token) in seen:
                break
            token = str(token)
            seen.add(token)
        return models

    def _describe_all(self, name: str, version: Optional[str]) -> Operation[list[ModelDetail]]:
        response = yield Call("GET", _model_path(name, version), model=name, operation="describe")
        data = json_of(response)
        listed = isinstance(data, list)
        items = data if listed else [data]
        details = [ModelDetail.from_json(d, listed=listed) for d in items if isinstance(d, dict)]
        if not details:
            raise ApiError(f"describe {name} on {self.server}: the server sent no model description")
        return details

    def _register(self, url: str, options: dict[str, Any], timeout: Optional[float]) -> Operation[OperationResult]:
        if timeout is None and options.get("synchronous"):
            timeout = max(self._timeout, 120.0)
        note = None
        seconds = options.get("response_timeout")
        if seconds is not None:
            kind = yield from self._server_kind()
            options["response_timeout"], note = response_timeout_param(int(seconds), kind)
        response = yield Call("POST", "/models", {"url": url, **options}, operation="register", timeout=timeout)
        message = status_message(response)
        return OperationResult(response.status_code, message, options.get("model_name") or _registered_name(message, url),
                               note)

    def _server_kind(self) -> Operation[str]:
        """MMS, TorchServe or mmsctl, from the management API's ``OPTIONS /`` description; unknown on failure."""
        try:
            response = yield Call("OPTIONS", "/", operation="describe API", retries=0)
            return kind_from_api_description(json_of(response), dict(response.headers))[0]
        except MmsError:
            return "unknown"

    def _unregister(self, name: str, version: Optional[str], timeout: Optional[float]) -> Operation[OperationResult]:
        response = yield Call("DELETE", _model_path(name, version), model=name, operation="unregister",
                              timeout=timeout)
        return OperationResult(response.status_code, status_message(response))

    def _scale(self, name: str, min_workers: int, max_workers: Optional[int], version: Optional[str],
               wait: Optional["_Wait"]) -> Operation[ScaleResult]:
        _check_counts(min_workers, max_workers)
        params = {"min_worker": min_workers, "max_worker": max_workers, "synchronous": False}
        response = yield Call("PUT", _model_path(name, version), params, model=name, operation="scale")
        result = ScaleResult(name, min_workers, max_workers, response.status_code, status_message(response))
        if wait is not None:
            detail = yield from self._wait_for_workers(name, min_workers, max_workers, version, wait)
            result.ready, result.total, result.waited = detail.ready_workers, len(detail.workers), True
        return result

    def _wait_for_workers(self, name: str, min_workers: int, max_workers: Optional[int],
                          version: Optional[str], wait: "_Wait") -> Operation[ModelDetail]:
        limit = _WAIT_S if wait.timeout is None else wait.timeout
        ceiling = max(min_workers, max_workers or 0)
        deadline = time.monotonic() + limit
        while True:
            detail = (yield from self._describe_all(name, version))[0]
            if wait.on_progress is not None:
                wait.on_progress(detail)
            if detail.ready_workers >= min_workers and len(detail.workers) <= ceiling:
                return detail
            if time.monotonic() >= deadline:
                raise WorkersNotReady(
                    f"gave up waiting for {name} on {self.server}: {detail.ready_workers} of {min_workers} "
                    f"workers ready ({len(detail.workers)} running) after {limit:g} s",
                    model=name, ready=detail.ready_workers, wanted=min_workers,
                )
            yield Pause(min(wait.poll_interval, max(0.0, deadline - time.monotonic())) or 0.05)


@dataclass(frozen=True)
class _Wait:
    """How to wait for workers: the deadline, a progress callback, the poll interval."""

    timeout: Optional[float] = None
    on_progress: Optional[Callable[[ModelDetail], None]] = None
    poll_interval: float = 0.5


def response_timeout_param(seconds: int, kind: str) -> tuple[Any, Optional[str]]:
    """A response timeout in seconds as *kind*'s ``response_timeout`` register parameter, and a note
    when it had to change: MMS 1.1 counts minutes (it multiplies by 60), mmsctl takes ``Ns`` for
    seconds (plain numbers are minutes, as on MMS), TorchServe counts seconds."""
    if kind == "mms":
        minutes = max(1, -(-seconds // 60))
        note = None if minutes * 60 == seconds else (
            f"MMS 1.1 counts response_timeout in minutes: sent {minutes} ({minutes * 60} s) for {seconds} s")
        return minutes, note
    if kind == "mmsctl":
        return f"{seconds}s", None
    return seconds, None


_REGISTERED = re.compile(r'^Model "([^"]+)"')


def _registered_name(message: str, url: str) -> Optional[str]:
    """The model's name from MMS's / TorchServe's answer (``Model "onnxsq" registered``), else the
    archive's file name without its suffix (MMS's default), else None."""
    found = _REGISTERED.match(message or "")
    if found:
        return found.group(1)
    stem = url.rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0]
    for suffix in ARCHIVE_SUFFIXES:
        if stem.endswith(suffix):
            return stem[: -len(suffix)] or None
    return None


def _register_options(
    model_name: Optional[str], handler: Optional[str], runtime: Optional[str], batch_size: Optional[int],
    max_batch_delay: Optional[int], initial_workers: Optional[int], response_timeout: Optional[int],
    synchronous: Optional[bool],
) -> dict[str, Any]:
    """``POST /models`` query parameters (MMS takes ``url``, not the ``model_url`` its OpenAPI file names)."""
    return {
        "model_name": model_name, "handler": handler, "runtime": runtime, "batch_size": batch_size,
        "max_batch_delay": max_batch_delay, "initial_workers": initial_workers,
        "response_timeout": response_timeout, "synchronous": synchronous,
    }


class ManagementClient(_ManagementOps):
    """Talk to a server's management API (port 8081 by default).

    Example::

        client = ManagementClient(resolve_context(None))
        for model in client.list_models():
            print(model.name, client.describe(model.name).ready_workers)
    """

    def __init__(
        self,
        context: Context,
        *,
        timeout: float = 30.0,
        retries: int = 2,
        transport: Optional["httpx.BaseTransport"] = None,
        max_response_bytes: Optional[int] = None,
    ) -> None:
        token = self._setup(context, timeout)
        self._api = HttpApi(context.management_url, token, timeout, retries, transport=transport,
                            max_response_bytes=max_response_bytes)

    def list_models(self, *, limit: int = _PAGE_LIMIT) -> list[ModelSummary]:
        """Every registered model, following ``nextPageToken`` across pages."""
        return self._api.run(self._list_models(limit))

    def describe(self, name: str, version: Optional[str] = None) -> ModelDetail:
        """One model (TorchServe: the default version, or *version*)."""
        return self.describe_all(name, version)[0]

    def describe_all(self, name: str, version: Optional[str] = None) -> list[ModelDetail]:
        """Every description the server returns (TorchServe: one per version with ``version="all"``)."""
        return self._api.run(self._describe_all(name, version))

    def register(
        self,
        url: str,
        *,
        model_name: Optional[str] = None,
        handler: Optional[str] = None,
        runtime: Optional[str] = None,
        batch_size: Optional[int] = None,
        max_batch_delay: Optional[int] = None,
        initial_workers: Optional[int] = None,
        response_timeout: Optional[int] = None,
        synchronous: Optional[bool] = True,
        timeout: Optional[float] = None,
    ) -> OperationResult:
        """``POST /models?url=…``; ``synchronous=True`` waits for the workers (HTTP timeout then at least 120 s)."""
        options = _register_options(model_name, handler, runtime, batch_size, max_batch_delay, initial_workers,
                                    response_timeout, synchronous)
        return self._api.run(self._register(url, options, timeout))

    def unregister(self, name: str, version: Optional[str] = None, *, timeout: Optional[float] = None) -> OperationResult:
        """``DELETE /models/{name}[/{version}]``."""
        return self._api.run(self._unregister(name, version, timeout))

    def scale(
        self,
        name: str,
        min_workers: int,
        max_workers: Optional[int] = None,
        *,
        version: Optional[str] = None,
        wait: bool = False,
        timeout: Optional[float] = None,
        on_progress: Optional[Callable[[ModelDetail], None]] = None,
        poll_interval: float = 0.5,
    ) -> ScaleResult:
        """``PUT /models/{name}?min_worker=N[&max_worker=M]``; with *wait*, poll until N workers are READY.

        Raises:
            UsageError: negative counts, or max below min.
            WorkersNotReady: *wait* and the workers were not ready within *timeout* (default 120 s).
        """
        waiting = _Wait(timeout, on_progress, poll_interval) if wait else None
        return self._api.run(self._scale(name, min_workers, max_workers, version, waiting))

    def wait_for_workers(
        self,
        name: str,
        min_workers: int,
        max_workers: Optional[int] = None,
        *,
        version: Optional[str] = None,
        timeout: Optional[float] = None,
        on_progress: Optional[Callable[[ModelDetail], None]] = None,
        poll_interval: float = 0.5,
    ) -> ModelDetail:
        """Poll describe until at least *min_workers* are READY and no more than the maximum exist."""
        waiting = _Wait(timeout, on_progress, poll_interval)
        return self._api.run(self._wait_for_workers(name, min_workers, max_workers, version, waiting))

    def close(self) -> None:
        self._api.close()

    def __enter__(self) -> "ManagementClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncManagementClient(_ManagementOps):
    """:class:`ManagementClient` for asyncio: the same operations, awaited.

    Example::

        async with AsyncManagementClient(resolve_context(None)) as client:
            names = [m.name for m in await client.list_models()]
    """

    def __init__(
        self,
        context: Context,
        *,
        timeout: float = 30.0,
        retries: int = 2,
        transport: Optional["httpx.AsyncBaseTransport"] = None,
        max_response_bytes: Optional[int] = None,
    ) -> None:
        token = self._setup(context, timeout)
        self._api = AsyncHttpApi(context.management_url, token, timeout, retries, transport=transport,
                                 max_response_bytes=max_response_bytes)

    async def list_models(self, *, limit: int = _PAGE_LIMIT) -> list[ModelSummary]:
        """Every registered model, following ``nextPageToken`` across pages."""
        return await self._api.run(self._list_models(limit))

    async def describe(self, name: str, version: Optional[str] = None) -> ModelDetail:
        """One model (TorchServe: the default version, or *version*)."""
        return (await self.describe_all(name, version))[0]

    async def describe_all(self, name: str, version: Optional[str] = None) -> list[ModelDetail]:
        """Every description the server returns (TorchServe: one per version with ``version="all"``)."""
        return await self._api.run(self._describe_all(name, version))

    async def register(
        self,
        url: str,
        *,
        model_name: Optional[str] = None,
        handler: Optional[str] = None,
        runtime: Optional[str] = None,
        batch_size: Optional[int] = None,
        max_batch_delay: Optional[int] = None,
        initial_workers: Optional[int] = None,
        response_timeout: Optional[int] = None,
        synchronous: Optional[bool] = True,
        timeout: Optional[float] = None,
    ) -> OperationResult:
        """``POST /models?url=…`` (see :meth:`ManagementClient.register`)."""
        options = _register_options(model_name, handler, runtime, batch_size, max_batch_delay, initial_workers,
                                    response_timeout, synchronous)
        return await self._api.run(self._register(url, options, timeout))

    async def unregister(self, name: str, version: Optional[str] = None, *,
                         timeout: Optional[float] = None) -> OperationResult:
        """``DELETE /models/{name}[/{version}]``."""
        return await self._api.run(self._unregister(name, version, timeout))

    async def scale(
        self,
        name: str,
        min_workers: int,
        max_workers: Optional[int] = None,
        *,
        version: Optional[str] = None,
        wait: bool = False,
        timeout: Optional[float] = None,
        on_progress: Optional[Callable[[ModelDetail], None]] = None,
        poll_interval: float = 0.5,
    ) -> ScaleResult:
        """``PUT /models/{name}`` (see :meth:`ManagementClient.scale`)."""
        waiting = _Wait(timeout, on_progress, poll_interval) if wait else None
        return await self._api.run(self._scale(name, min_workers, max_workers, version, waiting))

    async def wait_for_workers(
        self,
        name: str,
        min_workers: int,
        max_workers: Optional[int] = None,
        *,
        version: Optional[str] = None,
        timeout: Optional[float] = None,
        on_progress: Optional[Callable[[ModelDetail], None]] = None,
        poll_interval: float = 0.5,
    ) -> ModelDetail:
        """Poll describe until at least *min_workers* are READY and no more than the maximum exist."""
        waiting = _Wait(timeout, on_progress, poll_interval)
        return await self._api.run(self._wait_for_workers(name, min_workers, max_workers, version, waiting))

    async def aclose(self) -> None:
        await self._api.aclose()

    async def __aenter__(self) -> "AsyncManagementClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
