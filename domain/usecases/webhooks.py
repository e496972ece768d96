"""Webhook deliveries (workers/webhooks.py sends them): each is an aggregate that records every
attempt; an operator can ask for one again (`sandesh webhooks redeliver ID`), or for every one a
client's receiver missed over a span of time (`sandesh webhooks redeliver --client`)."""
from __future__ import annotations

from typing import Any, Callable

from eventsourcing.persistence import IntegrityError

from ..client import Client
from ..clock import Clock, iso
from ..errors import InvalidInput, InvalidTransition, NotFound
from ..ports import Sealer, WebhookHistory
from ..redelivery import Redelivery
from ..said import _
from ..steps import Read, Steps, retried, run
from ..webhook import DEAD, REDELIVERABLE, WebhookDelivery, new_delivery
from .log import Log


class Webhooks:
    def __init__(self, log: Log, clock: Clock, sealer: Sealer, history: WebhookHistory):
        self.log, self.clock, self.sealer, self.history = log, clock, sealer, history

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

    def redeliver_outage(self, client_id: str, since: float, until: float | None, state: str | None,
                         actor: str, workspace_id: str | None = None) -> int:
        """Every delivery of the client created from `since` to `until` (now when None) in the
        last 7 days that is `state` (dead or waiting; both when None) is attempted again at once,
        in the order the deliveries were created, with the same `x-service-delivery` and body and
        a fresh signature: a waiting one with the attempts it has left, a dead one (final) by a new
        delivery of its event with a full round.  Audited once, with the count
        (docs/operations.md, "Redelivering an outage"); returns the count (0: nothing recorded).
        `workspace_id`: the client must be one of that workspace's (NotFound otherwise: a
        dashboard page of one workspace)."""
        now = self.clock.now()
        states = _states(state)
        until = now if until is None else until
        if since > until:
            raise InvalidInput(_("since must not be later than until"))
        client = self.log.get(client_id, Client, "client")
        if workspace_id is not None and client.workspace_id != workspace_id:
            raise NotFound(f"no client {client_id!r} in workspace {workspace_id!r}")

        def attempt() -> Steps[tuple[tuple[object, ...], int]]:
            ids = yield Read(self.history.of_client, (client_id, states, since, until, now))
            found = (yield Read(self.log.aggregates_of, (ids, WebhookDelivery))) if ids else {}
            due = [found[i] for i in ids if i in found and found[i].state in states and found[i].client_id == client_id
                   and found[i].redelivered_as is None]  # a dead one delivered anew already is left
            if not due:
                return (), 0
            at = self.clock.now()
            redelivery = Redelivery(client_id=client_id, states=list(states), since=iso(since), until=iso(until),
                                    count=len(due), actor=actor, at=at)
            made = []
            for delivery in due:
                if delivery.state == DEAD:
                    made.append(delivery.again(redelivery.id, actor, at))
                else:
                    delivery.hurry(redelivery.id, at)
            return (*due, *made, redelivery), len(due)

        return run(retried(attempt, f"the redelivery of {client_id}'s webhooks"), self.log.save)


def _states(state: str | None) -> tuple[str, ...]:
    if state is None:
        return REDELIVERABLE
    if state not in REDELIVERABLE:
        raise InvalidInput(_("state must be one of %(states)s", states=", ".join(REDELIVERABLE)))
    return (state,)
