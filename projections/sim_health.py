"""What dispatchers report about their SIMs (the UNLOGGED `sim_health` table), the route rule
read from it, and the pool as a dispatcher or an operator sees it.  Not a projection of the
log: a dispatcher writes it on every heartbeat.

Owns `sim_health`.  Reads, joined to it: registry.py's `sims` (the route rule, the pool) and
dispatch.py's `sent_parts` (the parts each SIM used in the pacing window).

A route (without one a send answers 503 unavailable: docs/api.md, "Order of checks") is an
enabled SIM, not quarantined, that a dispatcher reported healthy within the route window
(`Settings.route_window`, SANDESH_ROUTE_WINDOW) of the service clock.  A SIM no dispatcher has reported on is no route:
nothing would send its messages.
"""
from __future__ import annotations

from typing import Any

from sandesh.domain.pacing import PARTS_PER_WINDOW, WINDOW_SECONDS

from .storage.channels import CALLERS, ROUTE

DDL = """
CREATE UNLOGGED TABLE IF NOT EXISTS sim_health (
    sim_id text PRIMARY KEY, healthy boolean NOT NULL, registered boolean, signal_dbm integer,
    iccid text, last_error text, dispatcher text, heartbeat_at double precision NOT NULL);
ALTER TABLE sim_health ADD COLUMN IF NOT EXISTS reachable boolean NOT NULL DEFAULT true;
ALTER TABLE sim_health ADD COLUMN IF NOT EXISTS unreachable_since double precision;
ALTER TABLE sim_health ADD COLUMN IF NOT EXISTS resting_until double precision,
    ADD COLUMN IF NOT EXISTS resting_reason text, ADD COLUMN IF NOT EXISTS parts_today integer,
    ADD COLUMN IF NOT EXISTS parts_month integer;
"""

# On `sim_health h`, with the parameters %(now)s and %(route_window)s.
HEALTHY = "(h.healthy AND h.heartbeat_at > %(now)s - %(route_window)s)"

# Until when the route rule holds, without reading the clock: the last healthy heartbeat of a
# usable SIM plus the route window (NULL: no SIM was ever healthy).  With %(route_window)s.
ROUTE_UNTIL = ("(SELECT max(h.heartbeat_at) + %(route_window)s FROM sims s JOIN sim_health h ON h.sim_id = s.id"
               " WHERE s.enabled AND s.quarantine IS NULL AND h.healthy)")
HAS_ROUTE = f"COALESCE({ROUTE_UNTIL} > %(now)s, false)"  # the same rule, read at %(now)s

# Every heartbeat tells the API processes' caller caches that the route may have changed
# (projections/callers.py).
_RECORD = """
WITH recorded AS (
INSERT INTO sim_health (sim_id, healthy, registered, signal_dbm, iccid, last_error, dispatcher, heartbeat_at,
                        reachable, unreachable_since, resting_until, resting_reason, parts_today, parts_month)
VALUES (%(sim)s, %(healthy)s, %(registered)s, %(signal)s, NULL, %(error)s, %(dispatcher)s, %(at)s, %(reachable)s,
        CASE WHEN %(reachable)s THEN NULL ELSE %(at)s END, %(resting_until)s, %(resting_reason)s,
        %(parts_today)s, %(parts_month)s)
ON CONFLICT (sim_id) DO UPDATE SET
    healthy = excluded.healthy, registered = excluded.registered, signal_dbm = excluded.signal_dbm,
    last_error = excluded.last_error, dispatcher = excluded.dispatcher, heartbeat_at = excluded.heartbeat_at,
    reachable = excluded.reachable, resting_until = excluded.resting_until, resting_reason = excluded.resting_reason,
    parts_today = excluded.parts_today, parts_month = excluded.parts_month,
    unreachable_since = CASE WHEN excluded.reachable THEN NULL
                             ELSE coalesce(sim_health.unreachable_since, excluded.heartbeat_at) END
RETURNING 1)
SELECT pg_notify('{CALLERS}', '{ROUTE}') FROM recorded
""".format(CALLERS=CALLERS, ROUTE=ROUTE)

_POOL = f"""
SELECT s.*, h.healthy, h.registered, h.signal_dbm, h.last_error, h.heartbeat_at, h.dispatcher,
       coalesce(h.reachable, true) AS reachable, h.unreachable_since, h.resting_until, h.resting_reason,
       h.parts_today, h.parts_month,
       coalesce({HEALTHY}, false) AS fresh_and_healthy,
       (h.heartbeat_at > %(now)s - %(route_window)s) AS reported,
       (SELECT count(*) FROM sent_parts p WHERE p.sim_id = s.id AND p.at > %(now)s - {WINDOW_SECONDS}) AS parts_used
FROM sims s LEFT JOIN sim_health h ON h.sim_id = s.id
ORDER BY s.created_at
"""


def record(conn: Any, sim_id: str, *, healthy: bool, registered: bool | None, signal_dbm: int | None,
           last_error: str | None, dispatcher: str, at: float, reachable: bool = True,
           resting_until: float | None = None, resting_reason: str | None = None,
           parts_today: int | None = None, parts_month: int | None = None) -> None:
    """One heartbeat: how the SIM is, whether its modem answers, until when it rests at a cap of its
    plan, its parts today and this month, by whom and when (service clock)."""
    conn.execute(_RECORD, {"sim": sim_id, "healthy": healthy, "registered": registered, "signal": signal_dbm,
                           "error": last_error, "dispatcher": dispatcher, "at": at, "reachable": reachable,
                           "resting_until": resting_until, "resting_reason": resting_reason,
                           "parts_today": parts_today, "parts_month": parts_month})


def has_route(conn: Any, now: float, route_window: float) -> bool:
    """Whether any SIM is a route now (what a send's route check asks, for GET /v1/ready)."""
    return conn.execute(f"SELECT {HAS_ROUTE} AS route", {"now": now, "route_window": route_window}).fetchone()["route"]


def pool(conn: Any, now: float, route_window: float) -> list[dict[str, Any]]:
    """Every SIM with its registry row, its last heartbeat, its parts in the pacing window, and
    `state`, `reason`, `since` as `sandesh sim list` shows them."""
    rows = conn.execute(_POOL, {"now": now, "route_window": route_window}).fetchall()
    for row in rows:
        row["state"], row["reason"], row["since"] = state(row, now)
        row["usable"] = row["state"] == "active" and row["fresh_and_healthy"]
        row["has_room"] = row["usable"] and row["parts_used"] < (row["pace"] or PARTS_PER_WINDOW)
    return rows


STATES = ("active", "resting", "disabled", "quarantined", "unreachable")  # what state() answers


def state(row: dict[str, Any], now: float) -> tuple[str, str | None, float | None]:
    """`disabled` and `quarantined` are decisions in the log; `unreachable` is what the last
    heartbeat says of the modem (or that no dispatcher reports on the SIM); `resting` that it
    reached a daily or monthly cap of its plan, until `resting_until`; else `active`."""
    if not row["enabled"]:
        return "disabled", None, row["state_since"]
    if row["quarantine"] is not None:
        return "quarantined", row["quarantine_reason"], row["state_since"]
    if not row["reachable"]:
        return "unreachable", row["last_error"], row["unreachable_since"]
    if not row["reported"]:
        return "unreachable", "no dispatcher has reported on it within the route window", row["heartbeat_at"]
    if row["resting_until"] is not None and row["resting_until"] > now:
        return "resting", row["resting_reason"], row["heartbeat_at"]
    return "active", None, row["state_since"]
