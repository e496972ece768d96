"""The per-client request rate (docs/api.md, "Limits"), shared by every process and host.

GCRA on one UNLOGGED row per client: `tat` is the theoretical arrival time of the next request.
A request at `now` is allowed when max(tat, now) + 1/rate - now <= 1 s, i.e. a client may burst
its whole per-second rate at once and then sends at that rate.

`CALLER` authenticates and counts the request in one statement (one round trip): the key's
client and workspace, the state a send is decided on, and whether the request is within the
rate.  Only requests of an enabled client are counted.  `has_route` applies the route
rule of `sim_health` with the route window the caller passes.

Owns `request_rates`.  Reads, joined in `CALLER`: registry.py's `clients`, `workspaces`,
`sms_switch` and `sims`, and sim_health.py's `sim_health`.
"""
from __future__ import annotations

import math
from typing import Any

from .sim_health import HAS_ROUTE

BURST_SECONDS = 1.0

DDL = """
CREATE UNLOGGED TABLE IF NOT EXISTS request_rates (
    client_id text PRIMARY KEY, tat double precision NOT NULL);
"""

CALLER = f"""
WITH caller AS (
    SELECT c.id, c.workspace_id, c.brand, c.rate_limit, c.enabled, w.status, w.rates, w.types,
           COALESCE((SELECT enabled FROM sms_switch LIMIT 1), true) AS sms_enabled,
           {HAS_ROUTE} AS has_route
    FROM clients c JOIN workspaces w ON w.id = c.workspace_id WHERE c.key_hash = %(key_hash)s),
counted AS (
    INSERT INTO request_rates AS r (client_id, tat)
    SELECT id, %(now)s + 1.0 / rate_limit FROM caller WHERE enabled AND %(limit)s
    ON CONFLICT (client_id) DO UPDATE SET tat = GREATEST(r.tat, %(now)s) + (excluded.tat - %(now)s)
     WHERE GREATEST(r.tat, %(now)s) + (excluded.tat - %(now)s) - %(now)s <= %(burst)s
    RETURNING tat)
SELECT caller.*, (NOT %(limit)s OR NOT caller.enabled OR EXISTS (SELECT 1 FROM counted)) AS within_rate FROM caller
"""


def caller(conn: Any, key_hash: str, now: float, route_window: float, limit: bool = True) -> dict[str, Any] | None:
    """The authenticated caller with `within_rate` and `has_route`, or None for an unknown key."""
    return conn.execute(CALLER, {"key_hash": key_hash, "now": now, "limit": limit, "burst": BURST_SECONDS,
                                 "route_window": route_window}, prepare=True).fetchone()


def retry_after(conn: Any, client_id: str, rate: int, now: float) -> int:
    """Whole seconds until the next request of a limited client is allowed (Retry-After), at least 1."""
    row = conn.execute("SELECT tat FROM request_rates WHERE client_id = %s", (client_id,)).fetchone()
    tat = row["tat"] if row else now
    return max(1, math.ceil(max(tat, now) + 1.0 / rate - now - BURST_SECONDS))
