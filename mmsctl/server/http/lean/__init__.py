"""The inference API's lean path: requests served straight off the HTTP/1.1 codec (:mod:`mmsctl.http1`).

Every connection to the inference API starts here. Each request is routed by its request line alone
(:mod:`~mmsctl.server.http.lean.routes`: plain predictions, pings, SageMaker's ``/invocations`` and v2 infer);
a request routed here is finished here, whatever its head and body hold (errors included, a body of any size
up to ``max_request_size``, chunked, ``Expect: 100-continue``, a form), with no asyncio task, aiohttp request
or middleware, and counted, given its ``x-request-id`` and access-logged as aiohttp's path does. Any other
request line hands the connection, with that request's bytes, to aiohttp's protocol before anything of the
request is parsed: no request's head is parsed, or admitted, twice.

What a request means is decided by the functions aiohttp's routes call too; admission by the same gate
(:mod:`~mmsctl.server.http.admission`), with the same limits and timeouts:
:mod:`~mmsctl.server.http.lean.connection` holds a connection's state (its parser, the bytes not read yet,
flow control, deadlines), :mod:`~mmsctl.server.http.lean.exchange` one request's.
"""
