"""The base of every Sandesh aggregate: eventsourcing aggregates with readable text ids
(`ws_…`, `cl_…`, `msg_…`) instead of bare UUIDs, whose events carry a version."""
from __future__ import annotations

from datetime import datetime

from eventsourcing.domain import BaseAggregate, CanInitAggregate, CanMutateAggregate, MetaDomainEvent

from .errors import InvalidTransition


class Event(CanMutateAggregate[str], metaclass=MetaDomainEvent):
    """Every event class has a version (docs/design.md, "Event versions"): 1 until its fields
    change, which takes a new `class_version` and an `upcast_vN_vN+1` (domain/events.py)."""
    class_version = 1

    originator_id: str
    originator_version: int
    timestamp: datetime


class Created(Event, CanInitAggregate[str]):
    originator_topic: str


class Aggregate(BaseAggregate[str]):
    Event = Event
    Created = Created


class Switched:
    """What an operator turns off and on (a client, a SIM): `enabled`, and the aggregate's own
    `_disabled` and `_enabled` events, neither recorded when it would change nothing."""
    noun = "it"
    enabled: bool

    def disable(self, actor: str, at: float) -> None:
        if not self.enabled:
            raise InvalidTransition(f"{self.noun} is already disabled")
        self._disabled(actor=actor, at=at)  # type: ignore[attr-defined]

    def enable(self, actor: str, at: float) -> None:
        if self.enabled:
            raise InvalidTransition(f"{self.noun} is already enabled")
        self._enabled(actor=actor, at=at)  # type: ignore[attr-defined]
