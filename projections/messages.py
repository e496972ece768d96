"""Read model of message status: what GET /v1/sms/messages/:id returns (decisions §1).

Owns `messages`, a followed projection (follower.py)."""
from __future__ import annotations

from typing import Any, Callable

from sandesh.domain.clock import iso
from sandesh.domain.message import ROUTE, Message

NAME = "messages"
TABLES = ("messages",)
DDL = """
CREATE TABLE IF NOT EXISTS messages (
    id text PRIMARY KEY, client_id text NOT NULL, workspace_id text NOT NULL, "to" text NOT NULL,
    status text NOT NULL, route text NOT NULL, message_type text NOT NULL, segments integer NOT NULL,
    encoding text NOT NULL, cost bigint NOT NULL, error text,
    created_at double precision NOT NULL, updated_at double precision NOT NULL);
CREATE INDEX IF NOT EXISTS messages_client ON messages (client_id, created_at);
ALTER TABLE messages ADD COLUMN IF NOT EXISTS expires_at double precision;
"""

HANDLERS: dict[type, Callable[[Any, Any], None]] = {}


def _accepted(cur: Any, e: Any) -> None:
    cur.execute(
        'INSERT INTO messages (id, client_id, workspace_id, "to", status, route, message_type, segments, encoding,'
        " cost, error, created_at, updated_at, expires_at)"
        " VALUES (%s, %s, %s, %s, 'queued', %s, %s, %s, %s, %s, NULL, %s, %s, %s)",
        (e.originator_id, e.client_id, e.workspace_id, e.to, ROUTE, e.message_type, e.segments, e.encoding,
         e.cost, e.at, e.at, getattr(e, "expires_at", None)),
    )


HANDLERS[Message.Accepted] = _accepted

_STATUS = {Message.Submitted: "submitted", Message.Sent: "sent", Message.Delivered: "delivered",
           Message.Undelivered: "undelivered", Message.Failed: "failed", Message.Rejected: "rejected",
           Message.Requeued: "queued"}


def _status(cur: Any, e: Any) -> None:
    cur.execute("UPDATE messages SET status = %s, error = %s, updated_at = %s WHERE id = %s",
                (_STATUS[type(e)], getattr(e, "error", None), e.at, e.originator_id))


HANDLERS.update({cls: _status for cls in _STATUS})


def view(record: dict[str, Any]) -> dict[str, Any]:
    """The 200 body of GET /v1/sms/messages/:id, from a read-model row or an aggregate's state."""
    return {
        "id": record["id"], "to": record["to"], "status": record["status"], "route": record["route"],
        "messageType": record["message_type"], "segments": record["segments"], "encoding": record["encoding"],
        "cost": record["cost"], "createdAt": iso(record["created_at"]), "updatedAt": iso(record["updated_at"]),
        "expiresAt": iso(record["expires_at"]) if record["expires_at"] is not None else None,
        "error": record["error"],
    }


def find(conn: Any, message_id: str, client_id: str) -> dict[str, Any] | None:
    return conn.execute("SELECT * FROM messages WHERE id = %s AND client_id = %s", (message_id, client_id),
                        prepare=True).fetchone()


def from_aggregate(message: Message) -> dict[str, Any]:
    return view({"id": message.id, "to": message.to, "status": message.status, "route": ROUTE,
                 "message_type": message.message_type, "segments": message.segments, "encoding": message.encoding,
                 "cost": message.cost, "created_at": message.created_at, "updated_at": message.updated_at,
                 "expires_at": message.expires_at, "error": message.error})
