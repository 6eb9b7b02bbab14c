"""The two faces of the client core: :class:`HttpApi` (``httpx.Client``) and :class:`AsyncHttpApi`.

Each sends one :class:`~mmsctl.client._base.Call` with the shared retry policy and error
translation (:meth:`send`), and drives a whole operation (:meth:`run`): it sends the calls
the operation yields, sleeps its pauses, and throws errors back into it so an operation
may answer them (``ping`` turns an error into an unhealthy result). Everything else lives
in :class:`~mmsctl.client._base.BaseApi`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Optional, TypeVar, Union

from mmsctl.client._base import BaseApi, Call, Operation, Pause
from mmsctl.errors import MmsError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    import httpx

__all__ = ["AsyncHttpApi", "HttpApi"]

T = TypeVar("T")


class _Driver:
    """Steps an operation: what to do next, given the last answer or error."""

    def __init__(self, operation: Operation[Any]) -> None:
        self.operation = operation
        self.result: Any = None

    def step(self, reply: Any, error: Optional[MmsError]) -> Optional[Union[Call, Pause]]:
        """The next call or pause, or None once the operation returned (its value in ``result``)."""
        try:
            if error is not None:
                return self.operation.throw(error)
            return self.operation.send(reply)
        except StopIteration as stop:
            self.result = stop.value
            return None


class HttpApi(BaseApi):
    """The sync face: one ``httpx.Client`` per API.

    *sleep* is the clock for backoffs and polls (tests pass a recorder instead of waiting).
    """

    def __init__(
        self,
        base_url: str,
        token: Optional[str] = None,
        timeout: float = 30.0,
        retries: int = 2,
        backoff: float = 0.2,
        transport: Optional["httpx.BaseTransport"] = None,
        verify: Any = True,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        import httpx

        super().__init__(base_url, token, timeout, retries, backoff, transport, verify)
        self.sleep = sleep
        try:
            self.client = httpx.Client(**self._client_options())
        except (httpx.InvalidURL, ValueError) as exc:
            raise UsageError(f"bad server URL {base_url!r}: {exc}") from None

    def send(self, call: Call) -> "httpx.Response":
        """Send *call* (retried where safe); its response, or the mmsctl error."""
        import httpx
        from tenacity import Retrying

        retrying = Retrying(sleep=self.sleep, **self._retry_options(call))
        options = self._request_options(call)
        try:
            response = retrying(self.client.request, call.method.upper(), call.path, **options)
        except httpx.HTTPError as exc:
            raise self._failed(call, exc) from None
        return self._result(call, response)

    def run(self, operation: Operation[T]) -> T:
        """Drive *operation* to its result."""
        driver = _Driver(operation)
        reply: Any = None
        error: Optional[MmsError] = None
        try:
            while (step := driver.step(reply, error)) is not None:  # bounded: each Operation has its deadline
                reply, error = None, None
                if isinstance(step, Pause):
                    self.sleep(step.seconds)
                    continue
                try:
                    reply = self.send(step)
                except MmsError as exc:
                    error = exc
        finally:
            operation.close()
        return driver.result

    def request(self, method: str, path: str, **call: Any) -> "httpx.Response":
        """Send one call built from *method*, *path* and :class:`Call`'s other fields."""
        return self.send(Call(method, path, **call))

    def close(self) -> None:
        self.client.close()


class AsyncHttpApi(BaseApi):
    """The async face: one ``httpx.AsyncClient`` per API, for asyncio programs (``mmsctl top``).

    *sleep* is the clock for backoffs and polls (default ``asyncio.sleep``; asyncio is imported
    only here, so the sync commands do not pay for it).
    """

    def __init__(
        self,
        base_url: str,
        token: Optional[str] = None,
        timeout: float = 30.0,
        retries: int = 2,
        backoff: float = 0.2,
        transport: Optional["httpx.AsyncBaseTransport"] = None,
        verify: Any = True,
        sleep: Optional[Callable[[float], Awaitable[None]]] = None,
    ) -> None:
        import httpx

        super().__init__(base_url, token, timeout, retries, backoff, transport, verify)
        if sleep is None:
            import asyncio

            sleep = asyncio.sleep
        self.sleep = sleep
        try:
            self.client = httpx.AsyncClient(**self._client_options())
        except (httpx.InvalidURL, ValueError) as exc:
            raise UsageError(f"bad server URL {base_url!r}: {exc}") from None

    async def send(self, call: Call) -> "httpx.Response":
        """Send *call* (retried where safe); its response, or the mmsctl error."""
        import httpx
        from tenacity import AsyncRetrying

        retrying = AsyncRetrying(sleep=self.sleep, **self._retry_options(call))
        options = self._request_options(call)
        try:
            response: httpx.Response = await retrying(self.client.request, call.method.upper(), call.path, **options)
        except httpx.HTTPError as exc:
            raise self._failed(call, exc) from None
        return self._result(call, response)

    async def run(self, operation: Operation[T]) -> T:
        """Drive *operation* to its result."""
        driver = _Driver(operation)
        reply: Any = None
        error: Optional[MmsError] = None
        try:
            while (step := driver.step(reply, error)) is not None:  # bounded: each Operation has its deadline
                reply, error = None, None
                if isinstance(step, Pause):
                    await self.sleep(step.seconds)
                    continue
                try:
                    reply = await self.send(step)
                except MmsError as exc:
                    error = exc
        finally:
            operation.close()
        return driver.result

    async def request(self, method: str, path: str, **call: Any) -> "httpx.Response":
        """Send one call built from *method*, *path* and :class:`Call`'s other fields."""
        return await self.send(Call(method, path, **call))

    async def aclose(self) -> None:
        await self.client.aclose()
