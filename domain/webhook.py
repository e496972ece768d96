"""Webhook deliveries (docs/api.md, "Webhooks"; docs/design.md, "Decisions: webhooks").

One WebhookDelivery per event sent to a client: its body is fixed when it is created, and
every attempt (time, status code or error, duration) is an event of its own.  A status event
is created at most once per message and webhook status, so its id is derived from the two.
"""
from __future__ import annotations

import hashlib
from typing import Any

import orjson
from eventsourcing.domain import event

from .aggregate import Aggregate
from .clock import iso
from .credentials import new_id
from .errors import InvalidTransition
from .inbound import Reply, sender_number
from .message import Message

STATUS, INBOUND = "message.status", "message.inbound"
USER_AGENT = "service-sms-webhooks/1"
TIMEOUT = 10.0                 # a 2xx must come within 10 s
MAX_ATTEMPTS = 8
PERMANENT_ATTEMPTS = 3         # a 4xx other than 408 and 429 ends the delivery after 3 attempts
DELAYS = (10, 30, 120, 600, 1800, 3600, 10800)  # after attempts 1-7 (docs/api.md, "Retries")
HISTORY = 7 * 24 * 3600        # the read model forgets older deliveries; the log keeps them
FEED_HISTORY = 30 * 24 * 3600  # GET /v1/events keeps a client's events this long (docs/api.md, "GET /v1/events")

ATTEMPTING, WAITING, DELIVERED, DEAD = "attempting", "waiting", "delivered", "dead"
REDELIVERABLE = (DEAD, WAITING)  # what an outage's redelivery takes up

# Which message events are sent, as which webhook status (docs/api.md, "Events").  Submitted maps
# to `sent` but fires nothing: `sent` fires once every part is accepted (docs/design.md, "Decisions: webhooks").
WEBHOOK_STATUS: dict[type, str] = {
    Message.Sent: "sent", Message.Delivered: "delivered", Message.Undelivered: "undelivered",
    Message.Failed: "failed", Message.Rejected: "failed", Message.Requeued: "queued", Message.Canceled: "canceled",
}
WITH_ERROR = {"failed", "undelivered", "queued"}
SOURCES = (*WEBHOOK_STATUS, Reply.Received)


def status_event(message_id: str, to: str, message_type: str, segments: int, status: str, at: float,
                 error: str | None) -> dict[str, Any]:
    """The body of a message's status event: its status and the message's fixed fields (`to`,
    `messageType`, `segments`, which no later event changes)."""
    body = {"type": STATUS, "id": message_id, "status": status, "to": to,
            "at": iso(at), "route": "device", "messageType": message_type, "segments": segments}
    if status in WITH_ERROR and error:
        body["error"] = error
    return body


def inbound_event(reply_id: str, sender: str, text: str | None, at: float, in_reply_to: str | None) -> dict[str, Any]:
    body = {"type": INBOUND, "id": reply_id, "from": sender_number(sender), "text": text, "at": iso(at)}
    if in_reply_to:
        body["inReplyTo"] = in_reply_to
    return body


def delivery_id(subject: str, status: str) -> str:
    """The id of the one delivery of `subject` (a message or reply id) with this status."""
    return "whd_" + hashlib.sha256(f"{subject}/{status}".encode()).hexdigest()[:32]


def event_id(subject: str, status: str) -> str:
    """The id of the event in GET /v1/events that the delivery `delivery_id(subject, status)`
    carries: the same digest, so a receiver can match the feed's items to its deliveries."""
    return "evt_" + delivery_id(subject, status)[len("whd_"):]


def permanent(status_code: int | None) -> bool:
    return status_code is not None and 400 <= status_code <= 499 and status_code not in (408, 429)


def after_attempt(attempt: int, status_code: int | None) -> tuple[str, float | None]:
    """The state after attempt number `attempt` answered `status_code` (None: no answer in
    time, or no connection), and the delay before the next attempt when there is one."""
    if status_code is not None and 200 <= status_code <= 299:
        return DELIVERED, None
    if attempt >= MAX_ATTEMPTS or (permanent(status_code) and attempt >= PERMANENT_ATTEMPTS):
        return DEAD, None
    return WAITING, float(DELAYS[attempt - 1])


class WebhookDelivery(Aggregate):
    @staticmethod
    def create_id(**_: object) -> str:
        return new_id("whd")

    class Created(Aggregate.Created):
        """Version 2 has `sent_as` and `due` (an outage's redelivery, docs/operations.md); a
        version 1 delivery was never one, so both are None.  Releases up to 0.2.0 stored
        either shape unversioned: the upcaster keeps the fields an event has."""
        class_version = 2

        client_id: str
        event_type: str
        subject: str
        status: str | None
        body: str
        redelivery_of: str | None
        at: float
        sent_as: str | None
        due: float | None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state.setdefault("sent_as", None)
            state.setdefault("due", None)

    class Redelivered(Aggregate.Event):
        """Version 2 has `redelivery_id`, the outage's redelivery it was part of; None in
        version 1 (an operator's redelivery of one delivery)."""
        class_version = 2

        client_id: str
        redelivered_as: str
        actor: str
        at: float
        redelivery_id: str | None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state.setdefault("redelivery_id", None)

    @event(Created)
    def __init__(self, client_id: str, event_type: str, subject: str, status: str | None, body: str,
                 redelivery_of: str | None, at: float, sent_as: str | None, due: float | None):
        self.client_id = client_id
        self.event_type = event_type
        self.subject = subject
        self.status = status
        self.body = body  # the raw JSON sent, byte for byte the same on every attempt
        self.redelivery_of = redelivery_of
        self.sent_as = sent_as  # the x-service-delivery of an outage's redelivery: the first delivery's
        self.redelivered_as: str | None = None  # the newest delivery of its event made from this one
        self.created_at = at
        self.state = ATTEMPTING
        self.attempts = 0
        self.next_at: float | None = at if due is None else due

    @property
    def delivery_header(self) -> str:
        """Its `x-service-delivery`: its own id, or the one the event was first delivered with when
        it redelivers an outage (receivers deduplicate on it)."""
        return self.sent_as or self.id

    def attempted(self, status_code: int | None, error: str | None, duration: float, at: float) -> None:
        if self.state in (DELIVERED, DEAD):
            raise InvalidTransition(f"delivery is {self.state}")
        attempt = self.attempts + 1
        state, delay = after_attempt(attempt, status_code)
        self._attempted(attempt=attempt, status_code=status_code, error=error, duration=round(duration, 3),
                        state=state, next_at=None if delay is None else at + delay, at=at)

    @event("Attempted")
    def _attempted(self, attempt: int, status_code: int | None, error: str | None, duration: float, state: str,
                   next_at: float | None, at: float) -> None:
        self.attempts, self.state, self.next_at = attempt, state, next_at

    def hurry(self, redelivery_id: str, at: float) -> None:
        """An operator redelivers an outage (`Webhooks.redeliver_outage`): a waiting delivery's
        next attempt is made at once, with the attempts it has left (a dead one is final: the
        outage gets a new delivery of it, `again`).  It is due from its creation time, so the
        sender takes a client's redelivered events in their original order."""
        if self.state != WAITING:
            raise InvalidTransition(f"delivery is {self.state}; only a waiting one is hurried")
        self._hurried(redelivery_id=redelivery_id, next_at=self.created_at, at=at)

    @event("Hurried")
    def _hurried(self, redelivery_id: str, next_at: float, at: float) -> None:
        self.state, self.next_at = ATTEMPTING, next_at

    def again(self, redelivery_id: str, actor: str, at: float) -> WebhookDelivery:
        """A dead delivery's event delivered anew for an outage's redelivery: a new delivery with
        a full round of attempts, sent with this one's `x-service-delivery` and due from this
        one's creation time (its place in the client's order).  Counted in the outage's one
        audit line, not one line each."""
        if self.state != DEAD:
            raise InvalidTransition(f"delivery is {self.state}; only a dead one is delivered again")
        again = new_delivery(self.client_id, self.event_type, self.subject, self.status, self.body, at=at,
                             redelivery_of=self.id, sent_as=self.delivery_header, due=self.created_at)
        self.redelivered(client_id=self.client_id, redelivered_as=again.id, actor=actor, at=at,
                         redelivery_id=redelivery_id)
        return again

    @event(Redelivered)
    def redelivered(self, client_id: str, redelivered_as: str, actor: str, at: float,
                    redelivery_id: str | None = None) -> None:
        """A new delivery of this event: one an operator asked for (audited as
        webhook.redelivered), or one of an outage's (`redelivery_id`, audited with the outage)."""
        self.redelivered_as = redelivered_as


def new_delivery(client_id: str, event_type: str, subject: str, status: str | None, body: dict[str, Any] | str,
                 at: float, redelivery_of: str | None = None, sent_as: str | None = None,
                 due: float | None = None) -> WebhookDelivery:
    """A delivery of `body`; the first one for (subject, status) gets the id derived from them,
    so it can never be created twice.  A redelivery is a new delivery with a new id."""
    raw = body if isinstance(body, str) else orjson.dumps(body).decode()
    originator_id = delivery_id(subject, status or event_type) if redelivery_of is None else new_id("whd")
    return WebhookDelivery._create(WebhookDelivery.Created, id=originator_id, client_id=client_id,
                                   event_type=event_type, subject=subject, status=status, body=raw,
                                   redelivery_of=redelivery_of, at=at, sent_as=sent_as, due=due)
