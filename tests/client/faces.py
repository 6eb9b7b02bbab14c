"""Run the same client test through the sync and the async face, over ``httpx.MockTransport``.

``Face("async")`` wraps an async client so that each awaited method is called like the sync
one (one event loop per call; a MockTransport holds no connections between loops).
"""

from __future__ import annotations

import asyncio
import inspect
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

import httpx

from mmsctl.client._http import AsyncHttpApi, HttpApi
from mmsctl.client.contexts import Context
from mmsctl.client.inference import AsyncInferenceClient, InferenceClient
from mmsctl.client.management import AsyncManagementClient, ManagementClient
from mmsctl.client.metrics import AsyncMetricsClient, MetricsClient

INFERENCE = "http://inference.test:8080"
MANAGEMENT = "http://management.test:8081"
METRICS = "http://metrics.test:8082"

Answer = Union[httpx.Response, Exception]


def error_body(code: int, kind: str, message: str) -> httpx.Response:
    return httpx.Response(code, json={"code": code, "type": kind, "message": message})


@dataclass
class Server:
    """A MockTransport handler: answers from a script (else *default*), and records each request."""

    default: Callable[[httpx.Request], Answer] = lambda request: httpx.Response(200, json={"status": "ok"})
    script: list[Answer] = field(default_factory=list)
    requests: list[httpx.Request] = field(default_factory=list)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.script.pop(0) if self.script else self.default(request)
        if isinstance(answer, Exception):
            raise answer
        # A fresh response each time: the same scripted answer serves the sync and the async face.
        return httpx.Response(answer.status_code, headers=answer.headers, content=answer.content)

    def then(self, *answers: Answer) -> "Server":
        self.script.extend(answers)
        return self

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)

    def paths(self) -> list[str]:
        return [r.url.raw_path.decode() for r in self.requests]


class _Awaiting:
    """An async client whose coroutine methods run to completion when called."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if inspect.iscoroutinefunction(attr):
            return lambda *args, **kwargs: asyncio.run(attr(*args, **kwargs))
        return attr

    def close(self) -> None:
        asyncio.run(self._client.aclose())


@dataclass(frozen=True)
class Face:
    kind: str  # "sync" or "async"

    def _wrap(self, client: Any) -> Any:
        return client if self.kind == "sync" else _Awaiting(client)

    def management(self, server: Server, context: Optional[Context] = None, **kwargs: Any) -> Any:
        cls = ManagementClient if self.kind == "sync" else AsyncManagementClient
        return self._wrap(cls(context or CONTEXT, transport=server.transport, **kwargs))

    def inference(self, server: Server, context: Optional[Context] = None, **kwargs: Any) -> Any:
        cls = InferenceClient if self.kind == "sync" else AsyncInferenceClient
        return self._wrap(cls(context or CONTEXT, transport=server.transport, **kwargs))

    def metrics(self, server: Server, context: Optional[Context] = None, **kwargs: Any) -> Any:
        cls = MetricsClient if self.kind == "sync" else AsyncMetricsClient
        return self._wrap(cls(context or CONTEXT, transport=server.transport, **kwargs))

    def api(self, server: Server, sleeps: list[float], **kwargs: Any) -> Any:
        """The bare face (HttpApi / AsyncHttpApi) with a recording clock instead of sleeping."""
        if self.kind == "sync":
            return HttpApi(MANAGEMENT, transport=server.transport, sleep=sleeps.append, **kwargs)

        async def record(seconds: float) -> None:
            sleeps.append(seconds)

        return _Awaiting(AsyncHttpApi(MANAGEMENT, transport=server.transport, sleep=record, **kwargs))


CONTEXT = Context("mock", INFERENCE, MANAGEMENT, METRICS)


def key_file(path: Any, *, management: str = "M-key", inference: str = "I-key") -> str:
    """A TorchServe ``key_file.json`` with a different key per API."""
    path.write_text(json.dumps({"management": {"key": management}, "inference": {"key": inference},
                                "API": {"key": "api-key"}}))
    return str(path)
