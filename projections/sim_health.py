"""What dispatchers report about their SIMs (the UNLOGGED `sim_health` table), and the route rule
read from it.  Not a projection of the log: a dispatcher writes it on every heartbeat.

A route (interface §POST /sms/send rule 5) is an enabled SIM that a dispatcher reported healthy
within the route window (`Settings.route_window`, SANDESH_ROUTE_WINDOW) of the service clock.
A SIM no dispatcher has reported on is no route: nothing would send its messages.
"""
from __future__ import annotations

from typing import Any

# On `sim_health h`, with the parameters %(now)s and %(route_window)s.
HEALTHY = "(h.healthy AND h.heartbeat_at > %(now)s - %(route_window)s)"

HAS_ROUTE = f"EXISTS (SELECT 1 FROM sims s JOIN sim_health h ON h.sim_id = s.id WHERE s.enabled AND {HEALTHY})"

_RECORD = """
INSERT INTO sim_health (sim_id, healthy, registered, signal_dbm, iccid, last_error, dispatcher, heartbeat_at)
VALUES (%s, %s, %s, %s, NULL, %s, %s, %s)
ON CONFLICT (sim_id) DO UPDATE SET
    healthy = excluded.healthy, registered = excluded.registered, signal_dbm = excluded.signal_dbm,
    last_error = excluded.last_error, dispatcher = excluded.dispatcher, heartbeat_at = excluded.heartbeat_at
"""


def record(conn: Any, sim_id: str, *, healthy: bool, registered: bool | None, signal_dbm: int | None,
           last_error: str | None, dispatcher: str, at: float) -> None:
    """One heartbeat: how the SIM is, by whom and when (service clock)."""
    conn.execute(_RECORD, (sim_id, healthy, registered, signal_dbm, last_error, dispatcher, at))
