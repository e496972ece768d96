"""The sign-in forms' first door (docs/dashboard.md, "Signing in"): posts from an address or
its network past their allowance (domain/signin.py, ADDRESS_POSTS and NETWORK_POSTS) are
answered at once from this process's memory, before the form is read, a try recorded or a page
rendered: a short 429 with Retry-After.  What passes meets the recorded throttle
(domain/signin.py) and the password checks' queue (api/waiting.py, Hashing) as before."""
from __future__ import annotations

import math
from typing import Callable

import falcon.asgi
from markupsafe import escape

from sandesh.domain.signin import (ADDRESS_POSTS, ADDRESS_WINDOW, NETWORK_POSTS, NETWORK_WINDOW, address_group,
                                   address_network, gcra)

from . import i18n
from .i18n import _

KEPT = 100_000  # keys remembered per table before the ones whose allowance is whole again are dropped

REFUSED = ("<!doctype html><html lang=\"{language}\"><meta charset=\"utf-8\"><title>{title}</title>"
           "<p>{text}</p></html>")
# The refusal in each language (i18n.py): a catalog's lookup, nothing rendered
SAYERS = {language: i18n.sayer(translations) for language, translations in i18n.CATALOGS.items()}


class Gate:
    """On the event loop only: the theoretical arrival times of addresses and networks."""

    def __init__(self, clock: Callable[[], float]):
        self.clock = clock
        self._addresses: dict[str, float] = {}
        self._networks: dict[str, float] = {}

    def wait(self, ip: str) -> int:
        """0 when a post from `ip` may go on (and it is counted); else whole seconds to wait.
        Behind a proxy not named in SANDESH_TRUSTED_PROXIES every visitor is the proxy's address
        and shares one allowance (docs/operations.md, "Production")."""
        now = self.clock()
        network, address = address_network(ip), address_group(ip)
        network_tat, network_wait = gcra(self._networks.get(network), now, NETWORK_POSTS, NETWORK_WINDOW)
        address_tat, address_wait = gcra(self._addresses.get(address), now, ADDRESS_POSTS, ADDRESS_WINDOW)
        if network_wait or address_wait:
            return max(1, math.ceil(max(network_wait, address_wait)))
        self._keep(self._networks, network, network_tat, now)
        self._keep(self._addresses, address, address_tat, now)
        return 0

    def waiting(self, ip: str) -> int:
        """Whole seconds before `ip` may post again, counting nothing: a sign-in page asked for
        by an address past its allowance is answered as its post would be, unrendered."""
        now = self.clock()
        waits = [gcra(table.get(key), now, allowed, window)[1] for table, key, allowed, window in (
            (self._networks, address_network(ip), NETWORK_POSTS, NETWORK_WINDOW),
            (self._addresses, address_group(ip), ADDRESS_POSTS, ADDRESS_WINDOW))]
        return max(1, math.ceil(max(waits))) if max(waits) > 0 else 0

    @staticmethod
    def _keep(table: dict[str, float], key: str, tat: float, now: float) -> None:
        table[key] = tat
        if len(table) > KEPT:  # a key whose time is past has its whole allowance: forgetting it changes nothing
            for stale in [k for k, t in table.items() if t <= now]:
                del table[stale]
            if len(table) > KEPT:
                table.clear()

    def refuse(self, resp: falcon.asgi.Response, wait: int, language: str = i18n.ENGLISH) -> None:
        """The short 429 page, in `language` (the browser's: its cookie, its Accept-Language)."""
        language = language if language in SAYERS else i18n.ENGLISH
        said = SAYERS[language]
        resp.status = falcon.HTTP_429
        resp.content_type = falcon.MEDIA_HTML
        resp.text = REFUSED.format(
            language=language, title=escape(said(_("Too many tries"))),
            text=escape(said(_("Too many sign-in tries from your network. Wait %(seconds)s seconds and try again.",
                               seconds=wait))))
        resp.set_header("Content-Language", language)
        resp.set_header("Retry-After", str(wait))
