"""The per-client request rate (docs/api.md, "Limits"), shared by every process and host, and
the caller's row that authentication reads (docs/design.md, "The caller cache").

GCRA on one UNLOGGED row per client: `tat` is the theoretical arrival time of the next request.
A request at `now` is allowed when max(tat, now) + 1/rate - now <= 1 s, i.e. a client may burst
its whole per-second rate at once and then sends at that rate.  `take` counts several requests
at once: it grants as many of them as that rule allows, up to the number asked for (the API's
caller cache takes a share of a fast client's rate at a time, projections/callers.py).

`CALLER` reads the key's client and workspace, the state a send is decided on, and until when
the route rule of `sim_health` holds (`route_until`).

Owns `request_rates`.  Reads, in `CALLER`: registry.py's `clients`, `workspaces`, `sms_switch`
and `sims`, and sim_health.py's `sim_health`.
"""
from __future__ import annotations

import math
from typing import Any

from sandesh.domain.ports import Caller
from sandesh.domain.promo_hours import parse as parse_promo_hours

from .sim_health import ROUTE_UNTIL

BURST_SECONDS = 1.0
# A grant is computed in floating point on epoch seconds (~2e-7 s apart): this much of one
# request is forgiven, so the rate's last request in a second is never lost to rounding.
SLACK = 1e-3

DDL = """
CREATE UNLOGGED TABLE IF NOT EXISTS request_rates (
    client_id text PRIMARY KEY, tat double precision NOT NULL);
ALTER TABLE request_rates ADD COLUMN IF NOT EXISTS granted integer NOT NULL DEFAULT 1;
"""

_CALLER = f"""
SELECT c.id, c.workspace_id, c.brand, c.rate_limit, c.enabled, c.otp_template, c.otp_web_domain, c.compat_type,
       w.status, w.rates, w.types, w.promo_hours,
       COALESCE((SELECT enabled FROM sms_switch LIMIT 1), true) AS sms_enabled,
       {ROUTE_UNTIL} AS route_until
FROM clients c JOIN workspaces w ON w.id = c.workspace_id WHERE {{where}}
"""
CALLER = _CALLER.format(where="c.key_hash = %(key_hash)s")
CALLER_OF_CLIENT = _CALLER.format(where="c.id = %(client_id)s")

# How many of `want` requests fit at `now`: LEAST(want, floor(room * rate)), room being what is
# left of the burst after the requests already counted.
_FIT = "LEAST(%(want)s, floor((%(burst)s + %(now)s - {tat}) * %(rate)s + %(slack)s))::integer"
TAKE = f"""
INSERT INTO request_rates AS r (client_id, tat, granted)
VALUES (%(client)s, %(now)s + {_FIT.format(tat="%(now)s")}::double precision / %(rate)s, {_FIT.format(tat="%(now)s")})
ON CONFLICT (client_id) DO UPDATE
   SET tat = GREATEST(r.tat, %(now)s) + {_FIT.format(tat="GREATEST(r.tat, %(now)s)")}::double precision / %(rate)s,
       granted = {_FIT.format(tat="GREATEST(r.tat, %(now)s)")}
 WHERE {_FIT.format(tat="GREATEST(r.tat, %(now)s)")} >= 1
RETURNING granted
"""


def caller(conn: Any, key_hash: str, route_window: float) -> dict[str, Any] | None:
    """The key's client with its workspace's state and `route_until`, or None for an unknown key."""
    return conn.execute(CALLER, {"key_hash": key_hash, "route_window": route_window}, prepare=True).fetchone()


def client_caller(conn: Any, client_id: str, route_window: float, now: float) -> Caller | None:
    """The client as a caller, as its key would make it (a keyword's answer is sent so:
    workers/services.py); None for a client unknown or disabled."""
    row = conn.execute(CALLER_OF_CLIENT, {"client_id": client_id, "route_window": route_window}).fetchone()
    return None if row is None or not row["enabled"] else caller_of(row, row["route_until"] is not None and now < row["route_until"])


def caller_of(row: dict[str, Any], has_route: bool) -> Caller:
    """The Caller of a `CALLER` row."""
    return Caller(row["id"], row["workspace_id"], row["brand"], row["status"], row["rates"], row["types"],
                  row["sms_enabled"], has_route, parse_promo_hours(row["promo_hours"]), row["otp_template"],
                  row["otp_web_domain"], row["compat_type"])


def take(conn: Any, client_id: str, rate: int, want: int, now: float) -> int:
    """Count up to `want` requests of the client at `now`; how many the rate allows (0: none)."""
    row = conn.execute(TAKE, {"client": client_id, "rate": rate, "want": want, "now": now, "burst": BURST_SECONDS,
                              "slack": SLACK}, prepare=True).fetchone()
    return row["granted"] if row else 0


def retry_after(conn: Any, client_id: str, rate: int, now: float) -> int:
    """Whole seconds until the next request of a limited client is allowed (Retry-After), at least 1."""
    row = conn.execute("SELECT tat FROM request_rates WHERE client_id = %s", (client_id,)).fetchone()
    tat = row["tat"] if row else now
    return max(1, math.ceil(max(tat, now) + 1.0 / rate - now - BURST_SECONDS))
