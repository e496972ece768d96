"""The life of one message as the log tells it (`sandesh message history`, docs/operations.md
"What happened to message X?").

Pure: it turns the events of a message, of its webhook deliveries and of the replies
attributed to it into one list of entries, oldest first.  What it never shows: an API key,
a webhook secret, an OTP code (the text of an `otp` message is never shown), or a text that
can no longer be decrypted (shown as null).
"""
from __future__ import annotations

from typing import Any, Callable, Iterable
from urllib.parse import urlsplit

from .clock import iso
from .inbound import Reply, sender_number
from .message import Message
from .webhook import WebhookDelivery


Opener = Callable[[str | None], str | None]


def _message_entry(event: Any, open_text: Opener) -> dict[str, Any] | None:
    if isinstance(event, Message.Accepted):
        return {"type": "accepted", "messageType": event.message_type, "to": event.to,
                "text": None if event.message_type == "otp" else open_text(event.text),
                "segments": event.segments, "encoding": event.encoding, "cost": event.cost,
                "idempotencyKey": event.idempotency_key,
                "expiresAt": iso(event.expires_at) if event.expires_at is not None else None,
                "sendAt": iso(event.send_at) if event.send_at is not None else None}
    if isinstance(event, Message.Released):
        return {"type": "released"}
    if isinstance(event, Message.Canceled):
        return {"type": "canceled", "refund": event.refund}
    if isinstance(event, Message.Submitted):
        return {"type": "submitted", "simId": event.sim_id}
    if isinstance(event, Message.PartAccepted):
        return {"type": "part_accepted", "simId": event.sim_id, "part": event.part, "messageReference": event.mr}
    if isinstance(event, Message.Sent):
        return {"type": "sent"}
    if isinstance(event, Message.OutcomeUnknown):
        return {"type": "outcome_unknown", "simId": event.sim_id}
    if isinstance(event, Message.PartReported):
        return {"type": "status_report", "part": event.part, "status": event.status}
    if isinstance(event, Message.ReportUnknown):
        return {"type": "report_unknown"}
    if isinstance(event, Message.Delivered):
        return {"type": "delivered"}
    if isinstance(event, Message.Undelivered):
        return {"type": "undelivered", "error": event.error}
    if isinstance(event, Message.Requeued):
        return {"type": "requeued", "simId": event.sim_id, "reason": event.error,
                "notBefore": iso(event.not_before)}
    if isinstance(event, (Message.Failed, Message.Rejected)):
        kind = "failed" if isinstance(event, Message.Failed) else "rejected"
        return {"type": kind, "error": event.error, "refund": event.refund}
    return {"type": type(event).__name__}  # an event added later still shows, by its name


def _delivery_entry(event: Any, delivery: WebhookDelivery, url: str | None) -> dict[str, Any] | None:
    base = {"deliveryId": event.originator_id, "status": delivery.status}
    if isinstance(event, WebhookDelivery.Created):
        return {"type": "webhook_created", **base, "redeliveryOf": event.redelivery_of}
    if isinstance(event, WebhookDelivery.Attempted):
        return {"type": "webhook_attempt", **base, "attempt": event.attempt,
                "host": urlsplit(url).hostname if url else None, "httpStatus": event.status_code,
                "error": event.error, "seconds": event.duration,
                "delay": round(event.at - delivery.created_at, 3), "state": event.state}
    if isinstance(event, WebhookDelivery.Hurried):
        return {"type": "webhook_hurried", **base, "redeliveryId": event.redelivery_id}
    if isinstance(event, WebhookDelivery.Redelivered):
        return {"type": "webhook_redelivered", **base, "redeliveredAs": event.redelivered_as, "actor": event.actor}
    return None


def _reply_entry(event: Any, open_text: Opener) -> dict[str, Any] | None:
    if isinstance(event, Reply.Received):
        return {"type": "inbound", "replyId": event.originator_id, "from": sender_number(event.sender),
                "text": open_text(event.text), "simId": event.sim_id}
    return None


def entries(message_events: Iterable[Any], deliveries: Iterable[tuple[WebhookDelivery, list[Any]]],
            replies: Iterable[list[Any]], webhook_url: str | None,
            open_text: Opener = lambda text: text) -> list[dict[str, Any]]:
    """Every entry, oldest first (ties keep the order the log recorded them in)."""
    found: list[tuple[float, int, dict[str, Any]]] = []

    def add(at: float, entry: dict[str, Any] | None) -> None:
        if entry is not None:
            found.append((at, len(found), {"at": iso(at), **entry}))

    for event in message_events:
        add(event.at, _message_entry(event, open_text))
    for delivery, events in deliveries:
        for event in events:
            add(event.at, _delivery_entry(event, delivery, webhook_url))
    for events in replies:
        for event in events:
            add(event.at, _reply_entry(event, open_text))
    return [entry for _, _, entry in sorted(found, key=lambda item: (item[0], item[1]))]
