"""An operator's redelivery of what a client's receiver missed
(docs/operations.md, "Redelivering an outage"): one event for the whole span, audited once as
`webhook.redelivered` with the count; each delivery it hurried or delivered again names it (`WebhookDelivery.Hurried`,
`WebhookDelivery.Redelivered`)."""
from __future__ import annotations

from eventsourcing.domain import event

from .aggregate import Aggregate
from .credentials import new_id


class Redelivery(Aggregate):
    @staticmethod
    def create_id(**_: object) -> str:
        return new_id("wrd")

    @event("Requested")
    def __init__(self, client_id: str, states: list[str], since: str, until: str, count: int, actor: str,
                 at: float):
        """`since`, `until`: the span of the deliveries' creation, ISO 8601 (shown as they are by `sandesh audit`)."""
        self.client_id = client_id
        self.count = count
