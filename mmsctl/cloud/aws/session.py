"""The one door to boto3: a lazily built session, its clients, a call log, and error translation.

Everything in ``mmsctl.cloud`` talks to AWS through :meth:`AwsSession.call`,
which (1) translates botocore exceptions into :mod:`mmsctl.cloud.aws.errors`,
(2) records the call, and (3) in a dry run answers mutating calls with a
placeholder instead of making them. boto3 and botocore are imported here, on first
use only, and nowhere else in mmsctl (``tests/test_layers.py`` checks): code that
meets a botocore error outside a session (the Lambda handler's own S3 client)
translates it with :func:`translate_error`.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Callable, Optional

from mmsctl.cloud.aws.dryrun import Call, is_mutating, missing_code, placeholder_read, placeholder_response
from mmsctl.cloud.aws.errors import NoCredentials, NoRegion, ResourceNotFound, UnknownRegion, translate
from mmsctl.errors import CloudError, ConfigError

__all__ = ["AwsSession", "PlainHttpRefused", "dns_suffix", "loopback_host", "open_session", "partition", "refuse_plain_http",
           "region_description", "translate_error"]

_REGION_RE = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d+$")


class AwsSession:
    """A boto3 session for one region, with a log of the calls made through it.

    Example:
        >>> aws = open_session(region="us-west-2")          # doctest: +SKIP
        >>> aws.call("ec2", "describe_vpcs")["Vpcs"]       # doctest: +SKIP
    """

    def __init__(self, boto_session: Any, region: str, *, dry_run: bool = False,
                 unlooked: Optional[str] = None) -> None:
        self._boto = boto_session
        self.region = region
        self.dry_run = dry_run or unlooked is not None
        #: Why this dry run looks nothing up (no region, no credentials); None when it does.
        self.unlooked = unlooked
        self.calls: list[Call] = []
        self._clients: dict[tuple[str, str, float, int], Any] = {}
        self._account: Optional[str] = None

    @property
    def profile(self) -> Optional[str]:
        return getattr(self._boto, "profile_name", None)

    def client(self, service: str, region: Optional[str] = None, *, read_timeout: float = 60.0,
               max_attempts: int = 4) -> Any:
        """The boto3 client for *service* (cached); *region* overrides the session's (Pricing lives in us-east-1).

        *read_timeout* and *max_attempts* (botocore's: retries after the first attempt) change the defaults
        for calls that are long or must not be repeated (a synchronous Lambda invoke runs up to 15 minutes,
        and a retry would run it again: ``max_attempts=0``).
        """
        key = (service, region or self.region, read_timeout, max_attempts)
        if key not in self._clients:
            from botocore.config import Config

            config = Config(retries={"max_attempts": max_attempts, "mode": "standard"}, connect_timeout=10,
                            read_timeout=read_timeout, user_agent_extra="mmsctl")
            try:
                self._clients[key] = self._boto.client(service, region_name=key[1], config=config)
            except Exception as exc:  # noqa: BLE001 - translated below
                raise _translated(exc, service, "create_client") from exc
        return self._clients[key]

    def call(self, service: str, operation: str, *, region: Optional[str] = None, read_timeout: float = 60.0,
             max_attempts: int = 4, **params: Any) -> dict[str, Any]:
        """Make one API call (or, dry run and mutating, record it and return a placeholder)."""
        if self.unlooked is not None and not is_mutating(operation):
            self._plan(Call(service, operation, dict(params), executed=False, looked=False))
            answer = placeholder_read(service, operation, params)
            if answer is None:
                raise _not_looked_up(service, operation)
            return answer
        if self.dry_run and is_mutating(operation):
            self.calls.append(Call(service, operation, dict(params), executed=False))
            return placeholder_response(service, operation, params)
        self._plan(Call(service, operation, dict(params)))
        client = self.client(service, region, read_timeout=read_timeout, max_attempts=max_attempts)
        method: Callable[..., dict[str, Any]] = getattr(client, operation)
        try:
            return method(**params)
        except Exception as exc:  # noqa: BLE001 - translated below
            raise _translated(exc, service, operation) from exc

    def _plan(self, call: Call) -> None:
        """Record *call*; in a plan (a dry run) a look-up already listed is not listed again unless a change
        since then names the same resource (a parameter with the same name and value).

        Two steps may ask the same question (is there a role of this name?): AWS answers both the same
        while nothing about that resource has changed, so the plan shows the question once.
        """
        if (self.dry_run or self.unlooked is not None) and not call.mutating:
            asked = {(k, repr(v)) for k, v in call.params.items()}
            for earlier in reversed(self.calls):
                if earlier.mutating and asked & {(k, repr(v)) for k, v in earlier.params.items()}:
                    break
                if (earlier.service, earlier.operation, earlier.params) == (call.service, call.operation, call.params):
                    return
        self.calls.append(call)

    def paginate(self, service: str, operation: str, result_key: str, **params: Any) -> list[Any]:
        """Every item of *result_key* over all pages of a read call."""
        if self.unlooked is not None:
            self.calls.append(Call(service, operation, dict(params), executed=False, looked=False))
            return []
        self.calls.append(Call(service, operation, dict(params)))
        client = self.client(service)
        items: list[Any] = []
        try:
            if client.can_paginate(operation):
                for page in client.get_paginator(operation).paginate(**params):
                    items.extend(page.get(result_key, []))
            else:
                items.extend(getattr(client, operation)(**params).get(result_key, []))
        except Exception as exc:  # noqa: BLE001 - translated below
            raise _translated(exc, service, operation) from exc
        return items

    def sigv4_headers(self, method: str, url: str, *, body: bytes = b"", service: str = "lambda",
                      headers: Optional[dict[str, str]] = None) -> dict[str, str]:
        """The headers that sign one HTTP request with Signature Version 4 (the session's credentials
        and region), as the AWS CLI signs it: ``Authorization``, ``X-Amz-Date``, the token if any.

        Only for ``https``, or plain ``http`` to a loopback host (a local stand-in): a signed request
        in the clear can be read and replayed (with its body) for the five minutes it stays valid.

        Raises:
            PlainHttpRefused: *url* is plain http to another host, or not http(s); before any connection.
            NoCredentials: there are none to sign with.
        """
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        refuse_plain_http(url)
        credentials = self._boto.get_credentials() if self._boto is not None else None
        if credentials is None:
            raise NoCredentials("no AWS credentials to sign the request with")
        request = AWSRequest(method=method, url=url, data=body, headers=dict(headers or {}))
        SigV4Auth(credentials.get_frozen_credentials(), service, self.region).add_auth(request)
        return {k: v for k, v in request.headers.items()}

    def account_id(self) -> str:
        """The caller's account (STS GetCallerIdentity), also a cheap check that credentials work."""
        if self._account is None:
            self._account = str(self.call("sts", "get_caller_identity")["Account"])
        return self._account


def translate_error(exc: BaseException, *, service: str = "", operation: str = "") -> Optional[CloudError]:
    """The :class:`CloudError` for a botocore exception, or None if *exc* is not one of botocore's."""
    import botocore.exceptions

    return translate(exc, botocore.exceptions, service=service, operation=operation)


def _translated(exc: BaseException, service: str, operation: str) -> BaseException:
    mapped = translate_error(exc, service=service, operation=operation)
    return mapped if mapped is not None else exc


def partition(region: str) -> str:
    """The ARN partition of *region* (``aws``, ``aws-cn``, ``aws-us-gov``, ``aws-iso``, …), from botocore's data."""
    return _partition_of(region)[0]


def dns_suffix(region: str) -> str:
    """The domain of *region*'s endpoints (``amazonaws.com``; ``amazonaws.com.cn`` in China, ``amazonaws.eu``,
    ``c2s.ic.gov``, … in the other partitions), from botocore's data."""
    return _partition_of(region)[1]


@functools.lru_cache(maxsize=64)
def _partition_of(region: str) -> tuple[str, str]:
    """(partition, DNS suffix) of *region*: the partition that lists it, else the one whose region pattern it
    matches, else ``aws`` (a region newer than this botocore is most likely a commercial one)."""
    import botocore.session

    parts = botocore.session.get_session().get_data("partitions")["partitions"]
    found = next((p for p in parts if region in p["regions"]), None) or next(
        (p for p in parts if re.match(p["regionRegex"], region)), None)
    if found is None:
        return "aws", "amazonaws.com"
    return str(found["id"]), str(found["outputs"]["dnsSuffix"])


def region_description(region: str) -> Optional[str]:
    """botocore's description of *region* (``US East (N. Virginia)``), or None if it has none."""
    import botocore.session

    data = botocore.session.get_session().get_data("endpoints")
    for part in data.get("partitions", []):
        described = part.get("regions", {}).get(region)
        if described and described.get("description"):
            return str(described["description"])
    return None


def known_regions(boto_session: Any) -> set[str]:
    """Every region botocore knows for EC2, over all partitions (aws, aws-cn, aws-us-gov, …)."""
    regions: set[str] = set()
    for partition in boto_session.get_available_partitions():
        regions.update(boto_session.get_available_regions("ec2", partition_name=partition))
    return regions


class PlainHttpRefused(ConfigError):
    """A request to sign would go over plain http to a host that is not loopback."""

    reference = "cloud-plain-http"


def loopback_host(host: str) -> bool:
    """Whether *host* (a URL's host name, brackets off) is this machine: ``localhost`` or a loopback address."""
    import ipaddress

    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def refuse_plain_http(url: str) -> None:
    """Refuse to sign a request for *url* unless it is https, or plain http to a loopback host.

    Raises:
        PlainHttpRefused: anything else (``http://`` to another host, another scheme).
    """
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), parts.hostname or ""
    if scheme == "https" and host:
        return
    if scheme == "http" and loopback_host(host):
        return
    if scheme == "http":
        raise PlainHttpRefused(f"refusing to send a signed request over plain http to {host}: anyone on the way "
                               "could read it and replay it, body and all, for the five minutes it stays valid",
                               hint="use its https:// URL; plain http is only for this machine (loopback)")
    raise PlainHttpRefused(f"refusing to sign a request to {url[:100]!r}: only https:// URLs are signed",
                           hint="use its https:// URL")


def local_endpoint(service: str) -> Optional[str]:
    """The loopback endpoint *service* is pointed at (``AWS_ENDPOINT_URL_<SERVICE>`` or ``AWS_ENDPOINT_URL``),
    e.g. ``lambda run-local --serve``; None for AWS itself or any other host."""
    import os
    from urllib.parse import urlsplit

    url = os.environ.get(f"AWS_ENDPOINT_URL_{service.upper().replace('-', '_')}") or os.environ.get("AWS_ENDPOINT_URL") \
        or ""
    return url if loopback_host(urlsplit(url).hostname or "") else None


def open_session(*, region: Optional[str] = None, profile: Optional[str] = None, dry_run: bool = False,
                 plan_without_aws: bool = False, local_service: Optional[str] = None) -> AwsSession:
    """A session from boto3's usual chain (flags > AWS_PROFILE/AWS_DEFAULT_REGION > ~/.aws/config).

    Args:
        plan_without_aws: with *dry_run*, a missing region or credentials is no error: the
            session then looks nothing up and answers reads with placeholders
            (:func:`~mmsctl.cloud.aws.dryrun.placeholder_read`); ``unlooked`` says why.
        local_service: the one service the command calls; when it is pointed at loopback
            (:func:`local_endpoint`), a missing region or credentials is filled with
            stand-ins (a local endpoint checks neither).

    Raises:
        NoCredentials: the profile does not exist.
        UnknownRegion: no region configured, or one AWS does not know.
    """
    try:
        boto_session = _boto_session(profile_name=profile, region_name=region)
        _check_profile(boto_session, given=profile is not None)
        name = boto_session.region_name
    except Exception as exc:  # noqa: BLE001 - ProfileNotFound and friends
        raise _translated(exc, "", "") from exc
    if local_service and local_endpoint(local_service) and not (name and _has_credentials(boto_session)):
        keys = {} if _has_credentials(boto_session) else {"aws_access_key_id": "local",
                                                           "aws_secret_access_key": "local"}
        boto_session = _boto_session(region_name=name or "us-east-1", **keys)
        return AwsSession(boto_session, boto_session.region_name, dry_run=dry_run)
    if dry_run and plan_without_aws:
        missing = [what for what, there in (("region", name), ("credentials", _has_credentials(boto_session)))
                   if not there]
        if missing:
            return AwsSession(None, name or "<region>", unlooked=f"no AWS {' or '.join(missing)}")
    if not name:
        raise NoRegion("no AWS region configured")
    if name not in known_regions(boto_session):
        if not _REGION_RE.match(name):
            raise UnknownRegion(f"unknown AWS region: {name!r}", hint="regions look like us-east-1, eu-west-1")
        raise UnknownRegion(f"unknown AWS region: {name!r} (botocore {_botocore_version()} does not know it)",
                            hint="check the name, or upgrade boto3 if the region is new")
    return AwsSession(boto_session, name, dry_run=dry_run)


#: botocore's data loader, shared by every session this process opens: it keeps the parsed service models,
#: which a loader of each session's own would read and parse again.
_loader: Any = None


def _boto_session(**kwargs: Any) -> Any:
    """A boto3 session (*kwargs*: boto3.Session's) on the process's one botocore data loader."""
    global _loader
    import boto3
    import botocore.session

    core = botocore.session.get_session()
    if _loader is None:
        _loader = core.get_component("data_loader")
    else:
        core.register_component("data_loader", _loader)
    session = boto3.Session(botocore_session=core, **kwargs)
    paths = _loader.search_paths  # each boto3 session appends its data folder: kept once
    paths[:] = list(dict.fromkeys(paths))
    return session


def _check_profile(boto_session: Any, *, given: bool) -> None:
    """Refuse a named profile (``--profile`` where *given*, else ``AWS_PROFILE``) that is in no config file,
    before anything else: boto3 says so only when it first reads the profile, which a dry run without credentials
    may never do.

    Raises:
        NoCredentials: no such profile (exit 9).
    """
    name = boto_session.profile_name
    if name != "default" and name not in boto_session.available_profiles:
        raise NoCredentials(f"AWS profile not found: {name}" + ("" if given else " (AWS_PROFILE)"),
                            hint="list profiles with `aws configure list-profiles`", params=("profile",) if given else ())


def _has_credentials(boto_session: Any) -> bool:
    try:
        return boto_session.get_credentials() is not None
    except Exception:  # noqa: BLE001 - a broken credential source counts as none
        return False


def _botocore_version() -> str:
    import botocore

    return str(botocore.__version__)



def _not_looked_up(service: str, operation: str) -> ResourceNotFound:
    """"Not there", as AWS would say it (its error code behind :func:`~mmsctl.cloud.aws.errors.aws_code`)."""
    error = ResourceNotFound(f"{operation}: not looked up (dry run without credentials)")
    cause = LookupError(operation)
    cause.response = {"Error": {"Code": missing_code(service, operation)}}  # type: ignore[attr-defined]
    error.__cause__ = cause
    return error
