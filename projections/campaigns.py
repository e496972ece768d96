"""Campaigns sent from the dashboard (docs/dashboard.md, "Sending"): each one's record, which of
the messages are its, and what was refunded of them.  Their statuses are the `messages` read
model's (messages.py), counted at the question.

Owns `campaigns` and `campaign_messages`, a followed projection (`PROJECTION`, follower.py);
`Progress` is the application's CampaignProgress port (domain/ports.py) on them."""
from __future__ import annotations

from typing import Any, Callable, ContextManager

from sandesh.domain.campaign import Campaign
from sandesh.domain.message import Message

from .contract import Projection
from .rows import Add, Rows, Table

DDL = """
CREATE TABLE IF NOT EXISTS campaigns (
    id text PRIMARY KEY, workspace_id text NOT NULL, client_id text NOT NULL, by text NOT NULL,
    message_type text NOT NULL, text text, template text, send_at double precision, recipients integer NOT NULL,
    refused integer NOT NULL, cost bigint NOT NULL, canceled integer NOT NULL DEFAULT 0,
    refunded bigint NOT NULL DEFAULT 0, created_at double precision NOT NULL);
CREATE INDEX IF NOT EXISTS campaigns_workspace ON campaigns (workspace_id, created_at DESC, id);
CREATE TABLE IF NOT EXISTS campaign_messages (message_id text PRIMARY KEY, campaign_id text NOT NULL);
CREATE INDEX IF NOT EXISTS campaign_messages_campaign ON campaign_messages (campaign_id);
"""

PROJECTION = Projection(name="campaigns", tables={"campaigns": Table("campaigns", ("id",)),
                                                  "campaign_messages": Table("campaign_messages", ("message_id",))},
                        ddl=DDL)

# What a campaign's page counts its messages as, by the messages read model's status.
WAITING = ("queued", "scheduled", "submitted")
COUNTED = {"waiting": WAITING, "sent": ("sent",), "delivered": ("delivered",), "undelivered": ("undelivered",),
           "failed": ("failed", "rejected"), "canceled": ("canceled",)}


@PROJECTION.on(Campaign.Created)
def _created(rows: Rows, e: Campaign.Created) -> None:
    rows.insert("campaigns", {
        "id": e.originator_id, "workspace_id": e.workspace_id, "client_id": e.client_id, "by": e.actor,
        "message_type": e.message_type, "text": e.text, "template": e.template, "send_at": e.send_at, "recipients": len(e.message_ids),
        "refused": e.refused, "cost": e.cost, "canceled": 0, "refunded": 0, "created_at": e.at})
    for message_id in e.message_ids:
        rows.insert("campaign_messages", {"message_id": message_id, "campaign_id": e.originator_id})


@PROJECTION.on(Campaign.Canceled)
def _canceled(rows: Rows, e: Campaign.Canceled) -> None:
    rows.update("campaigns", (e.originator_id,), {"canceled": Add(e.canceled)})


@PROJECTION.on(Message.Failed, Message.Rejected, Message.Canceled)
def _refunded(rows: Rows, e: Message.Failed | Message.Rejected | Message.Canceled) -> None:
    campaign = rows.get("campaign_messages", (e.originator_id,), "campaign_id")
    if campaign is not None and e.refund:
        rows.update("campaigns", (campaign,), {"refunded": Add(e.refund)})


# Queries of the dashboard's campaign pages

def of_workspace(conn: Any, workspace_id: str, limit: int = 50) -> list[dict[str, Any]]:
    return conn.execute("SELECT * FROM campaigns WHERE workspace_id = %s ORDER BY created_at DESC, id LIMIT %s",
                        (workspace_id, limit)).fetchall()


def one(conn: Any, workspace_id: str, campaign_id: str) -> dict[str, Any] | None:
    return conn.execute("SELECT * FROM campaigns WHERE id = %s AND workspace_id = %s",
                        (campaign_id, workspace_id)).fetchone()


def counts(conn: Any, campaign: dict[str, Any]) -> dict[str, int]:
    """Its messages by what the page calls them; those not yet in the messages read model are waiting."""
    by_status = {r["status"]: r["count"] for r in conn.execute(
        "SELECT m.status, count(*) AS count FROM campaign_messages c JOIN messages m ON m.id = c.message_id"
        " WHERE c.campaign_id = %s GROUP BY m.status", (campaign["id"],)).fetchall()}
    found = {name: sum(by_status.get(s, 0) for s in statuses) for name, statuses in COUNTED.items()}
    found["waiting"] += campaign["recipients"] - sum(by_status.values())
    return found


def messages(conn: Any, campaign_id: str, statuses: tuple[str, ...] | None, limit: int | None) -> list[dict[str, Any]]:
    """The campaign's messages, oldest first, of those statuses (all without), at most `limit`."""
    query = ("SELECT m.* FROM campaign_messages c JOIN messages m ON m.id = c.message_id WHERE c.campaign_id = %s"
             + (" AND m.status = ANY(%s)" if statuses else "") + " ORDER BY m.created_at, m.id"
             + (" LIMIT %s" if limit else ""))
    params: list[Any] = [campaign_id] + ([list(statuses)] if statuses else []) + ([limit] if limit else [])
    return conn.execute(query, params).fetchall()


def gone(conn: Any, campaign_id: str) -> set[str]:
    """Its messages the read model has past scheduled and queued: a modem had them, or they ended."""
    return {r["id"] for r in conn.execute(
        "SELECT m.id FROM campaign_messages c JOIN messages m ON m.id = c.message_id"
        " WHERE c.campaign_id = %s AND m.status NOT IN ('scheduled', 'queued')", (campaign_id,)).fetchall()}


class Progress:
    """The application's CampaignProgress port (domain/ports.py) on pooled connections."""

    def __init__(self, connection: Callable[[], ContextManager[Any]]):
        self.connection = connection

    def gone(self, campaign_id: str) -> set[str]:
        with self.connection() as conn:
            return gone(conn, campaign_id)
