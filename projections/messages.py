"""Read model of message status: what GET /v1/sms/messages/:id returns (docs/design.md, "Decisions: message lookup").

Owns `messages`, a followed projection (`PROJECTION`, follower.py)."""
from __future__ import annotations

from typing import Any

from sandesh.domain.clock import iso
from sandesh.domain.message import QUEUED, ROUTE, SCHEDULED, Message, error_of

from . import keyset
from .contract import Projection
from .rows import Rows, Table

DDL = """
CREATE TABLE IF NOT EXISTS messages (
    id text PRIMARY KEY, client_id text NOT NULL, workspace_id text NOT NULL, "to" text NOT NULL,
    status text NOT NULL, route text NOT NULL, message_type text NOT NULL, segments integer NOT NULL,
    encoding text NOT NULL, cost bigint NOT NULL, error text,
    created_at double precision NOT NULL, updated_at double precision NOT NULL);
DROP INDEX IF EXISTS messages_client;
CREATE INDEX IF NOT EXISTS messages_client_newest ON messages (client_id, created_at, id);
CREATE INDEX IF NOT EXISTS messages_workspace ON messages (workspace_id, created_at, id);
CREATE INDEX IF NOT EXISTS messages_to ON messages ("to", created_at, id);
ALTER TABLE messages ADD COLUMN IF NOT EXISTS expires_at double precision;
ALTER TABLE messages ADD COLUMN IF NOT EXISTS send_at double precision;
"""

PROJECTION = Projection(name="messages", tables={"messages": Table("messages", ("id",))}, ddl=DDL)


@PROJECTION.on(Message.Accepted)
def _accepted(rows: Rows, e: Message.Accepted) -> None:
    rows.insert("messages", {
        "id": e.originator_id, "client_id": e.client_id, "workspace_id": e.workspace_id, "to": e.to,
        "status": SCHEDULED if e.send_at is not None else QUEUED, "route": ROUTE, "message_type": e.message_type,
        "segments": e.segments, "encoding": e.encoding, "cost": e.cost, "error": None, "created_at": e.at,
        "updated_at": e.at, "expires_at": e.expires_at, "send_at": e.send_at})


_STATUS = {Message.Submitted: "submitted", Message.Sent: "sent", Message.Delivered: "delivered",
           Message.Undelivered: "undelivered", Message.Failed: "failed", Message.Rejected: "rejected",
           Message.Requeued: "queued", Message.Released: "queued", Message.Canceled: "canceled"}


@PROJECTION.on(*_STATUS)
def _status(rows: Rows, e: Message.Event) -> None:
    rows.update("messages", (e.originator_id,),
                {"status": _STATUS[type(e)], "error": error_of(e), "updated_at": e.at})


def view(record: dict[str, Any]) -> dict[str, Any]:
    """The 200 body of GET /v1/sms/messages/:id, from a read-model row or an aggregate's state."""
    return {
        "id": record["id"], "to": record["to"], "status": record["status"], "route": record["route"],
        "messageType": record["message_type"], "segments": record["segments"], "encoding": record["encoding"],
        "cost": record["cost"], "createdAt": iso(record["created_at"]), "updatedAt": iso(record["updated_at"]),
        "expiresAt": iso(record["expires_at"]) if record["expires_at"] is not None else None,
        "sendAt": iso(record["send_at"]) if record.get("send_at") is not None else None,
        "error": record["error"],
    }


ORDER = ("created_at", "id")  # a row's place in the Messages page, newest first: the page links' key

# The filters of the dashboard's Messages page: each a column compared for equality.
FILTERS = {"message_id": "id", "number": '"to"', "status": "status", "message_type": "message_type",
           "client_id": "client_id"}


def search(conn: Any, workspace_id: str, filters: dict[str, str], since: float | None, until: float | None,
           page: tuple[str, tuple[float, str]] | None, limit: int) -> list[dict[str, Any]]:
    """A page of the workspace's messages, newest first (the dashboard's Messages page): those
    matching `filters` (FILTERS' names) created in [since, until).  `page` is ("before", key) for
    the `limit` older than a row's (created_at, id) key, ("after", key) for the `limit` newer;
    without it, the newest.  Keyset pages on messages_workspace (or messages_to for a number):
    a page costs the same however long the workspace's history."""
    where, params = ["workspace_id = %s"], [workspace_id]
    for name, value in filters.items():
        where.append(f"{FILTERS[name]} = %s")
        params.append(value)
    return keyset.read_page(conn, keyset.newest_first_query("messages", ORDER, (where, params), since, until, page,
                                                            limit), page)


# The filters of GET /v1/sms/messages: each a column compared for equality.
CLIENT_FILTERS = {"status": "status", "message_type": "message_type", "to": '"to"'}


def for_client(conn: Any, client_id: str, filters: dict[str, str], since: float | None, until: float | None,
               before: tuple[float, str] | None, limit: int) -> list[dict[str, Any]]:
    """GET /v1/sms/messages: `limit` of the client's messages matching `filters` (CLIENT_FILTERS'
    names) created in [since, until), newest first, older than `before` (a row's created_at
    and id) when given.  Keyset pages on messages_client_newest (messages_to for a number), so
    a page deep in a long history costs what the first does."""
    where, params = ["client_id = %s"], [client_id]
    for name, value in filters.items():
        where.append(f"{CLIENT_FILTERS[name]} = %s")
        params.append(value)
    page = ("before", before) if before is not None else None
    return keyset.read_page(conn, keyset.newest_first_query("messages", ORDER, (where, params), since, until, page,
                                                            limit), page)


def last_day(conn: Any, workspace_id: str, now: float, hours: int = 24) -> list[dict[str, Any]]:
    """The workspace's messages accepted in the last `hours` hours, counted by hour (0 the
    oldest), status and recipient's prefix (`977` and the 3 digits that name the operator):
    the Overview's chart.  Reads only those hours, on messages_workspace."""
    since = now - hours * 3600
    return conn.execute(
        'SELECT least(floor((created_at - %(since)s) / 3600)::int, %(last)s) AS hour, status,'
        ' left("to", 6) AS prefix, count(*)::int AS n FROM messages'
        ' WHERE workspace_id = %(ws)s AND created_at > %(since)s AND created_at <= %(now)s GROUP BY 1, 2, 3',
        {"since": since, "now": now, "ws": workspace_id, "last": hours - 1}).fetchall()


def find(conn: Any, message_id: str, client_id: str) -> dict[str, Any] | None:
    return conn.execute("SELECT * FROM messages WHERE id = %s AND client_id = %s", (message_id, client_id),
                        prepare=True).fetchone()


def from_aggregate(message: Message) -> dict[str, Any]:
    return view({"id": message.id, "to": message.to, "status": message.status, "route": ROUTE,
                 "message_type": message.message_type, "segments": message.segments, "encoding": message.encoding,
                 "cost": message.cost, "created_at": message.created_at, "updated_at": message.updated_at,
                 "expires_at": message.expires_at, "send_at": message.send_at, "error": message.error})
