"""Message: an aggregate per send, whose events are the only truth about it (decisions §3).

Accepted now; the dispatcher adds Submitted, Sent, Delivered, Undelivered, Failed, Rejected
and Requeued.  The text lives only in the (encrypted) events.
"""
from __future__ import annotations

from eventsourcing.domain import event

from .aggregate import Aggregate
from .credentials import new_id

QUEUED = "queued"
ROUTE = "device"


class Message(Aggregate):
    @staticmethod
    def create_id(**_: object) -> str:
        return new_id("msg")

    @event("Accepted")
    def __init__(
        self, client_id: str, workspace_id: str, to: str, text: str, message_type: str, segments: int,
        encoding: str, cost: int, idempotency_key: str | None, request_hash: str | None, at: float,
    ):
        self.client_id = client_id
        self.workspace_id = workspace_id
        self.to = to
        self.text = text
        self.message_type = message_type
        self.segments = segments
        self.encoding = encoding
        self.cost = cost
        self.status = QUEUED
        self.error: str | None = None
        self.created_at = at
        self.updated_at = at


def accept(**accepted: object) -> Message:
    """A new Message.  Same as `Message(**accepted)` without the library's per-call signature
    introspection (about a fifth of a millisecond, on the send path)."""
    return Message._create(Message.Accepted, **accepted)


def accepted_reply(message_id: str, message_type: str, segments: int, encoding: str, cost: int) -> dict:
    """The 202 body of POST /v1/sms/send (decisions §1), also what an idempotent replay returns."""
    return {"messageId": message_id, "status": QUEUED, "messageType": message_type,
            "segments": segments, "encoding": encoding, "cost": cost}
