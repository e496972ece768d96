"""Read model of webhook deliveries: what is due, and 7 days of history (docs/api.md, "Retries").

Written inline with the deliveries' events, so the sender finds due deliveries without lag
and several senders lease them with SKIP LOCKED.  Rows older than 7 days are forgotten
(`purge`); the log keeps their events.

Owns `webhook_deliveries` (`MODEL`), part of registry.py's inline projection; reads `clients`
(registry.py) for a workspace's deliveries and for the workspace's share of the sender.
"""
from __future__ import annotations

from typing import Any, Callable, ContextManager

import orjson

from sandesh.domain.clock import iso
from sandesh.domain.webhook import HISTORY, WebhookDelivery

from .contract import ReadModel
from .rows import JsonAppend, Rows, Table


def retained(now: float) -> str:
    """The rows the live model keeps (`purge` drops older ones; a replay makes them again)."""
    return f"created_at >= {float(now - HISTORY)!r}"


DDL = """
CREATE TABLE IF NOT EXISTS webhook_deliveries (
    id text PRIMARY KEY, client_id text NOT NULL, event_type text NOT NULL, subject text NOT NULL,
    status text, redelivery_of text, state text NOT NULL, attempts integer NOT NULL DEFAULT 0,
    history jsonb NOT NULL DEFAULT '[]', next_at double precision, leased_until double precision,
    created_at double precision NOT NULL, updated_at double precision NOT NULL);
CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries (next_at) WHERE next_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS webhook_deliveries_client ON webhook_deliveries (client_id, created_at);
CREATE INDEX IF NOT EXISTS webhook_deliveries_client_due ON webhook_deliveries (client_id, next_at)
    WHERE next_at IS NOT NULL;
-- The deliveries given up, by when (the notifier's webhooks_dead, projections/alerts.py).
CREATE INDEX IF NOT EXISTS webhook_deliveries_dead ON webhook_deliveries (updated_at) WHERE state = 'dead';
"""


MODEL = ReadModel(
    tables={"webhook_deliveries": Table("webhook_deliveries", ("id",))}, ddl=DDL,
    # Written by the sender's lease, not by events: `sandesh replay --check` leaves it out.
    working_columns={"webhook_deliveries": ("leased_until",)},
    retained={"webhook_deliveries": retained})


@MODEL.on(WebhookDelivery.Created)
def _created(rows: Rows, e: WebhookDelivery.Created) -> None:
    rows.insert("webhook_deliveries", {
        "id": e.originator_id, "client_id": e.client_id, "event_type": e.event_type, "subject": e.subject,
        "status": e.status, "redelivery_of": e.redelivery_of, "state": "attempting",
        "next_at": e.at if e.due is None else e.due,
        "created_at": e.at, "updated_at": e.at}, on_conflict="nothing")


@MODEL.on(WebhookDelivery.Attempted)
def _attempted(rows: Rows, e: WebhookDelivery.Attempted) -> None:
    attempt = {"attempt": e.attempt, "at": iso(e.at), "statusCode": e.status_code, "error": e.error,
               "durationMs": round(e.duration * 1000)}
    rows.update("webhook_deliveries", (e.originator_id,), {
        "state": e.state, "attempts": e.attempt, "next_at": e.next_at, "leased_until": None,
        "history": JsonAppend([attempt]), "updated_at": e.at})


@MODEL.on(WebhookDelivery.Hurried)
def _hurried(rows: Rows, e: WebhookDelivery.Hurried) -> None:
    rows.update("webhook_deliveries", (e.originator_id,), {"state": "attempting", "next_at": e.next_at,
                                                           "leased_until": None, "updated_at": e.at})


# The oldest due deliveries, a bounded window of them, ranked by each client's room, then by
# each workspace's room (a workspace's clients share it).
LEASE = """
UPDATE webhook_deliveries d SET leased_until = %(until)s FROM (
    SELECT id, workspace_id FROM (
        SELECT id, next_at, workspace_id, wroom,
               row_number() OVER (PARTITION BY workspace_id ORDER BY next_at) AS wnth
        FROM (
            SELECT id, next_at, workspace_id,
                   row_number() OVER (PARTITION BY client_id ORDER BY next_at) AS nth,
                   %(per_client)s - COALESCE((%(held)s::jsonb ->> client_id)::integer, 0) AS room,
                   %(per_workspace)s - COALESCE((%(held_workspaces)s::jsonb ->> workspace_id)::integer, 0) AS wroom
            FROM (SELECT d.id, d.client_id, c.workspace_id, d.next_at
                  FROM webhook_deliveries d JOIN clients c ON c.id = d.client_id
                  WHERE d.next_at <= %(now)s AND (d.leased_until IS NULL OR d.leased_until <= %(now)s)
                  ORDER BY d.next_at LIMIT %(scan)s FOR UPDATE OF d SKIP LOCKED) candidates) by_client
        WHERE nth <= room) by_workspace
    WHERE wnth <= wroom ORDER BY next_at LIMIT %(limit)s) due
WHERE d.id = due.id RETURNING d.id, d.client_id, due.workspace_id
"""


# The clients with deliveries waiting, one index entry each (webhook_deliveries_client_due): a
# loose index scan, for a query's WITH RECURSIVE.
WAITING_CLIENTS = """waiting(client_id) AS (
    (SELECT client_id FROM webhook_deliveries WHERE next_at IS NOT NULL ORDER BY client_id LIMIT 1)
  UNION ALL
    SELECT (SELECT d.client_id FROM webhook_deliveries d WHERE d.next_at IS NOT NULL AND d.client_id > w.client_id
            ORDER BY d.client_id LIMIT 1)
    FROM waiting w WHERE w.client_id IS NOT NULL)"""

# While a client or a workspace is at its share: the clients with deliveries waiting (one index
# entry each, a loose index scan), then for each the oldest due that it and its workspace have
# room for.  A client at its share then costs a lease one index entry however many of its
# deliveries are due, where LEASE would skip them one by one (a slow receiver's backlog, due
# before everyone else's).
LEASE_AROUND_FULL = f"""
WITH RECURSIVE {WAITING_CLIENTS},
candidates AS (
    SELECT x.id, x.next_at, c.workspace_id,
           %(per_workspace)s - COALESCE((%(held_workspaces)s::jsonb ->> c.workspace_id)::integer, 0) AS wroom
    FROM waiting w JOIN clients c ON c.id = w.client_id CROSS JOIN LATERAL (
        SELECT d.id, d.next_at FROM webhook_deliveries d
        WHERE d.client_id = w.client_id AND d.next_at <= %(now)s
          AND (d.leased_until IS NULL OR d.leased_until <= %(now)s)
        ORDER BY d.next_at
        LIMIT greatest(least(%(per_client)s - COALESCE((%(held)s::jsonb ->> w.client_id)::integer, 0),
                             %(per_workspace)s - COALESCE((%(held_workspaces)s::jsonb ->> c.workspace_id)::integer, 0)),
                       0)
        FOR UPDATE SKIP LOCKED) x),
by_workspace AS (
    SELECT id, next_at, workspace_id, wroom,
           row_number() OVER (PARTITION BY workspace_id ORDER BY next_at) AS wnth FROM candidates)
UPDATE webhook_deliveries d SET leased_until = %(until)s
FROM (SELECT id, workspace_id FROM by_workspace WHERE wnth <= wroom ORDER BY next_at LIMIT %(limit)s) due
WHERE d.id = due.id RETURNING d.id, d.client_id, due.workspace_id
"""


def lease_due(conn: Any, now: float, limit: int, lease: float, held: dict[str, int] | None = None,
              per_client: int | None = None, held_workspaces: dict[str, int] | None = None,
              per_workspace: int | None = None) -> list[tuple[str, str, str]]:
    """Up to `limit` due deliveries as (id, client id, workspace id), each leased to the caller
    for `lease` seconds, oldest due first; no client gets more than `per_client` at once, and no
    workspace more than `per_workspace` over all its clients, counting the ones the caller
    `held` of them already (running or leased ahead), so neither one slow receiver nor one
    workspace's many can take every thread (docs/design.md, "Webhook sender")."""
    held, held_workspaces = held or {}, held_workspaces or {}
    per_client = per_client or limit
    per_workspace = per_workspace or limit
    any_full = (any(count >= per_client for count in held.values())
                or any(count >= per_workspace for count in held_workspaces.values()))
    rows = conn.execute(LEASE_AROUND_FULL if any_full else LEASE, {  # one statement: no BEGIN, COMMIT round trips
        "now": now, "limit": limit, "until": now + lease, "per_client": per_client,
        "held": orjson.dumps(held).decode(), "per_workspace": per_workspace,
        "held_workspaces": orjson.dumps(held_workspaces).decode(), "scan": max(4 * limit, 100)}).fetchall()
    return [(row["id"], row["client_id"], row["workspace_id"]) for row in rows]


def hand_back(conn: Any, delivery_ids: list[str]) -> None:
    """Leases whose attempts never started (a sender closing) end now."""
    conn.execute("UPDATE webhook_deliveries SET leased_until = NULL WHERE id = ANY(%s)", (delivery_ids,))


def purge(conn: Any, now: float) -> int:
    return conn.execute("DELETE FROM webhook_deliveries WHERE created_at < %s", (now - HISTORY,)).rowcount


def view(row: dict[str, Any], attempts: bool = False) -> dict[str, Any]:
    shown = {
        "id": row["id"], "clientId": row["client_id"], "event": row["event_type"], "subject": row["subject"],
        "status": row["status"], "state": row["state"], "attempts": row["attempts"],
        "nextAttemptAt": iso(row["next_at"]) if row["next_at"] is not None else None,
        "redeliveryOf": row["redelivery_of"], "createdAt": iso(row["created_at"]),
        "updatedAt": iso(row["updated_at"]),
    }
    if attempts:
        shown["history"] = row["history"]
    else:
        shown["lastAttempt"] = row["history"][-1] if row["history"] else None
    return shown


def listing(conn: Any, now: float, client_id: str | None, state: str | None, limit: int) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT * FROM webhook_deliveries WHERE created_at >= %s AND (%s::text IS NULL OR client_id = %s)"
        " AND (%s::text IS NULL OR state = %s) ORDER BY created_at DESC, id LIMIT %s",
        (now - HISTORY, client_id, client_id, state, state, limit)).fetchall()
    return [view(row) for row in rows]


def of_workspace(conn: Any, now: float, workspace_id: str, client_id: str | None, state: str | None,
                 limit: int) -> list[dict[str, Any]]:
    """The deliveries of the last 7 days to the workspace's clients (or to one of them), in a
    state when given, newest first, with each client's brand (joins `clients`, registry.py):
    the dashboard's Webhooks page."""
    rows = conn.execute(
        "SELECT d.*, c.brand FROM webhook_deliveries d JOIN clients c ON c.id = d.client_id"
        " WHERE c.workspace_id = %(ws)s AND d.created_at >= %(since)s"
        " AND (%(client)s::text IS NULL OR d.client_id = %(client)s)"
        " AND (%(state)s::text IS NULL OR d.state = %(state)s)"
        " ORDER BY d.created_at DESC, d.id LIMIT %(limit)s",
        {"ws": workspace_id, "since": now - HISTORY, "client": client_id, "state": state, "limit": limit}).fetchall()
    return [{**view(row), "brand": row["brand"]} for row in rows]


def of_client(conn: Any, client_id: str, states: tuple[str, ...], since: float, until: float,
              now: float) -> list[str]:
    """The ids of the client's deliveries in `states` created from `since` to `until`, within 7
    days of `now`, oldest first (an operator's redelivery of an outage)."""
    rows = conn.execute(
        "SELECT id FROM webhook_deliveries WHERE client_id = %s AND created_at >= %s AND created_at <= %s"
        " AND state = ANY(%s) ORDER BY created_at, id",
        (client_id, max(since, now - HISTORY), until, list(states))).fetchall()
    return [row["id"] for row in rows]


class History:
    """The application's WebhookHistory port (domain/ports.py) on pooled connections."""

    def __init__(self, connection: Callable[[], ContextManager[Any]]):
        self.connection = connection

    def of_client(self, client_id: str, states: tuple[str, ...], since: float, until: float, now: float) -> list[str]:
        with self.connection() as conn:
            return of_client(conn, client_id, states, since, until, now)


def workspace_of(conn: Any, delivery_id: str, now: float) -> str | None:
    """The workspace of a delivery of the last 7 days (through its client)."""
    row = conn.execute("SELECT c.workspace_id FROM webhook_deliveries d JOIN clients c ON c.id = d.client_id"
                       " WHERE d.id = %s AND d.created_at >= %s", (delivery_id, now - HISTORY)).fetchone()
    return row["workspace_id"] if row else None


def find(conn: Any, delivery_id: str, now: float) -> dict[str, Any] | None:
    return conn.execute("SELECT * FROM webhook_deliveries WHERE id = %s AND created_at >= %s",
                        (delivery_id, now - HISTORY)).fetchone()
