"""The base of every Sandesh aggregate: eventsourcing aggregates with readable text ids
(`ws_…`, `cl_…`, `msg_…`) instead of bare UUIDs."""
from __future__ import annotations

from datetime import datetime

from eventsourcing.domain import BaseAggregate, CanInitAggregate, CanMutateAggregate, MetaDomainEvent


class Event(CanMutateAggregate[str], metaclass=MetaDomainEvent):
    originator_id: str
    originator_version: int
    timestamp: datetime


class Created(Event, CanInitAggregate[str]):
    originator_topic: str


class Aggregate(BaseAggregate[str]):
    Event = Event
    Created = Created
