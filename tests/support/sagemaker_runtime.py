"""sagemaker-runtime on 127.0.0.1 in front of a real container: what SageMaker's front end does with InvokeEndpoint.

``POST /endpoints/NAME/invocations`` is checked for its Signature Version 4 as AWS checks it (service
``sagemaker``; :func:`tests.support.sigv4_standin.verify`, written from AWS's description of SigV4), then sent
to the container's ``/invocations`` with its ``Content-Type``, ``Accept`` and
``X-Amzn-SageMaker-Custom-Attributes``, as SageMaker forwards them. The answers are the runtime API's:

* the container's 2xx: its body and content type, with ``x-Amzn-Invoked-Production-Variant``;
* the container's error: 424 ``ModelError`` with ``OriginalStatusCode``, ``OriginalMessage`` and AWS's message
  ("Received client error (400) from primary with message "…". See … for more information.");
* an endpoint it does not front: 400 ``ValidationError`` "Endpoint NAME of account ACCOUNT not found.";
* a bad signature: 403 ``InvalidSignatureException``.

moto's sagemaker-runtime answers every invocation with a canned body: this stand-in is how ``sagemaker invoke``,
``predict --context sagemaker:NAME`` and ``bench --context sagemaker:NAME`` meet a real model in the tests.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator
from urllib.parse import unquote, urlsplit

from tests.support.sigv4_standin import verify

__all__ = ["Runtime", "serving_runtime"]

ACCOUNT = "123456789012"
_FORWARDED = ("content-type", "accept", "x-amzn-sagemaker-custom-attributes")


@dataclass
class Runtime:
    url: str
    #: How many invocations reached the container.
    forwarded: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def _model_error(name: str, status: int, body: bytes, region: str) -> bytes:
    kind = "client" if status < 500 else "server"
    text = body.decode("utf-8", "replace")
    message = (f"Received {kind} error ({status}) from primary with message \"{text}\". See https://{region}.console."
               f"aws.amazon.com/cloudwatch/home?region={region}#logEventViewer:group=/aws/sagemaker/Endpoints/{name} "
               f"in account {ACCOUNT} for more information.")
    return json.dumps({"ErrorCode": "CLIENT_ERROR_FROM_MODEL" if status < 500 else "INTERNAL_FAILURE_FROM_MODEL",
                       "LogStreamArn": f"arn:aws:logs:{region}:{ACCOUNT}:log-group:/aws/sagemaker/Endpoints/{name}",
                       "Message": message, "OriginalMessage": text, "OriginalStatusCode": status}).encode()


@contextmanager
def serving_runtime(endpoints: dict[str, str], *, access_key: str, secret: str, token: str | None,
                    region: str = "us-east-1") -> Iterator[Runtime]:
    """Serve the runtime API for *endpoints* (name -> the container's base URL) until the block ends."""
    runtime = Runtime("")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

        def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            for key, value in {**headers, "Content-Length": str(len(body))}.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def _error(self, status: int, kind: str, message: str) -> None:
            self._answer(status, json.dumps({"message": message}).encode(),
                         {"Content-Type": "application/json", "x-amzn-ErrorType": kind})

        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k.lower(): v for k, v in self.headers.items()}
            parts = urlsplit(self.path)
            refused = verify("POST", parts.path, parts.query, headers, body, access_key=access_key, secret=secret,
                             region=region, service="sagemaker", token=token, now=time.time())
            if refused is not None:
                runtime.refused.append(refused)
                self._error(403, "InvalidSignatureException", refused)
                return
            segments = parts.path.split("/")
            name = unquote(segments[2]) if len(segments) == 4 and segments[3] == "invocations" else ""
            if name not in endpoints:
                self._error(400, "ValidationError", f"Endpoint {name} of account {ACCOUNT} not found.")
                return
            self._forward(name, endpoints[name], body, headers)

        def _forward(self, name: str, base: str, body: bytes, headers: dict[str, str]) -> None:
            target = urlsplit(base)
            connection = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
            try:
                connection.request("POST", "/invocations", body, {k: v for k, v in headers.items() if k in _FORWARDED})
                answer = connection.getresponse()
                data = answer.read()
            finally:
                connection.close()
            runtime.forwarded.append(name)
            if 200 <= answer.status < 300:
                self._answer(answer.status, data, {"Content-Type": answer.getheader("Content-Type") or
                                                   "application/octet-stream",
                                                   "x-Amzn-Invoked-Production-Variant": "AllTraffic"})
                return
            self._answer(424, _model_error(name, answer.status, data, region),
                         {"Content-Type": "application/json", "x-amzn-ErrorType": "ModelError"})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    runtime.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield runtime
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
