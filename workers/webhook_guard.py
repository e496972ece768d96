"""The SSRF guard of webhook deliveries (docs/design.md, "Decisions: webhooks").

A webhook URL must be `https://` and its host must resolve to public addresses only: every
special-purpose range of IANA's registries (loopback, private, link-local, shared, multicast,
reserved, documentation, 192.0.0.0/24, ...) is refused, and so is an IPv6 address that carries
one of them (IPv4-mapped, NAT64, 6to4, IPv4-compatible) or is Teredo.  They are refused when
the URL is configured and again when each delivery connects, unless private addresses are
allowed (SANDESH_WEBHOOK_ALLOW_PRIVATE=1, development and tests); no error names an address a
host resolved to.  At delivery the connection is made
to the very address that was checked (TLS still verifies the URL's host name), so a DNS answer
that changes between the check and the connection cannot redirect it.
"""
from __future__ import annotations

import ipaddress
import socket
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as Late
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPSConnection
from urllib3.connectionpool import HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError
from urllib3.util import connection

from sandesh.domain.errors import InvalidInput

from .webhook_deadline import DEADLINES


class AddressRefused(NewConnectionError):
    """The webhook host resolves to an address deliveries may not go to."""

    def __init__(self, conn: Any, why: str):
        super().__init__(conn, why)
        self.why = why


# Not public, by IANA's special-purpose address registries: Python's `is_global` misses some of
# them (192.0.0.8, and IPv4 inside IPv6 such as NAT64 `64:ff9b::a00:1`) on the versions we run.
NOT_PUBLIC_V4 = {
    "this network": "0.0.0.0/8", "private": "10.0.0.0/8 172.16.0.0/12 192.168.0.0/16",
    "shared (carrier-grade NAT)": "100.64.0.0/10", "loopback": "127.0.0.0/8", "link-local": "169.254.0.0/16",
    "IETF protocol assignments": "192.0.0.0/24", "documentation": "192.0.2.0/24 198.51.100.0/24 203.0.113.0/24",
    "6to4 relay anycast": "192.88.99.0/24", "benchmarking": "198.18.0.0/15", "multicast": "224.0.0.0/4",
    "reserved": "240.0.0.0/4",
}
NOT_PUBLIC_V6 = {
    "unspecified or loopback": "::/127", "discard-only": "100::/64", "NAT64 local-use": "64:ff9b:1::/48",
    "IETF protocol assignments (Teredo among them)": "2001::/23", "documentation": "2001:db8::/32 3fff::/20",
    "SRv6 segment identifiers": "5f00::/16", "unique-local (private)": "fc00::/7", "link-local": "fe80::/10",
    "multicast": "ff00::/8",
}
# IPv6 addresses that carry an IPv4 address: it decides, as the packets would go to it.
NAT64 = ipaddress.ip_network("64:ff9b::/96")
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


def _networks(table: dict[str, str]) -> list[tuple[Any, str]]:
    return [(ipaddress.ip_network(net), kind) for kind, nets in table.items() for net in nets.split()]


_NOT_PUBLIC = {4: _networks(NOT_PUBLIC_V4), 6: _networks(NOT_PUBLIC_V6)}


def refused_reason(address: str) -> str | None:
    """Why deliveries may not go to `address` (what kind of address it is, never the address),
    or None for a public one."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    inside = ""
    if isinstance(ip, ipaddress.IPv6Address):
        carried, inside = _carried(ip)
        if carried is not None:
            ip = carried
    kind = next((kind for net, kind in _NOT_PUBLIC[ip.version] if ip in net), None)
    if kind is None and not ip.is_global:
        kind = "not globally reachable"
    return f"{kind}{inside}" if kind else None


def _carried(ip: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address | None, str]:
    """The IPv4 address an IPv6 one carries (IPv4-mapped, NAT64, 6to4, IPv4-compatible), with
    how it is carried."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped, ", as an IPv4-mapped address"
    if ip in NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFF_FFFF), ", inside NAT64"
    if ip.sixtofour is not None:
        return ip.sixtofour, ", inside 6to4"
    if ip in IPV4_COMPATIBLE and int(ip) > 1:
        return ipaddress.IPv4Address(int(ip)), ", as an IPv4-compatible address"
    return None, ""


# getaddrinfo blocks in C and cannot be interrupted: a lookup runs on one of these threads, and
# the attempt waits for it only until its deadline (a slow resolver then finishes it alone).
RESOLVER_THREADS = 8
_resolver = ThreadPoolExecutor(RESOLVER_THREADS, thread_name_prefix="webhook-dns")
CONFIGURATION_LOOKUP = 10.0  # seconds a URL's host may take to resolve at `client create|update`


def resolve(host: str, port: int, timeout: float | None) -> list[str]:
    """The addresses of `host`, in the resolver's order; socket.timeout when they take longer
    than `timeout` seconds."""
    lookup = _resolver.submit(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
    try:
        infos = lookup.result(timeout)
    except Late:
        lookup.cancel()
        raise socket.timeout(f"resolving {host} took over {timeout:.1f} s") from None
    return list(dict.fromkeys(info[4][0] for info in infos))


def public_addresses(host: str, port: int, timeout: float | None) -> list[str]:
    """Every address `host` resolves to; raises ValueError saying what kind of address the first
    one that is not public is (not the address: a developer is not told what an inside name
    resolves to)."""
    addresses = resolve(host, port, timeout)
    for address in addresses:
        reason = refused_reason(address)
        if reason:
            raise ValueError(f"{host} resolves to an address that is not public ({reason}); "
                             "webhooks go to public addresses only")
    return addresses


def check_url(url: str, allow_private: bool) -> None:
    """At configuration (docs/design.md, "Decisions: webhooks"): refuse a host that is private or
    cannot be resolved, and plain http:// (a keyword's reply URL may be one) unless private
    addresses are allowed."""
    if allow_private:
        return
    parts = urlsplit(url)
    if parts.scheme != "https":
        raise InvalidInput("the URL must be https:// (http:// only where SANDESH_WEBHOOK_ALLOW_PRIVATE is set)")
    try:
        public_addresses(parts.hostname or "", parts.port or 443, CONFIGURATION_LOOKUP)
    except (socket.gaierror, socket.timeout):
        raise InvalidInput(f"webhook host {parts.hostname!r} does not resolve") from None
    except ValueError as error:
        raise InvalidInput(str(error)) from None


class WatchedConnection(HTTPSConnection):
    """Resolves its host and connects within what is left of the attempt on its thread, then gives
    the socket to that attempt, which shuts it down at its deadline (workers/webhook_deadline.py):
    a new socket when it connects, the open one when it is used again.  So a host whose resolver
    hangs, or whose many addresses never answer, ends the attempt by its deadline like a
    receiver that drips."""

    def _addresses(self, timeout: float | None) -> list[str]:
        return resolve(self._dns_host, self.port, timeout)

    def _new_conn(self) -> socket.socket:
        try:
            addresses = self._addresses(DEADLINES.remaining())
        except socket.timeout:
            raise ConnectTimeoutError(self, f"resolving {self.host} timed out") from None
        except socket.gaierror as error:
            raise NewConnectionError(self, f"{self._dns_host} does not resolve: {error}") from error
        last: Exception | None = None
        for address in addresses:
            timeout = _within(self.timeout, DEADLINES.remaining())
            if timeout == 0:
                break
            try:
                return DEADLINES.watched(connection.create_connection((address, self.port), timeout,
                                                                      source_address=self.source_address,
                                                                      socket_options=self.socket_options))
            except socket.timeout:
                last = ConnectTimeoutError(self, f"connecting to {self.host} timed out")
            except OSError as error:
                last = NewConnectionError(self, f"connecting to {self.host}: {error.strerror or type(error).__name__}")
        raise last or ConnectTimeoutError(self, f"connecting to {self.host} timed out")

    def request(self, *args: Any, **kwargs: Any) -> None:
        if self.sock is not None:
            DEADLINES.watched(self.sock)
        super().request(*args, **kwargs)


def _within(timeout: Any, remaining: float | None) -> float | None:
    """A connect's timeout: the connection's own (a number, or None for none), cut to what is left."""
    own = timeout if isinstance(timeout, (int, float)) else None
    if remaining is None:
        return own
    return remaining if own is None else min(own, remaining)


class GuardedConnection(WatchedConnection):
    """Connects only to addresses checked just now; TLS verifies the URL's host name as usual."""

    def _addresses(self, timeout: float | None) -> list[str]:
        try:
            return public_addresses(self._dns_host, self.port, timeout)
        except ValueError as error:
            raise AddressRefused(self, str(error)) from None


class WatchedPool(HTTPSConnectionPool):
    ConnectionCls = WatchedConnection


class GuardedPool(HTTPSConnectionPool):
    ConnectionCls = GuardedConnection


class _Adapter(HTTPAdapter):
    """https through `pool_class`'s connections."""
    pool_class: type[HTTPSConnectionPool] = WatchedPool

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {**self.poolmanager.pool_classes_by_scheme,
                                                   "https": self.pool_class}


class WatchedAdapter(_Adapter):
    pool_class = WatchedPool


class GuardedAdapter(_Adapter):
    pool_class = GuardedPool


def session(allow_private: bool, ca_bundle: str | None, pool: int = 16) -> requests.Session:
    """The HTTP session of the webhook sender: https only, certificates verified (against
    REQUESTS_CA_BUNDLE when set), no proxies from the environment, the guard unless allowed,
    each connection's socket shut down at its attempt's deadline (`DEADLINES.within`)."""
    http = requests.Session()
    http.trust_env = False
    http.verify = ca_bundle or True
    http.mount("http://", _Refuse())
    adapter = (WatchedAdapter if allow_private else GuardedAdapter)(pool_connections=pool, pool_maxsize=pool,
                                                                   max_retries=0)
    http.mount("https://", adapter)
    return http


class _Refuse(HTTPAdapter):
    def send(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        raise requests.exceptions.InvalidURL("webhook URLs must be https://")


def describe(error: requests.RequestException) -> str:
    """urllib3's reason (e.g. the guard's, or a certificate's), not requests' wrapping of it."""
    reason = getattr(error.args[0] if error.args else None, "reason", None) or error
    if isinstance(reason, AddressRefused):
        return f"{type(error).__name__}: refused: {reason.why}"
    return f"{type(error).__name__}: {reason}"[:300]
