"""The log the use cases read and append to: eventsourcing's Application over one event store.

Storage is chosen by the environment given to the constructor (PostgreSQL in every process,
see projections/storage/store.py; the library's in-memory store in the fast tests).  `inline` is the
read-model writer the store runs in the same transaction as an append (the guards: the balance,
Idempotency-Keys, SIM names, the OTP windows); the in-memory store is given its own.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, TypeVar

from eventsourcing.application import AggregateNotFoundError, Application, ProcessingEvent

from ..errors import NotFound
from ..events import VersionedMapper, written_version
from ..release import older

A = TypeVar("A")

# Given the events of one append; returns what the store runs inside the append's transaction.
InlineWriter = Callable[[list[Any]], Callable[[Any], None]]


class Log(Application[str]):
    name = "Sandesh"  # names the events table (sandesh_events): never change it

    def __init__(self, env: dict[str, str], *, inline: InlineWriter):
        super().__init__(env)
        self.inline = inline

    def construct_mapper(self) -> Any:
        """The library's mapper with event versions checked both ways (domain/events.py)."""
        return self.factory.mapper(transcoder=self.construct_transcoder(), mapper_class=VersionedMapper)

    def _record(self, processing_event: Any) -> Any:
        processing_event.saved_kwargs["inline"] = self.inline(processing_event.events)
        return super()._record(processing_event)

    def append_events(self, events: list[Any]) -> Any:
        """Record events already collected from their aggregates (the group commit's batches),
        without `save()`'s per-object protocol checks."""
        processing_event: ProcessingEvent[str] = ProcessingEvent()
        processing_event.events.extend(events)
        return self._record(processing_event)

    def writes(self, event_class: type) -> bool:
        """Whether an event of this class may be recorded now: a new kind of event waits until the
        upgrade is finalized at the release that brought it (domain/events.py, `written_from`)."""
        return written_version(event_class, self.mapper.finalized) is not None  # type: ignore[attr-defined]

    def finalized_at(self, release: str) -> bool:
        """Whether the upgrade is finalized at `release` or later: every running process reads
        what that release brought (docs/operations.md, "Upgrading")."""
        return not older(self.mapper.finalized, release)  # type: ignore[attr-defined]

    def find(self, aggregate_id: str, kind: type[A]) -> A | None:
        """The aggregate as the log has it now, or None when there is none of that kind."""
        try:
            found = self.repository.get(aggregate_id)
        except AggregateNotFoundError:
            return None
        return found if isinstance(found, kind) else None

    def get(self, aggregate_id: str, kind: type[A], label: str) -> A:
        """The aggregate, or NotFound naming it as `label`."""
        found = self.find(aggregate_id, kind)
        if found is None:
            raise NotFound(f"no {label} {aggregate_id!r}")
        return found

    def events_of(self, originator_id: str) -> list[Any]:
        """The aggregate's events, oldest first."""
        return [self.mapper.to_domain_event(stored) for stored in self.recorder.select_events(originator_id)]

    def aggregates_of(self, ids: Iterable[str], kind: type[A]) -> dict[str, A]:
        """Several aggregates of one kind as they are now, read in one round trip (the recorder's
        `select_events_of`); an id with none of that kind is left out."""
        events: dict[str, list[Any]] = {}
        for stored in self.recorder.select_events_of(list(ids)):  # type: ignore[attr-defined]
            events.setdefault(stored.originator_id, []).append(self.mapper.to_domain_event(stored))
        found = {key: _projected(its_events) for key, its_events in events.items()}
        return {key: aggregate for key, aggregate in found.items() if isinstance(aggregate, kind)}

    def notifications(self, topics: list[str], page: int = 500) -> Iterator[Any]:
        """Every event of the given topics, oldest first, read a page at a time."""
        start = 1
        while True:
            found = self.recorder.select_notifications(start=start, limit=page, topics=topics)
            for notification in found:
                yield self.mapper.to_domain_event(notification)
            if len(found) < page:
                return
            start = found[-1].id + 1


def _projected(events: list[Any]) -> Any:
    """The aggregate its events make, each event applied in turn: eventsourcing's
    `project_aggregate` without its check of every event against a runtime Protocol, which
    costs seven times the rest (docs/performance.md, "Leased ahead")."""
    aggregate = None
    for event in events:
        aggregate = event.mutate(aggregate)
    return aggregate
