"""The management API of MMS 1.1, TorchServe 0.12 and mmsctl's server, behind one client.

Differences it smooths over:

- ``GET /models`` pages: ``nextPageToken`` is followed until there is none or a
  page is empty (MMS sends a token even after the last full page);
- describe: MMS answers an object, TorchServe a list (one item per version);
- 202 (accepted) and 210 (partial success) mean "workers still starting":
  :meth:`ManagementClient.scale` can wait for the ready count by polling describe;
- TorchServe's versions: ``/models/{name}/{version}``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional
from urllib.parse import quote

from mmsctl.client._errors import server_label
from mmsctl.client._http import HttpApi
from mmsctl.client.auth import read_token
from mmsctl.client.contexts import Context
from mmsctl.errors import ApiError, RequestTimeout, UsageError

if TYPE_CHECKING:  # pragma: no cover
    import httpx

__all__ = [
    "IN_PROGRESS",
    "ManagementClient",
    "ModelDetail",
    "ModelSummary",
    "OperationResult",
    "ScaleResult",
    "Worker",
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

    @property
    def ready_workers(self) -> int:
        return sum(1 for w in self.workers if w.ready)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ModelDetail":
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
        )


@dataclass
class OperationResult:
    """What register/unregister/scale answered: HTTP status and the server's status line."""

    status: int
    message: str

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


def _message(response: "httpx.Response") -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text.strip()
    if isinstance(data, dict):
        return str(data.get("status") or data.get("message") or "")
    return ""


def _path(name: str, version: Optional[str] = None) -> str:
    if not name:
        raise UsageError("model name is empty")
    path = "/models/" + quote(name, safe="")
    if version:
        path += "/" + quote(version, safe="")
    return path


class ManagementClient:
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
    ) -> None:
        self.context = context
        self.server = server_label(context.management_url)
        self._api = HttpApi(
            context.management_url,
            token=read_token(context.token_file, "management"),
            timeout=timeout,
            retries=retries,
            transport=transport,
        )

    # --- reads ---

    def list_models(self, *, limit: int = _PAGE_LIMIT) -> list[ModelSummary]:
        """Every registered model, following ``nextPageToken`` across pages."""
        models: list[ModelSummary] = []
        token: Optional[str] = None
        seen: set[str] = set()
        for _ in range(_MAX_PAGES):
            params: dict[str, Any] = {"limit": limit}
            if token:
                params["next_page_token"] = token
            data = self._api.request("GET", "/models", params=params, operation="list models").json()
            page = (data.get("models") or []) if isinstance(data, dict) else []
            for item in page:
                models.append(ModelSummary(str(item.get("modelName", "")), str(item.get("modelUrl", ""))))
            token = data.get("nextPageToken") if isinstance(data, dict) else None
            if not token or not page or str(token) in seen:
                break
            seen.add(str(token))
        return models

    def describe(self, name: str, version: Optional[str] = None) -> ModelDetail:
        """One model (TorchServe: the default version, or *version*)."""
        return self.describe_all(name, version)[0]

    def describe_all(self, name: str, version: Optional[str] = None) -> list[ModelDetail]:
        """Every description the server returns (TorchServe: one per version with ``version="all"``)."""
        data = self._api.request("GET", _path(name, version), model=name, operation="describe").json()
        items = data if isinstance(data, list) else [data]
        details = [ModelDetail.from_json(d) for d in items if isinstance(d, dict)]
        if not details:
            raise ApiError(f"describe {name} on {self.server}: the server sent no model description")
        return details

    # --- writes ---

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
        """``POST /models?url=…`` (MMS takes ``url``, not the ``model_url`` its OpenAPI file names).

        ``synchronous=True`` makes the server answer once the workers are up; the
        HTTP timeout is then at least 120 s unless *timeout* says otherwise.
        """
        params = {
            "url": url,
            "model_name": model_name,
            "handler": handler,
            "runtime": runtime,
            "batch_size": batch_size,
            "max_batch_delay": max_batch_delay,
            "initial_workers": initial_workers,
            "response_timeout": response_timeout,
            "synchronous": synchronous,
        }
        if timeout is None and synchronous:
            timeout = max(self._api.timeout, 120.0)
        response = self._api.request(
            "POST", "/models", params=params, operation="register", timeout=timeout, model=None
        )
        return OperationResult(response.status_code, _message(response))

    def unregister(self, name: str, version: Optional[str] = None, *, timeout: Optional[float] = None) -> OperationResult:
        response = self._api.request(
            "DELETE", _path(name, version), model=name, operation="unregister", timeout=timeout
        )
        return OperationResult(response.status_code, _message(response))

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
            RequestTimeout: *wait* and the workers were not ready within *timeout* (default 120 s).
        """
        if min_workers < 0:
            raise UsageError("--min-workers must be 0 or more")
        if max_workers is not None and max_workers < min_workers:
            raise UsageError(f"--max-workers ({max_workers}) is below --min-workers ({min_workers})")
        params = {"min_worker": min_workers, "max_worker": max_workers, "synchronous": False}
        response = self._api.request("PUT", _path(name, version), params=params, model=name, operation="scale")
        result = ScaleResult(name, min_workers, max_workers, response.status_code, _message(response))
        if wait:
            detail = self.wait_for_workers(
                name, min_workers, max_workers, version=version, timeout=timeout,
                on_progress=on_progress, poll_interval=poll_interval,
            )
            result.ready, result.total, result.waited = detail.ready_workers, len(detail.workers), True
        return result

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
        limit = 120.0 if timeout is None else timeout
        ceiling = max(min_workers, max_workers or 0)
        deadline = time.monotonic() + limit
        while True:
            detail = self.describe(name, version)
            if on_progress is not None:
                on_progress(detail)
            if detail.ready_workers >= min_workers and len(detail.workers) <= ceiling:
                return detail
            if time.monotonic() >= deadline:
                raise RequestTimeout(
                    f"gave up waiting for {name} on {self.server}: {detail.ready_workers} of {min_workers} "
                    f"workers ready ({len(detail.workers)} running) after {limit:g} s",
                    hint="raise --timeout, or check the server's log for workers that fail to start",
                )
            time.sleep(min(poll_interval, max(0.0, deadline - time.monotonic())) or 0.05)

    def close(self) -> None:
        self._api.close()

    def __enter__(self) -> "ManagementClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
