"""Which addresses a URL input may reach: public ones only, unless an allow-list opens more on purpose.

A URL that a request names (the Lambda handler's ``?url=``, ``predict URL``) would
otherwise let anyone make the function reach into its own network: the Lambda runtime
API on 127.0.0.1:9001, the instance-metadata addresses, a VPC's private hosts. So the
host is resolved once, every address it resolves to is judged here, and the fetch then
connects to the address that was judged (:mod:`mmsctl.predict.fetch`), never to a second
lookup's answer.

``MMSCTL_FETCH_ALLOW`` (comma-separated addresses, CIDR blocks or host names) lets
chosen non-public destinations through, e.g. an image server inside the VPC: an allowed name
may resolve to a private, loopback or shared address. What no entry opens: the clouds'
metadata and credentials endpoints, link-local addresses (where those live), "this host"
(``0.0.0.0/8``, ``::``) and the Lambda runtime API (``AWS_LAMBDA_RUNTIME_API``, host:port),
a request that reached which could read the machine's credentials or answer other invocations.

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

__all__ = ["ENV_ALLOW", "ENV_RUNTIME_API", "AllowList", "IPAddress", "NeverAllowed", "Resolver", "never", "refusal",
           "resolve", "system_resolver"]

ENV_ALLOW = "MMSCTL_FETCH_ALLOW"
#: Set by Lambda in the function's environment (``127.0.0.1:9001``).
ENV_RUNTIME_API = "AWS_LAMBDA_RUNTIME_API"
IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
#: ``(host, port) -> addresses``; tests pass a stand-in for DNS.
Resolver = Callable[[str, int], list[str]]

_METADATA = tuple(ipaddress.ip_network(n) for n in (
    "169.254.169.254/32", "fd00:ec2::254/128",  # EC2's instance metadata (IPv4, IPv6); GCP, Azure, OpenStack: IPv4
    "169.254.170.2/32", "169.254.170.23/32", "fd00:ec2::23/128",  # ECS/Lambda credentials, EKS Pod Identity
    "100.100.100.200/32",  # Alibaba Cloud's metadata
    "fd20:ce::254/128",  # GCP's metadata over IPv6
    "192.0.0.192/32",  # Oracle Cloud's older metadata address
    "168.63.129.16/32",  # Azure's WireServer (a public address that answers only inside Azure)
))
#: Addresses no allow-list entry opens (besides the metadata ones): link-local, where metadata services live,
#: and "this host", which a connect turns into a local one.
_NEVER = tuple(ipaddress.ip_network(n) for n in ("169.254.0.0/16", "fe80::/10", "0.0.0.0/8", "::/128"))
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
#: IPv6 prefixes whose last 32 bits are an IPv4 address a translator connects to: NAT64's well-known prefix
#: (RFC 6052), its local-use prefix (RFC 8215, as a /96 inside it is used), SIIT's IPv4-translated addresses
#: (RFC 2765); and IPv4-compatible addresses (RFC 4291, deprecated).
_TRANSLATED = tuple(ipaddress.ip_network(n) for n in ("64:ff9b::/96", "64:ff9b:1::/48", "::ffff:0:0:0/96"))
_COMPATIBLE = ipaddress.ip_network("::/96")
#: IETF protocol assignments: not public, although Python counts two addresses of it as global.
_IETF = ipaddress.ip_network("192.0.0.0/24")
_MAX_ALLOW_ENTRIES = 64
_HOST_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9.])?$")


class NeverAllowed(PermissionError):
    """A destination no allow-list entry opens (a metadata endpoint, link-local, this host, the runtime API)."""


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


def _embedded(address: IPAddress) -> Optional[ipaddress.IPv4Address]:
    """The IPv4 address an IPv6 one carries, which is where a connection to it goes: mapped, 6to4, Teredo,
    NAT64 / SIIT translated (:data:`_TRANSLATED`: the last 32 bits), IPv4-compatible (``::/96`` but ``::`` and
    ``::1``); None for an IPv4 address or an IPv6 one that carries none."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    one = address.ipv4_mapped or address.sixtofour or (address.teredo[1] if address.teredo else None)
    if one is None and (any(address in net for net in _TRANSLATED) or (address in _COMPATIBLE and int(address) > 1)):
        one = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return one


def never(address: IPAddress) -> Optional[str]:
    """Why *address* is refused whatever the allow-list says (a metadata endpoint, link-local, this host), or None."""
    inner = _embedded(address)
    if inner is not None:
        return never(inner)
    if any(address in net for net in _METADATA if net.version == address.version):
        return "an instance-metadata address"
    if any(address in net for net in _NEVER if net.version == address.version):
        return "a link-local address" if address.is_link_local else "an unspecified address (this host)"
    return None


def refusal(address: IPAddress) -> Optional[str]:
    """Why *address* is not a public destination (``"a loopback address"``), or None when it is."""
    inner = _embedded(address)
    if inner is not None:  # an IPv4 address inside: judge that one
        return refusal(inner)
    forbidden = never(address)
    if forbidden is not None:
        return forbidden
    v4 = isinstance(address, ipaddress.IPv4Address)
    site_local = isinstance(address, ipaddress.IPv6Address) and address.is_site_local
    checks = (("loopback", address.is_loopback), ("unspecified", address.is_unspecified),
              ("link-local", address.is_link_local), ("IETF protocol assignment", v4 and address in _IETF),
              ("private", address.is_private), ("site-local", site_local),
              ("multicast", address.is_multicast), ("reserved", address.is_reserved),
              ("shared (carrier-grade NAT)", v4 and address in _CGNAT))
    for name, hit in checks:
        if hit:
            return f"an {name} address" if name[0] in "IEU" else f"a {name} address"
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
        PermissionError: the host resolves to an address that is not public and not allowed
            (:class:`NeverAllowed`: one that no allow-list opens).
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
        # no allow-list entry opens the runtime API, a metadata endpoint or a link-local address
        closed = "the Lambda runtime API" if _is_runtime_api(host, address, port) else never(address)
        why = closed or (None if allow.allows(host, address) else refusal(address))
        if why is not None:
            message = f"{host} {verb} {why}" if verb == "is" else f"{host} {verb} {address}, {why}"
            raise NeverAllowed(message) if closed else PermissionError(message)
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
