"""A function URL on 127.0.0.1 that checks Signature Version 4 the way AWS does, then runs a handler.

The check is written from AWS's published description of SigV4 (canonical request, string to
sign, the HMAC key chain), not with botocore's signer, so a signer that drifts from the spec
fails here: a missing or wrong signature, another key, region or service in the scope, a date
more than five minutes off, an unsigned security token, or a body changed after signing are
all answered 403 like AWS (``{"Message": "Forbidden"}``). A request that passes becomes a
function-URL event (payload 2.0) for *handle*, whose answer becomes the HTTP response.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator, Optional
from urllib.parse import parse_qsl, quote, urlsplit

__all__ = ["Seen", "StandIn", "serving_function_url", "verify"]

_ALGORITHM = "AWS4-HMAC-SHA256"
_SKEW_S = 300


@dataclass
class Seen:
    """One request as it arrived, and what the check said (None: it passed)."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    refused: Optional[str]


@dataclass
class StandIn:
    url: str
    seen: list[Seen] = field(default_factory=list)
    #: Added to the stand-in's clock (a test moves it to make a signature stale).
    clock_offset_s: float = 0.0


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).digest()


def _canonical_query(raw: str) -> str:
    pairs = [(quote(k, safe="-_.~"), quote(v, safe="-_.~")) for k, v in parse_qsl(raw, keep_blank_values=True)]
    return "&".join(f"{k}={v}" for k, v in sorted(pairs))


def verify(method: str, raw_path: str, raw_query: str, headers: dict[str, str], body: bytes, *, access_key: str,
           secret: str, region: str, service: str, token: Optional[str], now: float) -> Optional[str]:
    """Why AWS would refuse this request's signature, or None when it holds. *headers* are lowercased."""
    auth = headers.get("authorization", "")
    if not auth.startswith(_ALGORITHM + " "):
        return "no AWS4-HMAC-SHA256 Authorization header"
    fields = dict(part.strip().split("=", 1) for part in auth[len(_ALGORITHM) + 1:].split(",") if "=" in part)
    try:
        key_id, date, scope_region, scope_service, terminator = fields["Credential"].split("/")
        signed = fields["SignedHeaders"].split(";")
        signature = fields["Signature"]
    except (KeyError, ValueError):
        return "malformed Authorization header"
    if key_id != access_key:
        return "unknown access key"
    if (scope_region, scope_service, terminator) != (region, service, "aws4_request"):
        return f"credential scope {scope_region}/{scope_service}/{terminator} is not {region}/{service}/aws4_request"
    amz_date = headers.get("x-amz-date", "")
    try:
        stamp = datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return "no valid X-Amz-Date"
    if amz_date[:8] != date or abs(now - stamp) > _SKEW_S:
        return "signature expired or not yet valid"
    if not {"host", "x-amz-date"} <= set(signed) or signed != sorted(signed):
        return "host and x-amz-date must be signed, names sorted"
    if token is not None and (headers.get("x-amz-security-token") != token or "x-amz-security-token" not in signed):
        return "security token missing, wrong or unsigned"
    canonical_headers = "".join(f"{name}:{' '.join(headers.get(name, '').split())}\n" for name in signed)
    canonical = "\n".join([method, quote(raw_path or "/", safe="/~"), _canonical_query(raw_query), canonical_headers,
                           ";".join(signed), hashlib.sha256(body).hexdigest()])
    scope = f"{date}/{region}/{service}/aws4_request"
    to_sign = "\n".join([_ALGORITHM, amz_date, scope, hashlib.sha256(canonical.encode("utf-8")).hexdigest()])
    key = _hmac(_hmac(_hmac(_hmac(f"AWS4{secret}".encode("utf-8"), date), region), service), "aws4_request")
    expected = hmac.new(key, to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    return None if hmac.compare_digest(expected, signature) else "signature does not match"


def _event(method: str, path: str, query: str, headers: dict[str, str], body: bytes) -> dict[str, Any]:
    """The function-URL event Lambda builds from this request (payload format 2.0, binary bodies base64)."""
    text_type = headers.get("content-type", "").startswith(("application/json", "text/"))
    return {
        "version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": query, "headers": headers,
        "queryStringParameters": dict(parse_qsl(query)) or None,
        "requestContext": {"http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1",
                                    "userAgent": headers.get("user-agent", "")},
                           "domainName": headers.get("host", ""), "requestId": "standin", "timeEpoch": int(time.time() * 1000)},
        "body": body.decode("utf-8") if text_type else base64.b64encode(body).decode("ascii"),
        "isBase64Encoded": not text_type,
    }


@contextmanager
def serving_function_url(handle: Callable[[dict[str, Any]], dict[str, Any]], *, auth: str = "AWS_IAM",
                         access_key: str = "testing", secret: str = "testing", token: Optional[str] = "testing",
                         region: str = "us-east-1") -> Iterator[StandIn]:
    """A function URL on a free loopback port; with ``auth="NONE"`` a signature is not asked for (as AWS)."""
    state = StandIn("")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

        def _answer(self, status: int, body: bytes, content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _serve(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k.lower(): v for k, v in self.headers.items()}
            parts = urlsplit(self.path)
            refused = None
            if auth == "AWS_IAM":
                refused = verify(self.command, parts.path, parts.query, headers, body, access_key=access_key,
                                 secret=secret, region=region, service="lambda", token=token,
                                 now=time.time() + state.clock_offset_s)
            state.seen.append(Seen(self.command, parts.path, parts.query, headers, body, refused))
            if refused:
                self._answer(403, json.dumps({"Message": "Forbidden"}).encode())
                return
            answer = handle(_event(self.command, parts.path or "/", parts.query, headers, body))
            out = answer.get("body") or ""
            data = base64.b64decode(out) if answer.get("isBase64Encoded") else str(out).encode("utf-8")
            self._answer(int(answer.get("statusCode", 200)), data,
                         (answer.get("headers") or {}).get("content-type", "application/json"))

        do_GET = do_POST = _serve  # noqa: N815

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}/"
    # shutdown() waits out one poll: 0.5 s by default, in every test that starts this server
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
