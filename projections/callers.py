"""What an API process knows of its callers between requests (docs/design.md, "The caller cache").

Authentication needs, for every request, the key's client and workspace (request_rate.CALLER),
whether a route exists (sim_health's route rule) and the client's request rate.  Reading them
was a round trip per request; here they are kept in memory:

- A caller's row and the route are kept while this process listens on the CALLERS channel
  (projections/storage/channels.py).  Every append that changes a client, a workspace's status, rates
  or types, or the SMS switch notifies CALLER in its transaction; every heartbeat and SIM event
  notifies ROUTE.  A notification empties what it names; a row read before it and stored after
  it is not stored (the generation), and nothing is kept while the channel is down.  A route
  the cache holds as lapsed is read again before a request is refused for it, so a heartbeat
  whose notification is still on its way (or a test clock moved past the last one) never costs
  a `503` that the database would not give.  A key
  rotation is therefore refused by every process as soon as its notification arrives, which
  PostgreSQL sends at the rotation's commit.
- The request rate stays counted in the database (request_rate.take), shared by every process.
  A client whose rate is at least `1 / SHARE` per second has a share of it taken at a time, so
  that its requests do not each cost a round trip; a share unused after `SHARE_SECONDS` is
  dropped.  Such a client can therefore be held slightly below its rate (at most one share per
  process), never above it.  A slower client is counted request by request, exactly.
"""
from __future__ import annotations

import time
from typing import Any, Callable, ContextManager

from . import request_rate
from .storage import channels

SHARE = 0.02          # of a fast client's per-second rate, taken at a time by one process
SHARE_SECONDS = 0.25  # how long a taken share may be used


class Callers(channels.Remembered):
    """`database_url`: listen for changes and keep what was read (`sandesh serve`); without
    it every request reads the database (in-process test apps, benchmarks' baselines)."""

    def __init__(self, connection: Callable[[], ContextManager[Any]], route_window: float,
                 database_url: str | None = None):
        self._connection = connection
        self._route_window = route_window
        self._rows: dict[str, dict[str, Any]] = {}
        self._route: list[float | None] = []  # [route_until] once known
        self._shares: dict[str, list[float]] = {}  # client id -> [requests left, usable until (monotonic)]
        super().__init__(database_url, channels.CALLERS, "caller-cache")

    def known(self, key_hash: str, now: float) -> tuple[dict[str, Any], bool] | None:
        """What `find` answers, when the cache holds it (no database read); else None."""
        row, route = self._rows.get(key_hash), self._route
        if row is None or not route or not _open(route[0], now):
            return None
        return row, True

    def find(self, key_hash: str, now: float) -> tuple[dict[str, Any], bool] | None:
        """The key's caller row (request_rate.CALLER) and whether a route exists at `now`;
        None for an unknown key."""
        row, route = self._rows.get(key_hash), self._route
        if row is None or not route or not _open(route[0], now):
            generation = self.generation
            with self._connection() as conn:
                row = request_rate.caller(conn, key_hash, self._route_window)
            if row is None:
                return None
            route = [row["route_until"]]
            self.keep(generation, lambda: self._keep(key_hash, row, route))
        return row, _open(route[0], now)

    def _keep(self, key_hash: str, row: dict[str, Any], route: list[float | None]) -> None:
        self._rows[key_hash] = row
        self._route = route

    def within_share(self, client_id: str) -> bool:
        """Count one request of the client against the share of its rate this process holds;
        False when none is left (then `within_rate` asks the database)."""
        with self.lock:
            share = self._shares.get(client_id)
            if share is not None and share[0] >= 1 and share[1] > time.monotonic():
                share[0] -= 1
                return True
        return False

    def within_rate(self, client_id: str, rate: int, now: float) -> bool:
        """Count one request of the client; False when its rate refuses it."""
        if self.within_share(client_id):
            return True
        want = max(1, int(rate * SHARE))
        with self._connection() as conn:
            granted = request_rate.take(conn, client_id, rate, want, now)
        if granted > 1:
            with self.lock:
                self._shares[client_id] = [granted - 1, time.monotonic() + SHARE_SECONDS]
        return granted >= 1

    def forget(self, payload: str | None) -> None:
        if payload in (channels.ROUTE, None):
            self._route = []
        if payload != channels.ROUTE:
            self._rows, self._shares = {}, {}


def _open(route_until: float | None, now: float) -> bool:
    """Whether the route rule holds at `now` (sim_health.ROUTE_UNTIL)."""
    return route_until is not None and now < route_until
