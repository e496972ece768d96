"""What the operator team's console reads (docs/dashboard.md, "The operator team's console"):
each workspace's last activity, each SIM's messages sent today, and the messages accepted and
sent per minute.  Reads only,
of tables other modules own (messages.py's `messages`, registry.py's `clients` and `sims`,
dispatch.py's `sent_parts`); every query walks an index per client or per SIM over a bounded
window, so its cost follows the clients, the SIMs and the window, never the history."""
from __future__ import annotations

from typing import Any

MINUTE = 60.0

# The newest message of each client (index messages_client_newest), the newest of each workspace.
_LAST_ACTIVITY = """
SELECT c.workspace_id, max(m.created_at) AS last_at
FROM clients c
CROSS JOIN LATERAL (SELECT created_at FROM messages WHERE client_id = c.id ORDER BY created_at DESC LIMIT 1) m
GROUP BY c.workspace_id
"""

_ACCEPTED = """
SELECT floor((m.created_at - %(since)s) / 60)::int AS minute, count(*) AS n
FROM clients c
CROSS JOIN LATERAL (SELECT created_at FROM messages WHERE client_id = c.id AND created_at > %(since)s) m
GROUP BY 1
"""

# A message counts as sent in the minute the network accepted one of its parts (index sent_parts_sim).
_SENT = """
SELECT floor((p.at - %(since)s) / 60)::int AS minute, count(DISTINCT p.message_id) AS n
FROM sims s
CROSS JOIN LATERAL (SELECT at, message_id FROM sent_parts WHERE sim_id = s.id AND at > %(since)s) p
GROUP BY 1
"""

_SENT_SINCE = """
SELECT s.id AS sim_id, p.messages, p.parts
FROM sims s
CROSS JOIN LATERAL (SELECT count(DISTINCT message_id) AS messages, count(*) AS parts FROM sent_parts
                    WHERE sim_id = s.id AND at >= %(since)s) p
"""


def last_activity(conn: Any) -> dict[str, float]:
    """When each workspace's newest message was accepted (workspaces without one are missing)."""
    return {r["workspace_id"]: r["last_at"] for r in conn.execute(_LAST_ACTIVITY).fetchall()}


def sent_since(conn: Any, since: float) -> dict[str, dict[str, int]]:
    """Per SIM, the messages and parts the network accepted from it since `since` (its Nepal day)."""
    return {r["sim_id"]: {"messages": r["messages"], "parts": r["parts"]}
            for r in conn.execute(_SENT_SINCE, {"since": since}).fetchall()}


def per_minute(conn: Any, now: float, minutes: int) -> tuple[list[int], list[int]]:
    """Messages accepted and messages sent in each of the last `minutes` minutes, oldest first."""
    since = now - minutes * MINUTE
    return _counts(conn, _ACCEPTED, since, minutes), _counts(conn, _SENT, since, minutes)


def _counts(conn: Any, query: str, since: float, minutes: int) -> list[int]:
    counts = [0] * minutes
    for row in conn.execute(query, {"since": since}).fetchall():
        if 0 <= row["minute"] < minutes:
            counts[row["minute"]] += row["n"]
    return counts
