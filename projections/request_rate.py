"""The per-client request rate (interface §Limits), shared by every process and host.

GCRA on one UNLOGGED row per client: `tat` is the theoretical arrival time of the next request.
A request at `now` is allowed when max(tat, now) + 1/rate - now <= 1 s, i.e. a client may burst
its whole per-second rate at once and then sends at that rate.  One statement, one round trip.
"""
from __future__ import annotations

import math
from typing import Any

BURST_SECONDS = 1.0

_TAKE = """
INSERT INTO request_rates AS r (client_id, tat) VALUES (%(client)s, %(now)s + %(interval)s)
ON CONFLICT (client_id) DO UPDATE SET tat = GREATEST(r.tat, %(now)s) + %(interval)s
 WHERE GREATEST(r.tat, %(now)s) + %(interval)s - %(now)s <= %(burst)s
RETURNING tat
"""


def take(conn: Any, client_id: str, rate: int, now: float) -> int | None:
    """Count one request. None when allowed; otherwise the whole seconds to wait (Retry-After)."""
    interval = 1.0 / rate
    params = {"client": client_id, "now": now, "interval": interval, "burst": BURST_SECONDS}
    if conn.execute(_TAKE, params, prepare=True).fetchone() is not None:
        return None
    row = conn.execute("SELECT tat FROM request_rates WHERE client_id = %s", (client_id,)).fetchone()
    tat = row["tat"] if row else now
    wait = max(tat, now) + interval - now - BURST_SECONDS
    return max(1, math.ceil(wait))
