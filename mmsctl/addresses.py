"""Which addresses a URL input may reach: public ones only, unless an allow-list opens more on purpose.

A URL that a request names (the Lambda handler's ``?url=``, ``predict URL``) would
otherwise let anyone make the function reach into its own network: the Lambda runtime
API on 127.0.0.1:9001, the instance-metadata addresses, a VPC's private hosts. So the
host is resolved once, every address it resolves to is judged here, and the fetch then
connects to the address that was judged (:mod:`mmsctl.predict.fetch`), never to a second
lookup's answer.

``MMSCTL_FETCH_ALLOW`` (comma-separated addresses, CIDR blocks or host names) lets
chosen non-public destinations through, e.g. an image server inside the VPC. The Lambda
runtime API (``AWS_LAMBDA_RUNTIME_API``, host:port) stays refused even then: a request
that reached it could read or answer other invocations.

Tests stand in for DNS by passing ``resolver=`` or by replacing :data:`system_resolver`
here (it is looked up at each fetch).
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from dataclasses import dataclass
from typing import Callable, Optional, Union

from mmsctl.errors import ConfigError

__all__ = ["ENV_ALLOW", "ENV_RUNTIME_API", "AllowList", "IPAddress", "Resolver", "refusal", "resolve", "system_resolver"]

ENV_ALLOW = "MMSCTL_FETCH_ALLOW"
#: Set by Lambda in the function's environment (``127.0.0.1:9001``).
ENV_RUNTIME_API = "AWS_LAMBDA_RUNTIME_API"
IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
#: ``(host, port) -> addresses``; tests pass a stand-in for DNS.
Resolver = Callable[[str, int], list[str]]

_METADATA = (ipaddress.ip_network("169.254.169.254/32"), ipaddress.ip_network("fd00:ec2::254/128"),
             ipaddress.ip_network("169.254.170.2/32"))  # EC2 IMDS (v4, v6) and the ECS/Lambda credentials endpoint
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_MAX_ALLOW_ENTRIES = 64
_HOST_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9.])?$")


@dataclass(frozen=True)
class AllowList:
    """Destinations a user opened on purpose: networks and exact host names."""

    networks: tuple[Union[ipaddress.IPv4Network, ipaddress.IPv6Network], ...] = ()
    hosts: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, text: str) -> "AllowList":
        """``"127.0.0.1, 10.0.0.0/8, images.internal"`` -> an allow-list.

        Raises:
            ConfigError: more than 64 entries, or an entry that is none of the three.
        """
        items = [item.strip() for item in text.split(",") if item.strip()]
        if len(items) > _MAX_ALLOW_ENTRIES:
            raise ConfigError(f"{ENV_ALLOW} has {len(items)} entries; at most {_MAX_ALLOW_ENTRIES} are allowed")
        networks, hosts = [], set()
        for item in items:
            try:
                networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                if not _HOST_RE.match(item):
                    raise ConfigError(f"{ENV_ALLOW}: {item[:80]!r} is not an address, a CIDR block or a host name") \
                        from None
                hosts.add(item.lower().rstrip("."))
        return cls(tuple(networks), frozenset(hosts))

    @classmethod
    def from_environ(cls, environ: Optional[dict[str, str]] = None) -> "AllowList":
        return cls.parse((os.environ if environ is None else environ).get(ENV_ALLOW, ""))

    def allows(self, host: str, address: IPAddress) -> bool:
        return host.lower().rstrip(".") in self.hosts or any(address in net for net in self.networks)


def refusal(address: IPAddress) -> Optional[str]:
    """Why *address* is not a public destination (``"a loopback address"``), or None when it is."""
    if isinstance(address, ipaddress.IPv6Address):  # an IPv4 address inside: judge that one
        embedded = address.ipv4_mapped or address.sixtofour or (address.teredo[1] if address.teredo else None)
        if embedded is not None:
            return refusal(embedded)
    if any(address in net for net in _METADATA if net.version == address.version):
        return "an instance-metadata address"
    checks = (("loopback", address.is_loopback), ("unspecified", address.is_unspecified),
              ("link-local", address.is_link_local), ("private", address.is_private),
              ("multicast", address.is_multicast), ("reserved", address.is_reserved),
              ("shared (carrier-grade NAT)", isinstance(address, ipaddress.IPv4Address) and address in _CGNAT))
    for name, hit in checks:
        if hit:
            return f"a {name} address"
    return None if address.is_global else "not a public address"


def system_resolver(host: str, port: int) -> list[str]:
    """The addresses the system's resolver gives for *host* (one lookup)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def resolve(host: str, port: int, *, allow: AllowList, resolver: Resolver) -> list[IPAddress]:
    """The addresses to connect to for *host*, in the resolver's order: resolved once, every answer judged.

    A literal address is judged as it is. If any answer is refused, the whole name is
    (a name that also points inside is not public, whichever answer a client would use).

    Raises:
        PermissionError: the host resolves to an address that is not public and not allowed.
        OSError: the name does not resolve.
    """
    try:
        answers: list[IPAddress] = [ipaddress.ip_address(host.strip("[]"))]
        verb = "is"
    except ValueError:
        answers = [ipaddress.ip_address(a.split("%", 1)[0]) for a in resolver(host, port)]
        verb = "resolves to"
    if not answers:
        raise OSError(f"{host} has no address")
    for address in answers:
        if _is_runtime_api(host, address, port):  # no allow-list opens it
            why: Optional[str] = "the Lambda runtime API"
        else:
            why = None if allow.allows(host, address) else refusal(address)
        if why is not None:
            raise PermissionError(f"{host} {verb} {why}" if verb == "is" else f"{host} {verb} {address}, {why}")
    return list(dict.fromkeys(answers))


def _is_runtime_api(host: str, address: IPAddress, port: int) -> bool:
    """Whether *host*/*address* and *port* are this function's runtime API (never fetched, allow-list or not)."""
    from urllib.parse import urlsplit

    value = os.environ.get(ENV_RUNTIME_API, "").strip()
    if not value:
        return False
    try:
        parts = urlsplit("//" + value)
        api_host, api_port = (parts.hostname or "").lower(), parts.port
    except ValueError:
        return False
    if api_port is not None and api_port != port:
        return False
    try:
        api_address: Optional[IPAddress] = ipaddress.ip_address(api_host)
    except ValueError:
        api_address = None
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return api_host == host.lower().strip("[]").rstrip(".") or api_address in (address, mapped)
