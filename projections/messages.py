"""Read model of message status: what GET /v1/sms/messages/:id returns (docs/design.md, "Decisions: message lookup").

Owns `messages`, a followed projection (`PROJECTION`, follower.py)."""
from __future__ import annotations

from typing import Any

from sandesh.domain.clock import iso
from sandesh.domain.message import QUEUED, ROUTE, SCHEDULED, Message

from .contract import Projection
from .rows import Rows, Table

DDL = """
CREATE TABLE IF NOT EXISTS messages (
    id text PRIMARY KEY, client_id text NOT NULL, workspace_id text NOT NULL, "to" text NOT NULL,
    status text NOT NULL, route text NOT NULL, message_type text NOT NULL, segments integer NOT NULL,
    encoding text NOT NULL, cost bigint NOT NULL, error text,
    created_at double precision NOT NULL, updated_at double precision NOT NULL);
CREATE INDEX IF NOT EXISTS messages_client ON messages (client_id, created_at);
ALTER TABLE messages ADD COLUMN IF NOT EXISTS expires_at double precision;
ALTER TABLE messages ADD COLUMN IF NOT EXISTS send_at double precision;
"""

PROJECTION = Projection(name="messages", tables={"messages": Table("messages", ("id",))}, ddl=DDL)


@PROJECTION.on(Message.Accepted)
def _accepted(rows: Rows, e: Message.Accepted) -> None:
    send_at = getattr(e, "send_at", None)  # events stored before scheduling have none
    rows.insert("messages", {
        "id": e.originator_id, "client_id": e.client_id, "workspace_id": e.workspace_id, "to": e.to,
        "status": SCHEDULED if send_at is not None else QUEUED, "route": ROUTE, "message_type": e.message_type,
        "segments": e.segments, "encoding": e.encoding, "cost": e.cost, "error": None, "created_at": e.at,
        "updated_at": e.at, "expires_at": getattr(e, "expires_at", None), "send_at": send_at})


_STATUS = {Message.Submitted: "submitted", Message.Sent: "sent", Message.Delivered: "delivered",
           Message.Undelivered: "undelivered", Message.Failed: "failed", Message.Rejected: "rejected",
           Message.Requeued: "queued", Message.Released: "queued", Message.Canceled: "canceled"}


@PROJECTION.on(*_STATUS)
def _status(rows: Rows, e: Message.Event) -> None:
    rows.update("messages", (e.originator_id,),
                {"status": _STATUS[type(e)], "error": getattr(e, "error", None), "updated_at": e.at})


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


def search(conn: Any, workspace_id: str, message_id: str | None, number: str | None,
           limit: int) -> list[dict[str, Any]]:
    """The workspace's messages, newest first: all, or the one with this id, or those to this
    number (the dashboard's Messages page)."""
    return conn.execute(
        'SELECT * FROM messages WHERE workspace_id = %(ws)s AND (%(id)s::text IS NULL OR id = %(id)s)'
        ' AND (%(to)s::text IS NULL OR "to" = %(to)s) ORDER BY created_at DESC, id LIMIT %(limit)s',
        {"ws": workspace_id, "id": message_id, "to": number, "limit": limit}).fetchall()


def per_hour(conn: Any, workspace_id: str, now: float, hours: int = 24) -> list[int]:
    """The workspace's messages accepted in each of the last `hours` hours, oldest hour first."""
    since = now - hours * 3600
    rows = conn.execute("SELECT floor((created_at - %(since)s) / 3600)::int AS hour, count(*) AS n"
                        " FROM messages WHERE workspace_id = %(ws)s AND created_at > %(since)s"
                        " AND created_at <= %(now)s GROUP BY 1",
                        {"since": since, "now": now, "ws": workspace_id}).fetchall()
    counts = [0] * hours
    for row in rows:
        counts[min(row["hour"], hours - 1)] += row["n"]
    return counts


def find(conn: Any, message_id: str, client_id: str) -> dict[str, Any] | None:
    return conn.execute("SELECT * FROM messages WHERE id = %s AND client_id = %s", (message_id, client_id),
                        prepare=True).fetchone()


def from_aggregate(message: Message) -> dict[str, Any]:
    return view({"id": message.id, "to": message.to, "status": message.status, "route": ROUTE,
                 "message_type": message.message_type, "segments": message.segments, "encoding": message.encoding,
                 "cost": message.cost, "created_at": message.created_at, "updated_at": message.updated_at,
                 "expires_at": message.expires_at, "send_at": message.send_at, "error": message.error})
