"""The SSRF guard of webhook deliveries (docs/design.md, "Decisions: webhooks").

A webhook URL must be `https://` and its host must resolve to public addresses only: loopback,
private, link-local, shared, multicast and reserved addresses are refused when the URL is
configured and again when each delivery connects, unless private addresses are allowed
(SANDESH_WEBHOOK_ALLOW_PRIVATE=1, development and tests).  At delivery the connection is made
to the very address that was checked (TLS still verifies the URL's host name), so a DNS answer
that changes between the check and the connection cannot redirect it.
"""
from __future__ import annotations

import ipaddress
import socket
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPSConnection
from urllib3.connectionpool import HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError
from urllib3.util import connection

from sandesh.domain.errors import InvalidInput


class AddressRefused(NewConnectionError):
    """The webhook host resolves to an address deliveries may not go to."""

    def __init__(self, conn: Any, why: str):
        super().__init__(conn, why)
        self.why = why


def refused_reason(address: str) -> str | None:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_global and not ip.is_multicast:
        return None
    kind = next((name for name in ("loopback", "private", "link_local", "multicast", "reserved", "unspecified")
                 if getattr(ip, f"is_{name}")), "not public")
    return f"{address} is {kind.replace('_', '-')}"


def resolve(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(info[4][0] for info in infos))


def public_addresses(host: str, port: int) -> list[str]:
    """Every address `host` resolves to; raises ValueError naming the first one that is not public."""
    addresses = resolve(host, port)
    for address in addresses:
        reason = refused_reason(address)
        if reason:
            raise ValueError(f"{host} resolves to {reason}; webhooks go to public addresses only")
    return addresses


def check_url(url: str, allow_private: bool) -> None:
    """At configuration (docs/design.md, "Decisions: webhooks"): refuse a host that is private or cannot be resolved."""
    if allow_private:
        return
    parts = urlsplit(url)
    try:
        public_addresses(parts.hostname or "", parts.port or 443)
    except socket.gaierror:
        raise InvalidInput(f"webhook host {parts.hostname!r} does not resolve") from None
    except ValueError as error:
        raise InvalidInput(str(error)) from None


class GuardedConnection(HTTPSConnection):
    """Connects only to addresses checked just now; TLS verifies the URL's host name as usual."""

    def _new_conn(self) -> socket.socket:
        try:
            addresses = public_addresses(self._dns_host, self.port)
        except socket.gaierror as error:
            raise NewConnectionError(self, f"{self._dns_host} does not resolve: {error}") from error
        except ValueError as error:
            raise AddressRefused(self, str(error)) from None
        last: Exception | None = None
        for address in addresses:
            try:
                return connection.create_connection((address, self.port), self.timeout,
                                                    source_address=self.source_address,
                                                    socket_options=self.socket_options)
            except socket.timeout:
                last = ConnectTimeoutError(self, f"connecting to {self.host} ({address}) timed out")
            except OSError as error:
                last = NewConnectionError(self, f"connecting to {self.host} ({address}): {error}")
        raise last or NewConnectionError(self, f"{self.host} has no address")


class GuardedPool(HTTPSConnectionPool):
    ConnectionCls = GuardedConnection


class GuardedAdapter(HTTPAdapter):
    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {**self.poolmanager.pool_classes_by_scheme, "https": GuardedPool}


def session(allow_private: bool, ca_bundle: str | None, pool: int = 16) -> requests.Session:
    """The HTTP session of the webhook sender: https only, certificates verified (against
    REQUESTS_CA_BUNDLE when set), no proxies from the environment, the guard unless allowed."""
    http = requests.Session()
    http.trust_env = False
    http.verify = ca_bundle or True
    http.mount("http://", _Refuse())
    adapter = (HTTPAdapter if allow_private else GuardedAdapter)(pool_connections=pool, pool_maxsize=pool,
                                                                max_retries=0)
    http.mount("https://", adapter)
    return http


class _Refuse(HTTPAdapter):
    def send(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        raise requests.exceptions.InvalidURL("webhook URLs must be https://")
