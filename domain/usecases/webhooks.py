"""Webhook deliveries (workers/webhooks.py sends them): each is an aggregate that records every
attempt; an operator can ask for one again (`sandesh webhooks redeliver`)."""
from __future__ import annotations

from typing import Any, Callable

from eventsourcing.persistence import IntegrityError

from ..clock import Clock
from ..errors import InvalidTransition
from ..ports import Sealer
from ..webhook import WebhookDelivery, new_delivery
from .log import Log


class Webhooks:
    def __init__(self, log: Log, clock: Clock, sealer: Sealer):
        self.log, self.clock, self.sealer = log, clock, sealer

    def client_secret(self, sealed: str) -> str:
        """A client's webhook secret, which signs its deliveries, opened from the sealed form the registry keeps."""
        return self.sealer.open(sealed)

    def delivery(self, delivery_id: str) -> WebhookDelivery:
        return self.log.get(delivery_id, WebhookDelivery, "webhook delivery")

    def deliveries(self, delivery_ids: list[str]) -> dict[str, WebhookDelivery]:
        """Several deliveries as they are now, read in one round trip (the webhook sender's
        lease); an id with no delivery is left out."""
        return self.log.aggregates_of(delivery_ids, WebhookDelivery)

    def add_deliveries(self, deliveries: list[WebhookDelivery]) -> None:
        """Append new deliveries; an id that exists already (the same message and status again,
        or a batch read again after a crash) is skipped."""
        pending: dict[str, list[Any]] = {}
        for delivery in deliveries:
            pending.setdefault(delivery.id, delivery.collect_events())  # the first of each id in a batch
        if not pending:
            return
        try:
            self.log.append_events([e for events in pending.values() for e in events])
        except IntegrityError:
            for events in pending.values():
                try:
                    self.log.append_events(events)
                except IntegrityError:
                    pass

    def record_attempt(self, delivery: WebhookDelivery, status_code: int | None, error: str | None,
                       duration: float, append: Callable[..., None] | None = None) -> WebhookDelivery:
        """One POST of `delivery` (as loaded before it was made), recorded (by `append`: the
        webhook sender's group commit; the log's `save` by default); InvalidTransition when
        another sender attempted it at the same time."""
        delivery.attempted(status_code, error, duration, at=self.clock.now())
        try:
            (append or self.log.save)(delivery)
        except IntegrityError:
            raise InvalidTransition(f"{delivery.id} was attempted by another sender at the same time") from None
        return delivery

    def redeliver(self, delivery_id: str, actor: str) -> WebhookDelivery:
        """A new delivery of the same event body, with a new id (audited)."""
        original = self.delivery(delivery_id)
        now = self.clock.now()
        again = new_delivery(original.client_id, original.event_type, original.subject, original.status,
                             original.body, at=now, redelivery_of=original.id)
        original.redelivered(client_id=original.client_id, redelivered_as=again.id, actor=actor, at=now)
        self.log.save(original, again)
        return again
