"""S3 as a Lambda function's role sees it: a reverse proxy in front of moto's S3 that evaluates the role's policy.

moto evaluates no IAM policy, so a call the role may not make succeeds there, and a missing
key is a 404 to everyone. AWS S3 authorizes every request against the caller's policy and
answers 403 ``AccessDenied`` where nothing allows it; and it answers a GET or HEAD of a missing
key with 404 only to a caller allowed ``s3:ListBucket`` on the bucket, with 403 otherwise (S3 API
reference, HeadObject and GetObject, "Permissions"). That check is made for the GET or HEAD
itself, whose request has no ``s3:prefix``: a ``ListBucket`` granted under an ``s3:prefix``
condition does not count. This stand-in plays both rules for the requests a function makes:

* ``GET``/``HEAD`` of an object: ``s3:GetObject`` (``s3:GetObjectVersion`` with ``versionId``);
* ``PUT`` of an object: ``s3:PutObject``; ``DELETE``: ``s3:DeleteObject`` (``s3:DeleteObjectVersion``);
* ``GET`` of a bucket (ListObjects, ListObjectsV2): ``s3:ListBucket`` with ``s3:prefix``,
  ``s3:delimiter`` and ``s3:max-keys`` taken from the request; ``?versions``: ``s3:ListBucketVersions``;
  ``HEAD`` of a bucket (HeadBucket): ``s3:ListBucket``; ``?tagging``: ``s3:GetBucketTagging``;
* ``x-amz-expected-bucket-owner``: 403 when the bucket's owner is another account.

Anything else is answered 501, so a function that starts making another call shows up here
rather than passing unchecked. The policy is evaluated as IAM evaluates one identity policy:
an explicit ``Deny`` wins, then any ``Allow``; ``Action``/``Resource`` with ``*`` and ``?``
wildcards, and the condition operators ``StringEquals``, ``StringLike``, their ``Not`` forms
and ``IfExists`` variants (an operator it does not know fails the test, never passes it).
A request that passes goes to moto as it is; moto's answer comes back as it is, except a
404 for a missing key, which becomes S3's 403 where the caller may not list the bucket.
"""

from __future__ import annotations

import http.client
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, Iterator, Optional
from urllib.parse import parse_qsl, unquote, urlsplit

from tests.support.imageserver import serving

__all__ = ["Decision", "S3AsRole", "allowed", "serving_s3_as_role"]

#: moto's account: the owner of every bucket the tests make.
ACCOUNT = "123456789012"
_LIST_PARAMS = {"list-type", "prefix", "delimiter", "max-keys", "continuation-token", "start-after", "encoding-type",
                "fetch-owner", "marker", "optional-object-attributes"}
_OPERATORS = {"StringEquals", "StringNotEquals", "StringLike", "StringNotLike"}
_HOP = {"connection", "keep-alive", "transfer-encoding", "host", "proxy-connection", "te", "upgrade"}


@dataclass(frozen=True)
class Decision:
    """One request as the stand-in judged it."""

    method: str
    action: str
    resource: str
    context: dict[str, str]
    owner: Optional[str]  # the request's x-amz-expected-bucket-owner
    status: int  # what the caller got


@dataclass
class S3AsRole:
    """The proxy's URL and state: the role's policy (a test may replace it), bucket owners, what it decided."""

    url: str
    policy: dict[str, Any]
    owners: dict[str, str] = field(default_factory=dict)
    seen: list[Decision] = field(default_factory=list)

    def actions(self) -> list[tuple[str, int]]:
        return [(d.action, d.status) for d in self.seen]


def _glob(pattern: str, value: str, *, case: bool = True) -> bool:
    """IAM's wildcard match: ``*`` any run of characters (``/`` too), ``?`` one character."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, 0 if case else re.IGNORECASE) is not None


def _listed(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _condition_holds(condition: dict[str, Any], context: dict[str, str]) -> bool:
    for operator, tests in condition.items():
        base = operator.removesuffix("IfExists")
        if base not in _OPERATORS:
            raise AssertionError(f"the S3 policy stand-in does not evaluate condition operator {operator}")
        for key, wanted in tests.items():
            value = context.get(key.lower())
            if value is None:
                if operator.endswith("IfExists") or base.startswith("StringNot"):
                    continue  # an absent key satisfies IfExists and the negated operators
                return False
            like = base.endswith("Like")
            hit = any(_glob(w, value) if like else w == value for w in _listed(wanted))
            if hit == base.startswith("StringNot"):
                return False
    return True


def _applies(statement: dict[str, Any], action: str, resource: str, context: dict[str, str]) -> bool:
    if {"NotAction", "NotResource", "NotPrincipal"} & set(statement):
        raise AssertionError("the S3 policy stand-in does not evaluate NotAction, NotResource or NotPrincipal")
    return (any(_glob(a, action, case=False) for a in _listed(statement.get("Action", [])))
            and any(_glob(r, resource) for r in _listed(statement.get("Resource", [])))
            and _condition_holds(statement.get("Condition") or {}, context))


def allowed(policy: dict[str, Any], action: str, resource: str, context: Optional[dict[str, str]] = None) -> bool:
    """Whether one identity policy allows *action* on *resource* in the request *context* (keys lower-case)."""
    statements = policy.get("Statement", [])
    hits = [s for s in ([statements] if isinstance(statements, dict) else statements)
            if _applies(s, action, resource, context or {})]
    return not any(s.get("Effect") == "Deny" for s in hits) and any(s.get("Effect") == "Allow" for s in hits)


def _judge(method: str, path: str, query: dict[str, str], headers: Any) -> Optional[tuple[str, str, dict[str, str]]]:
    """(action, resource ARN, condition context) of a path-style S3 request; None for a request not modelled."""
    bucket, _, key = unquote(path).lstrip("/").partition("/")
    if not bucket:
        return None
    if key:
        if set(query) - {"versionId", "partNumber"} or headers.get("x-amz-copy-source"):
            return None
        if method in ("GET", "HEAD"):
            return ("s3:GetObjectVersion" if "versionId" in query else "s3:GetObject"), f"arn:aws:s3:::{bucket}/{key}", {}
        if method == "PUT":
            return "s3:PutObject", f"arn:aws:s3:::{bucket}/{key}", {}
        if method == "DELETE":
            return ("s3:DeleteObjectVersion" if "versionId" in query else "s3:DeleteObject"), \
                f"arn:aws:s3:::{bucket}/{key}", {}
        return None
    if method == "HEAD" and not query:  # HeadBucket
        return "s3:ListBucket", f"arn:aws:s3:::{bucket}", {}
    if method != "GET":
        return None
    if set(query) == {"tagging"}:
        return "s3:GetBucketTagging", f"arn:aws:s3:::{bucket}", {}
    if set(query) <= _LIST_PARAMS | {"versions", "key-marker", "version-id-marker"}:
        context = {f"s3:{name}": query[name] for name in ("prefix", "delimiter", "max-keys") if name in query}
        return ("s3:ListBucketVersions" if "versions" in query else "s3:ListBucket"), f"arn:aws:s3:::{bucket}", context
    return None


def _error_xml(code: str, message: str) -> bytes:
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
            f"<RequestId>STANDIN</RequestId><HostId>standin</HostId></Error>").encode()


@dataclass(frozen=True)
class _Answer:
    status: int
    headers: Optional[list[tuple[str, str]]]
    body: bytes


#: S3's refusal (a HEAD gets the status alone).
_DENIED = _Answer(403, None, _error_xml("AccessDenied", "Access Denied"))


def _handler(state: S3AsRole, moto: str) -> type[BaseHTTPRequestHandler]:
    upstream = urlsplit(moto)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

        def _reply(self, status: int, body: bytes, headers: Optional[list[tuple[str, str]]] = None) -> None:
            self.send_response(status)
            headers = headers or [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))]
            for name, value in headers:
                if name.lower() not in _HOP:
                    self.send_header(name, value)  # a HEAD's Content-Length is the object's, as moto said
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _moto(self, method: str, target: str, body: bytes = b"") -> _Answer:
            conn = http.client.HTTPConnection(upstream.hostname or "127.0.0.1", upstream.port, timeout=30)
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in _HOP and (body or k.lower() not in ("content-length", "content-md5"))}
            headers["Host"] = upstream.netloc
            try:
                conn.request(method, target, body=body, headers=headers)
                got = conn.getresponse()
                return _Answer(got.status, got.getheaders(), got.read())
            finally:
                conn.close()

        def _serve(self) -> None:
            if self.headers.get("Transfer-Encoding"):
                self._reply(501, _error_xml("NotImplemented", "the stand-in reads Content-Length bodies only"))
                return
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            parts = urlsplit(self.path)
            query = dict(parse_qsl(parts.query, keep_blank_values=True))
            judged = _judge(self.command, parts.path, query, self.headers)
            if judged is None:
                self._reply(501, _error_xml("NotImplemented", f"the S3 policy stand-in does not model {self.command} "
                                                             f"{parts.path}?{parts.query}"))
                return
            action, resource, context = judged
            answer = self._answer(action, resource, context, body)
            state.seen.append(Decision(self.command, action, resource, context,
                                       self.headers.get("x-amz-expected-bucket-owner"), answer.status))
            self._reply(answer.status, answer.body, answer.headers)

        def _answer(self, action: str, resource: str, context: dict[str, str], body: bytes) -> _Answer:
            bucket, _, key = resource.split(":::", 1)[1].partition("/")
            owner = self.headers.get("x-amz-expected-bucket-owner")
            if owner is not None and owner != state.owners.get(bucket, ACCOUNT):
                return _DENIED
            if not allowed(state.policy, action, resource, context):
                return _DENIED
            answer = self._moto(self.command, self.path, body)
            if answer.status == 404 and key and self._moto("HEAD", f"/{bucket}").status != 404 \
                    and not allowed(state.policy, "s3:ListBucket", f"arn:aws:s3:::{bucket}", {}):
                return _DENIED  # a missing key, to a caller that may not list the bucket
            return answer

        do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _serve  # noqa: N815

    return Handler


@contextmanager
def serving_s3_as_role(moto_url: str, policy: dict[str, Any]) -> Iterator[S3AsRole]:
    """The stand-in on a free loopback port in front of *moto_url*, judging each request by *policy*."""
    state = S3AsRole("", policy)
    with serving(_handler(state, moto_url)) as url:
        state.url = url
        yield state
