"""``mmsctl lambda run-local``: the image's handler, in this process, as Lambda would call it.

:class:`LocalFunction` imports the entry point (``module.function``) with the
function's environment already set, timing the import as Lambda's init phase; each
:meth:`~LocalFunction.invoke` passes an event and a context object shaped like
Lambda's, and reports what Lambda's ``REPORT`` line reports (duration, billed
duration, init duration on the first call, max memory). :func:`serve` puts the
same function behind Lambda's Invoke API on loopback
(``POST /2015-03-31/functions/NAME/invocations``, as the runtime interface emulator
in AWS's base images and ``sam local start-lambda`` do), so ``aws lambda invoke
--endpoint-url`` and ``mmsctl lambda invoke`` reach it.

Run as ``python -m mmsctl.lambda_.local`` it does the same in a fresh interpreter:
``run-local --build DIR`` uses that to import the handler from the build context.
"""

from __future__ import annotations

import argparse
import base64
import importlib
import json
import logging
import math
import os
import resource
import sys
import threading
import time
import traceback
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator, Optional
from urllib.parse import unquote, urlsplit

__all__ = ["Invocation", "InvokeServer", "LocalContext", "LocalFunction", "MAX_PAYLOAD", "main", "serve"]

#: Lambda's limit for a synchronous request or response payload.
MAX_PAYLOAD = 6 * 1024 * 1024
_LOG_TAIL = 4096  # what LogType=Tail returns: the last 4 KB


@dataclass
class LocalContext:
    """The ``context`` argument of a Lambda handler (the attributes AWS documents)."""

    function_name: str
    memory_limit_in_mb: int
    timeout_s: float
    region: str = "us-east-1"
    account: str = "000000000000"
    function_version: str = "$LATEST"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    _deadline: float = 0.0

    def __post_init__(self) -> None:
        self._deadline = time.monotonic() + self.timeout_s

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:{self.account}:function:{self.function_name}"

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/{self.function_name}"

    @property
    def log_stream_name(self) -> str:
        return time.strftime("%Y/%m/%d/") + "[$LATEST]local"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


@dataclass
class Invocation:
    """One call's answer and the figures of Lambda's REPORT line."""

    request_id: str
    payload: Any
    error: Optional[dict[str, Any]]
    duration_ms: float
    memory_mb: int
    max_memory_mb: int
    init_ms: Optional[float] = None
    logs: list[str] = field(default_factory=list)
    timed_out: bool = False

    @property
    def billed_ms(self) -> int:
        # Container images are billed for their init phase too.
        return int(math.ceil(self.duration_ms + (self.init_ms or 0.0)))

    def report_line(self) -> str:
        line = (f"REPORT RequestId: {self.request_id}\tDuration: {self.duration_ms:.2f} ms\t"
                f"Billed Duration: {self.billed_ms} ms\tMemory Size: {self.memory_mb} MB\t"
                f"Max Memory Used: {self.max_memory_mb} MB\t")
        if self.init_ms is not None:
            line += f"Init Duration: {self.init_ms:.2f} ms\t"
        return line

    def log_text(self) -> str:
        """What CloudWatch would get for this call: START, the handler's lines, END, REPORT."""
        lines = [f"START RequestId: {self.request_id} Version: $LATEST", *self.logs]
        lines += [f"END RequestId: {self.request_id}", self.report_line()]
        return "\n".join(lines) + "\n"

    def log_tail(self) -> str:
        """The base64 tail that ``Invoke`` returns as ``LogResult`` with ``LogType=Tail``."""
        raw = self.log_text().encode("utf-8")[-_LOG_TAIL:]
        return base64.b64encode(raw).decode("ascii")


class _Capture(logging.Handler):
    """Collects the log lines of mmsctl's loggers, formatted as Lambda's Python runtime prints them."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []
        self.request_id = ""
        self.echo: Optional[Callable[[str], None]] = None

    def emit(self, record: logging.LogRecord) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        line = f"[{record.levelname}]\t{stamp}\t{self.request_id}\t{record.getMessage()}"
        self.lines.append(line)
        if self.echo is not None:
            self.echo(line)


def _max_rss_mb() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)  # KB on Linux


class LocalFunction:
    """A handler loaded as Lambda loads it; call :meth:`invoke` for each event."""

    def __init__(self, entry_point: str, *, function_name: str, memory_mb: int = 1024, timeout_s: float = 30.0,
                 region: str = "us-east-1", echo: Optional[Callable[[str], None]] = None,
                 fresh: bool = False) -> None:
        self.function_name = function_name
        self.memory_mb = memory_mb
        self.timeout_s = timeout_s
        self.region = region
        self._capture = _Capture()
        self._capture.echo = echo
        module_name, _, attr = entry_point.rpartition(".")
        if not module_name:
            from mmsctl.errors import UsageError

            raise UsageError(f"handler {entry_point!r} is not module.function")
        if fresh:  # a new container: module scope (the model load) runs again
            for loaded in [m for m in sys.modules if m == module_name]:
                del sys.modules[loaded]
        with self._logs("init"):
            start = time.perf_counter()
            module = importlib.import_module(module_name)
            self.init_ms: Optional[float] = (time.perf_counter() - start) * 1000
        self.init_logs = list(self._capture.lines)
        self.module_file = getattr(module, "__file__", None)
        self._handler: Callable[[Any, Any], Any] = getattr(module, attr)
        self._first = True

    @contextmanager
    def _logs(self, request_id: str) -> Iterator[list[str]]:
        logger = logging.getLogger("mmsctl")
        self._capture.lines = []
        self._capture.request_id = request_id
        old_level = logger.level
        logger.addHandler(self._capture)
        if logger.level == logging.NOTSET or logger.level > logging.INFO:
            logger.setLevel(logging.INFO)
        try:
            yield self._capture.lines
        finally:
            logger.removeHandler(self._capture)
            logger.setLevel(old_level)

    def invoke(self, event: Any) -> Invocation:
        """Call the handler once; an exception becomes Lambda's error payload, never escapes.

        As Lambda does, the call gets ``timeout_s``: a handler still running then is reported
        "Task timed out after N.NN seconds" with no result (Lambda would freeze the sandbox; here
        the handler's thread is left to finish on its own and its result is dropped).
        """
        context = LocalContext(self.function_name, self.memory_mb, self.timeout_s, region=self.region)
        outcome: dict[str, Any] = {}
        with self._logs(context.aws_request_id) as lines:
            start = time.perf_counter()
            call = threading.Thread(target=self._call, args=(event, context, outcome), daemon=True,
                                    name=f"lambda-{context.aws_request_id[:8]}")
            call.start()
            call.join(self.timeout_s)
            duration = (time.perf_counter() - start) * 1000
            timed_out = call.is_alive()
            if timed_out:
                message = f"Task timed out after {self.timeout_s:.2f} seconds"
                outcome = {"error": {"errorType": "Sandbox.Timedout",
                                     "errorMessage": f"RequestId: {context.aws_request_id} Error: {message}"}}
                lines.append(f"{_timestamp()} {context.aws_request_id} {message}")
                duration = self.timeout_s * 1000
        init = self.init_ms if self._first else None
        logs = (self.init_logs if self._first else []) + list(lines)
        self._first = False
        return Invocation(context.aws_request_id, outcome.get("payload"), outcome.get("error"), duration,
                          self.memory_mb, _max_rss_mb(), init, logs, timed_out=timed_out)

    def _call(self, event: Any, context: LocalContext, outcome: dict[str, Any]) -> None:
        try:
            outcome["payload"] = self._handler(event, context)
        except Exception as exc:  # noqa: BLE001 - reported as Lambda reports an unhandled error
            outcome["error"] = {"errorMessage": str(exc), "errorType": type(exc).__name__,
                                "requestId": context.aws_request_id,
                                "stackTrace": traceback.format_list(traceback.extract_tb(exc.__traceback__))}
            logging.getLogger("mmsctl.lambda").error("unhandled %s: %s", type(exc).__name__, exc)


def _timestamp() -> str:
    """Lambda's log timestamp (``2026-11-26T17:04:05.123Z``)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# -- the Invoke API on loopback ------------------------------------------------------------------


_PREFIX = "/2015-03-31/functions/"


class _Refused(Exception):
    """A request the Invoke API answers with an error body instead of invoking."""

    def __init__(self, status: int, kind: str, message: str, *, close: bool = False) -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.close = status, kind, message, close


@dataclass
class _Target:
    """The function behind the API, and the one sandbox it runs in."""

    function: LocalFunction
    announce: Callable[[str], None]
    sandbox: threading.Lock = field(default_factory=threading.Lock)  # one invocation at a time, as in Lambda


class _InvokeApi(BaseHTTPRequestHandler):
    """Lambda's Invoke API for the one function in :attr:`target` (set by :func:`_invoke_handler`)."""

    protocol_version = "HTTP/1.1"
    timeout = 30  # a client that stops sending cannot hold the (only) sandbox
    target: _Target

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
        pass

    def _send(self, status: int, body: bytes, headers: Optional[dict[str, str]] = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, kind: str, message: str) -> None:
        body = json.dumps({"Type": "User", "message": message}).encode()
        self._send(status, body, {"x-amzn-ErrorType": kind})

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._error(404, "ResourceNotFoundException", "only POST /2015-03-31/functions/NAME/invocations")

    def do_POST(self) -> None:  # noqa: N802
        try:
            event = self._event()
        except _Refused as refused:
            if refused.close:
                self.close_connection = True
            self._error(refused.status, refused.kind, refused.message)
            return
        kind = self.headers.get("X-Amz-Invocation-Type", "RequestResponse")
        if kind == "DryRun":
            self._send(204, b"")
            return
        with self.target.sandbox:
            result = self.target.function.invoke(event)
        self.target.announce(result.report_line())
        self._answer(result, kind)

    def _event(self) -> Any:
        """The request's event: the body read (bounded), the path and function checked, the JSON parsed."""
        raw = self._body()
        path = urlsplit(self.path).path
        if not (path.startswith(_PREFIX) and path.endswith("/invocations")):
            raise _Refused(404, "ResourceNotFoundException", f"unknown path {path[:100]}")
        name = unquote(path[len(_PREFIX):-len("/invocations")])
        own = self.target.function.function_name
        if name not in (own, "function") and not name.endswith(f":{own}"):
            raise _Refused(404, "ResourceNotFoundException", f"Function not found: {name[:140]}")
        try:
            return json.loads(raw) if raw.strip() else {}
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes, as Lambda refuses it
            raise _Refused(400, "InvalidRequestContentException", "Could not parse request body into json") from None

    def _body(self) -> bytes:
        """The body, read before any answer so the connection stays usable; a missing or too large length refused."""
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            raise _Refused(411, "InvalidRequestContentException", "Content-Length is required", close=True)
        if int(length) > MAX_PAYLOAD:  # the body is not read: the connection cannot be reused
            raise _Refused(413, "RequestTooLargeException",
                           f"Request must be smaller than {MAX_PAYLOAD} bytes for the InvokeFunction operation",
                           close=True)
        return self.rfile.read(int(length))

    def _answer(self, result: Invocation, kind: str) -> None:
        """Lambda's response: its headers, and the payload (or error) unless the call was asynchronous."""
        headers = {"X-Amz-Executed-Version": "$LATEST"}
        if result.error is not None:
            headers["X-Amz-Function-Error"] = "Unhandled"
        if self.headers.get("X-Amz-Log-Type") == "Tail":
            headers["X-Amz-Log-Result"] = result.log_tail()
        if kind == "Event":
            self._send(202, b"", {"X-Amz-Executed-Version": "$LATEST"})
            return
        body = _marshal(result)
        if body is None:  # what Lambda's Python runtime answers for a result json cannot write
            body = json.dumps({"errorMessage": "Unable to marshal response: the handler's result is not JSON",
                               "errorType": "Runtime.MarshalError", "requestId": result.request_id}).encode()
            headers["X-Amz-Function-Error"] = "Unhandled"
        elif len(body) > MAX_PAYLOAD:
            body = json.dumps({"errorMessage": f"Response payload size ({len(body)} bytes) exceeded maximum "
                               f"allowed payload size ({MAX_PAYLOAD} bytes).",
                               "errorType": "Function.ResponseSizeTooLarge"}).encode()
            headers["X-Amz-Function-Error"] = "Unhandled"
        self._send(200, body, headers)


def _marshal(result: Invocation) -> Optional[bytes]:
    """The invocation's answer as JSON, or None when it cannot be written (not JSON, or nested too deep)."""
    try:
        return json.dumps(result.error if result.error is not None else result.payload).encode("utf-8")
    except (TypeError, ValueError, RecursionError):
        return None


def _invoke_handler(function: LocalFunction, announce: Callable[[str], None]) -> type[BaseHTTPRequestHandler]:
    """A handler class for *function*: http.server makes one instance per connection, all share the sandbox."""

    class Handler(_InvokeApi):
        target = _Target(function, announce)

    return Handler


class InvokeServer(ThreadingHTTPServer):
    """The Invoke API's HTTP server: a thread per connection, quiet when a client drops its connection.

    ``aws lambda invoke`` gives up at its read timeout and closes while the handler still runs; the reset then
    reaches a connection's thread, and the stdlib server would print its traceback into the terminal that
    serves. Any other error is printed as the stdlib prints it.
    """

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def serve(function: LocalFunction, *, host: str = "127.0.0.1", port: int = 9000,
          announce: Callable[[str], None] = print, ready: Optional[Callable[[str], None]] = None) -> None:
    """Answer Lambda Invoke requests for *function* until interrupted.

    Connections are served in parallel (a client holding one open cannot block the rest);
    invocations run one at a time, as in one execution environment.
    """
    server = InvokeServer((host, port), _invoke_handler(function, announce))
    url = f"http://{host}:{server.server_address[1]}"
    (ready or announce)(f"Invoke API for {function.function_name} on {url} "
                        f"(aws lambda invoke --endpoint-url {url} --function-name {function.function_name} out.json)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


# -- python -m mmsctl.lambda_.local ----------------------------------------------------------


def main(argv: Optional[list[str]] = None) -> int:
    """The child side of ``run-local --build``: the environment is set, the build's code is on sys.path."""
    parser = argparse.ArgumentParser(prog="python -m mmsctl.lambda_.local")
    parser.add_argument("--handler", required=True)
    parser.add_argument("--function-name", required=True)
    parser.add_argument("--memory", type=int, default=1024)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--region", default=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    parser.add_argument("--event", help="event file (JSON)")
    parser.add_argument("--serve", type=int, metavar="PORT")
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args(argv)

    def err(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        function = LocalFunction(args.handler, function_name=args.function_name, memory_mb=args.memory,
                                 timeout_s=args.timeout, region=args.region, echo=err)
    except Exception as exc:  # noqa: BLE001 - Lambda's Runtime.ImportModuleError / init error, as one line
        err(f"error: the handler failed to load: {type(exc).__name__}: {getattr(exc, 'message', exc)}")
        return 1
    err(f"handler {args.handler} from {function.module_file}")
    if args.serve is not None:
        serve(function, host=args.host, port=args.serve, announce=err)
        return 0
    with open(args.event, "rb") as fh:
        event = json.load(fh)
    result = function.invoke(event)
    err(result.report_line())
    print(json.dumps(result.error if result.error is not None else result.payload, indent=2))
    return 1 if result.error is not None else 0


if __name__ == "__main__":
    sys.exit(main())
