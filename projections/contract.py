"""What a projection is: its name, its tables and their DDL, one handler per event class, and the
executors that run those handlers live and in a replay (docs/design.md, "One handler, two executors").

A handler states what one event does to the tables, as row operations on a `Rows`
(projections/rows.py).  Nothing else says it: every executor runs that same handler, through
`Projection.apply`.  Live, an inline projection's events are written by `AppendRows` inside the
transaction that appends them (`inline_writer`), a followed projection's by `BatchedSqlRows` in
the projections worker's step (`follow`); `sandesh replay` runs them on `MemoryRows` for its pass
over the log and on `SqlRows` for the events appended since.  A followed handler may read where
its event lies in the log (`rows.position`, its notification id), which every executor of a
followed projection sets before each event.  When one append writes many events (a group
commit, a batch send), `AppendRows` gathers their operations per table (rows.py, `Batching`);
the handlers stay the same.

Handlers are registered one way, with the decorator of the read model they write:

    @MODEL.on(Message.Sent)
    def _sent(rows: Rows, e: Message.Sent) -> None: ...
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, TypeVar

from sandesh.domain.topics import topics_of

from .rows import Rows, Table
from .engine.sql import AppendRows, BatchedSqlRows

E = TypeVar("E")
Handler = Callable[[Rows, Any], None]


class Handlers(Mapping[type, Handler]):
    """Event class -> the handler that writes its rows; an event class has one handler, and a
    second registration of it fails at import."""

    def __init__(self, *merged: Mapping[type, Handler]):
        self._by_class: dict[type, Handler] = {}
        for handlers in merged:
            for cls, handler in handlers.items():
                self._add(cls, handler)

    def on(self, *classes: type[E]) -> Callable[[Callable[[Rows, E], None]], Callable[[Rows, E], None]]:
        def register(handler: Callable[[Rows, E], None]) -> Callable[[Rows, E], None]:
            for cls in classes:
                self._add(cls, handler)
            return handler
        return register

    def _add(self, cls: type, handler: Handler) -> None:
        if cls in self._by_class:
            raise ValueError(f"{cls.__qualname__} is handled already, by {self._by_class[cls].__qualname__}")
        self._by_class[cls] = handler

    def __getitem__(self, cls: type) -> Handler:
        return self._by_class[cls]

    def __contains__(self, cls: object) -> bool:
        return cls in self._by_class

    def __iter__(self) -> Iterator[type]:
        return iter(self._by_class)

    def __len__(self) -> int:
        return len(self._by_class)


@dataclass(frozen=True, kw_only=True)
class ReadModel:
    """The tables one module owns: each as the executors see it, their DDL, the handlers of the
    events that write them, the columns a worker writes rather than the log (leases:
    `sandesh replay --check` leaves them out), and per table the SQL condition of the rows the
    live model keeps (`retained(now)`; a replay makes the older ones again)."""
    tables: Mapping[str, Table]
    ddl: str
    handlers: Handlers = field(default_factory=Handlers)
    working_columns: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    retained: Mapping[str, Callable[[float], str]] = field(default_factory=dict)

    def on(self, *classes: type[E]) -> Callable[[Callable[[Rows, E], None]], Callable[[Rows, E], None]]:
        """Register the decorated function as the handler of these event classes."""
        return self.handlers.on(*classes)


Notice = Any  # a statement for those who listen (NOTIFY): SQL text, or psycopg.sql composed with its values


def _no_notices(events: Sequence[Any]) -> Iterable[Notice]:
    return ()


@dataclass(frozen=True, kw_only=True)
class Projection(ReadModel):
    """A read model that `sandesh replay NAME` rebuilds from the log.  Inline: written in the
    transaction that appends its events (`inline_writer`).  Followed: written after the commit,
    by the projections worker (`follow`, projections/follower.py).  Either way the rows of a
    live write are followed by `notices` (statements for those who listen, such as NOTIFY; not
    rows, so a replay makes none)."""
    name: str
    inline: bool = False
    notices: Callable[[Sequence[Any]], Iterable[Notice]] = _no_notices

    @classmethod
    def composed(cls, name: str, models: Sequence[ReadModel], *, order: Sequence[str], inline: bool,
                 notices: Callable[[Sequence[Any]], Iterable[Notice]] = _no_notices) -> Projection:
        """One projection of several modules' read models (DDL in the order given), its tables in
        `order` (the order a replay's swap locks them)."""
        tables = {table: spec for model in models for table, spec in model.tables.items()}
        assert sorted(order) == sorted(tables), "order names every table once"
        return cls(name=name, inline=inline, notices=notices, tables={table: tables[table] for table in order},
                   ddl="".join(model.ddl for model in models), handlers=Handlers(*(m.handlers for m in models)),
                   working_columns={k: v for m in models for k, v in m.working_columns.items()},
                   retained={k: v for m in models for k, v in m.retained.items()})

    def topics(self) -> list[str]:
        """The topics of the events it handles, as `select_notifications` asks for them."""
        return topics_of(self.handlers)

    def apply(self, rows: Rows, event: Any, position: int | None = None) -> None:
        """The event's rows, on any executor: the one path of each event, live and in a replay.
        `position`: where the event lies in the log (its notification id), which its handler
        reads as `rows.position`; an append's events have none yet."""
        if position is not None:
            rows.position = position
        self.handlers[type(event)](rows, event)

    def inline_writer(self, events: Sequence[Any]) -> Callable[[Any], None]:
        """Live, inline: what the application hands the recorder for an append of `events`
        (projections/storage/store.py): their rows on one `AppendRows` over the append's StatementBuffer,
        then the notices."""
        assert self.inline, f"{self.name} is followed, not written inline"
        mine = [event for event in events if type(event) in self.handlers]

        def write(cur: Any) -> None:
            rows = AppendRows(cur, self.tables)
            for event in mine:
                self.apply(rows, event)
            rows.finish()
            for statement in self.notices(mine):
                cur.execute(statement)
        return write

    def follow(self, cur: Any, events: Iterable[tuple[int, Any]]) -> None:
        """Live, followed: a step's batch of events, each with its position in the log, on one
        `BatchedSqlRows`, then the notices, their statements sent in pipeline mode, without
        waiting for each answer (a handler that reads, like the counters' `get`, waits for what
        it reads)."""
        assert not self.inline, f"{self.name} is written inline, not followed"
        rows = BatchedSqlRows(cur, self.tables)
        handled = []
        with cur.connection.pipeline():
            for position, event in events:
                self.apply(rows, event, position)
                handled.append(event)
            rows.flush()
            for statement in self.notices(handled):
                cur.execute(statement)

