"""A client's events as a feed (docs/api.md, "GET /v1/events"): the `events_feed` table.

Owns `events_feed` and `feed_messages`, a followed projection (`PROJECTION`, follower.py).  An
item is one event a webhook carries (domain/webhook.py, `WEBHOOK_STATUS`: a message's status
change, or a reply attributed to a client), for every client, with a webhook URL or without: its
id has the digest of the delivery's id, its `body` is the delivery's body (a reply's text left
out: it is kept only in the encrypted log and read from there when the item is served).  Status
events do not repeat the message's fixed fields (to, type, segments, client): the feed keeps
them from each acceptance, in `feed_messages`.

Items are ordered by the log position of the event they come from (`rows.position`).  Each step
of the projections worker that adds items notifies CHANNEL with the clients they belong to,
which wakes their long polls; a replay notifies no one.  Items are kept FEED_HISTORY
(domain/webhook.py): the projections worker forgets older ones (`retained`, follower.py `purge`).
"""
from __future__ import annotations

from typing import Any, Sequence

from psycopg import sql
from psycopg.types.json import Jsonb

from sandesh.domain.inbound import Reply
from sandesh.domain.message import Message, error_of
from sandesh.domain.webhook import (FEED_HISTORY, INBOUND, STATUS, WEBHOOK_STATUS, event_id, inbound_event,
                                    status_event)

from .contract import Projection
from .rows import Rows, Table

CHANNEL = "sandesh_feed"  # NOTIFY payload: a client id whose feed grew

DDL = """
CREATE TABLE IF NOT EXISTS events_feed (
    id text PRIMARY KEY, client_id text NOT NULL, position bigint NOT NULL, event_type text NOT NULL,
    subject text NOT NULL, body jsonb NOT NULL, at double precision NOT NULL);
CREATE INDEX IF NOT EXISTS events_feed_client ON events_feed (client_id, position);
CREATE INDEX IF NOT EXISTS events_feed_at ON events_feed (at);
CREATE TABLE IF NOT EXISTS feed_messages (id text PRIMARY KEY, fixed jsonb NOT NULL);
"""


def retained(now: float) -> str:
    """The items the live feed keeps (the projections worker forgets older ones; a replay makes them again)."""
    return f"at >= {float(now - FEED_HISTORY)!r}"


def _notices(events: Sequence[Any]) -> list[Any]:
    """The clients whose feeds these events added to, each told once on CHANNEL: those of the
    items the events make (their ids derive from the events alone; a status event's client is
    in its message's row)."""
    ids = [_item_id(e) for e in events if not isinstance(e, Message.Accepted)]
    if not ids:
        return []
    return [sql.SQL("SELECT pg_notify({}, client_id) FROM (SELECT DISTINCT client_id FROM events_feed"
                    " WHERE id = ANY(ARRAY[{}]::text[])) added").format(
        sql.Literal(CHANNEL), sql.SQL(", ").join(map(sql.Literal, ids)))]


PROJECTION = Projection(name="feed", tables={"feed_messages": Table("feed_messages", ("id",)),
                                             "events_feed": Table("events_feed", ("id",))},
                        ddl=DDL, retained={"events_feed": retained}, notices=_notices)


@PROJECTION.on(Message.Accepted)
def _accepted(rows: Rows, e: Message.Accepted) -> None:
    rows.insert("feed_messages", {"id": e.originator_id, "fixed": Jsonb(
        {"clientId": e.client_id, "to": e.to, "messageType": e.message_type, "segments": e.segments})})


@PROJECTION.on(*WEBHOOK_STATUS)
def _status(rows: Rows, e: Message.Event) -> None:
    fixed = rows.get("feed_messages", (e.originator_id,), "fixed")
    status = WEBHOOK_STATUS[type(e)]
    body = status_event(e.originator_id, fixed["to"], fixed["messageType"], fixed["segments"], status, e.at,
                        error_of(e))
    _add(rows, _item_id(e), fixed["clientId"], STATUS, e.originator_id, body, e.at)


@PROJECTION.on(Reply.Received)
def _reply(rows: Rows, e: Reply.Received) -> None:
    if e.client_id is None:  # attributed to no client: kept for operators (`sandesh inbound list`)
        return
    body = inbound_event(e.originator_id, e.sender, None, e.at, e.in_reply_to)
    _add(rows, _item_id(e), e.client_id, INBOUND, e.originator_id, body, e.at)


def _item_id(e: Message.Event | Reply.Received) -> str:
    """The id of the item an event makes: `evt_` and the digest of its delivery's id."""
    if isinstance(e, Reply.Received):
        return event_id(e.originator_id, INBOUND)
    return event_id(e.originator_id, WEBHOOK_STATUS[type(e)])


def _add(rows: Rows, item_id: str, client_id: str, event_type: str, subject: str, body: dict[str, Any],
         at: float) -> None:
    """An item at its event's place in the log; a second event with the same webhook status (a
    message queued again) leaves the first item, as it makes no second delivery."""
    rows.insert("events_feed", {"id": item_id, "client_id": client_id, "position": rows.position,
                                "event_type": event_type, "subject": subject, "body": Jsonb(body), "at": at},
                on_conflict="nothing")


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
