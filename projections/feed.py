"""A client's events as a feed (docs/api.md, "GET /v1/events"): the `events_feed` table.

Written by the webhook sender's follower (workers/webhooks.py) in the step that turns the log's
message and reply events into deliveries, for every client, with a webhook URL or without: an
item's `body` is the body its webhook carries (a reply's text left out: it is kept only in the
encrypted log and read from there when the item is served).  The row commits with the
follower's position, so a step read again after a crash writes nothing twice, and each commit
that adds rows notifies FEED with the clients they belong to, which wakes their long polls.

Rows are ordered by the log position of the event they come from, and kept FEED_HISTORY
(domain/webhook.py); `purge` forgets older ones.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg.types.json import Jsonb

from sandesh.domain.webhook import FEED_HISTORY

CHANNEL = "sandesh_feed"  # NOTIFY payload: a client id whose feed grew

DDL = """
CREATE TABLE IF NOT EXISTS events_feed (
    id text PRIMARY KEY, client_id text NOT NULL, position bigint NOT NULL, event_type text NOT NULL,
    subject text NOT NULL, body jsonb NOT NULL, at double precision NOT NULL);
CREATE INDEX IF NOT EXISTS events_feed_client ON events_feed (client_id, position);
CREATE INDEX IF NOT EXISTS events_feed_at ON events_feed (at);
"""


@dataclass(frozen=True)
class Item:
    """One event of a client's feed: `position` is its source event's place in the log."""
    id: str
    client_id: str
    position: int
    event_type: str
    subject: str
    body: dict[str, Any]
    at: float


def write(cur: Any, items: list[Item]) -> None:
    """Add the items (one already there is skipped) and tell the listening API processes whose
    feeds grew, both when the transaction commits."""
    if not items:
        return
    cur.executemany(
        "INSERT INTO events_feed (id, client_id, position, event_type, subject, body, at)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
        [(i.id, i.client_id, i.position, i.event_type, i.subject, Jsonb(i.body), i.at) for i in items])
    for client_id in sorted({i.client_id for i in items}):
        cur.execute("SELECT pg_notify(%s, %s)", (CHANNEL, client_id))


def position_of(conn: Any, event_id: str, client_id: str, now: float) -> int | None:
    """The log position of the client's kept event `event_id`; None when it is unknown, another
    client's, or older than the feed keeps."""
    row = conn.execute("SELECT position FROM events_feed WHERE id = %s AND client_id = %s AND at >= %s",
                       (event_id, client_id, now - FEED_HISTORY)).fetchone()
    return row["position"] if row else None


def page(conn: Any, client_id: str, after: int | None, now: float, limit: int) -> list[dict[str, Any]]:
    """The client's kept events after log position `after` (from the oldest kept without it),
    oldest first, `limit` of them: an index range on events_feed_client."""
    return conn.execute(
        "SELECT id, event_type, subject, body, at FROM events_feed"
        " WHERE client_id = %s AND position > %s AND at >= %s ORDER BY position LIMIT %s",
        (client_id, after if after is not None else 0, now - FEED_HISTORY, limit), prepare=True).fetchall()


def purge(conn: Any, now: float) -> int:
    return conn.execute("DELETE FROM events_feed WHERE at < %s", (now - FEED_HISTORY,)).rowcount
