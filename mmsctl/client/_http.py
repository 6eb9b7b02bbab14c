"""The two faces of the client core: :class:`HttpApi` (``httpx.Client``) and :class:`AsyncHttpApi`.

Each sends one :class:`~mmsctl.client._base.Call` with the shared retry policy and error
translation (:meth:`send`) within the call's deadline, reading the answer as a stream up to
the size limit (the sync face keeps the deadline in its transport, :mod:`._deadline`; the
async face with ``asyncio.wait_for``), and drives a whole operation (:meth:`run`): it sends the calls
the operation yields, sleeps its pauses, and throws errors back into it so an operation
may answer them (``ping`` turns an error into an unhealthy result). Everything else lives
in :class:`~mmsctl.client._base.BaseApi`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Optional, TypeVar, Union

from mmsctl.client._base import BaseApi, Call, Deadline, Operation, Pause
from mmsctl.client._errors import answer_timeout, server_label
from mmsctl.errors import MmsError, RequestTimeout, UsageError

if TYPE_CHECKING:  # pragma: no cover
    import httpx

__all__ = ["AsyncHttpApi", "HttpApi"]

T = TypeVar("T")


def _deadline_transport(verify: Any) -> "httpx.BaseTransport":
    from mmsctl.client._deadline import deadline_transport

    return deadline_transport(verify)


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
        max_response_bytes: Optional[int] = None,
    ) -> None:
        import httpx

        super().__init__(base_url, token, timeout, retries, backoff, transport, verify, max_response_bytes)
        self.sleep = sleep
        try:
            own = None if transport is not None else _deadline_transport(self._verify())
            self.client = httpx.Client(**self._client_options(own))
        except (httpx.InvalidURL, ValueError) as exc:
            raise UsageError(f"bad server URL {base_url!r}: {exc}") from None

    def send(self, call: Call) -> "httpx.Response":
        """Send *call* (retried where safe) within its deadline; its response, or the mmsctl error."""
        import httpx
        from tenacity import Retrying

        deadline = self._deadline(call)
        retrying = Retrying(sleep=self.sleep, **self._retry_options(call, deadline))
        try:
            response = retrying(self._attempt, call, deadline)
        except httpx.HTTPError as exc:
            raise self._failed(call, exc) from None
        return self._result(call, response)

    def _attempt(self, call: Call, deadline: Deadline) -> "httpx.Response":
        """One try: send, then read the answer chunk by chunk, stopping at the size limit."""
        import httpx

        from mmsctl.client._deadline import until

        request = self.client.build_request(call.method.upper(), call.path, **self._request_options(call, deadline))
        with until(deadline.at):
            response = self.client.send(request, stream=True)
            try:
                self._announced(call, response)
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    self._check_size(call, response, len(body))
                    if deadline.left() <= 0:
                        raise httpx.ReadTimeout("the call's deadline passed")
            except httpx.TimeoutException:
                raise answer_timeout(self.base_url + call.path, self._limit(call)) from None
            finally:
                response.close()
        self._keep(response, bytes(body))
        return response

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
        max_response_bytes: Optional[int] = None,
    ) -> None:
        import httpx

        super().__init__(base_url, token, timeout, retries, backoff, transport, verify, max_response_bytes)
        if sleep is None:
            import asyncio

            sleep = asyncio.sleep
        self.sleep = sleep
        try:
            self.client = httpx.AsyncClient(**self._client_options())
        except (httpx.InvalidURL, ValueError) as exc:
            raise UsageError(f"bad server URL {base_url!r}: {exc}") from None

    async def send(self, call: Call) -> "httpx.Response":
        """Send *call* (retried where safe) within its deadline; its response, or the mmsctl error."""
        import asyncio

        import httpx
        from tenacity import AsyncRetrying

        deadline = self._deadline(call)
        retrying = AsyncRetrying(sleep=self.sleep, **self._retry_options(call, deadline))
        answering: list[bool] = []  # set once the headers are in: a late body is "did not finish"
        try:
            response: httpx.Response = await asyncio.wait_for(retrying(self._attempt, call, deadline, answering),
                                                              deadline.seconds)
        except asyncio.TimeoutError:
            raise self._late(call, answering) from None
        except httpx.HTTPError as exc:
            raise self._failed(call, exc) from None
        return self._result(call, response)

    def _late(self, call: Call, answering: list[bool]) -> RequestTimeout:
        url, limit = self.base_url + call.path, self._limit(call)
        if answering:
            return answer_timeout(url, limit)
        return RequestTimeout(f"{server_label(url)} did not answer after {limit:g} s")

    async def _attempt(self, call: Call, deadline: Deadline, answering: list[bool]) -> "httpx.Response":
        """One try: send, then read the answer chunk by chunk, stopping at the size limit."""
        import httpx

        request = self.client.build_request(call.method.upper(), call.path, **self._request_options(call, deadline))
        response = await self.client.send(request, stream=True)
        answering.append(True)
        try:
            self._announced(call, response)
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                self._check_size(call, response, len(body))
        except httpx.TimeoutException:
            raise answer_timeout(self.base_url + call.path, self._limit(call)) from None
        finally:
            await response.aclose()
        self._keep(response, bytes(body))
        return response

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
