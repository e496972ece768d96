"""What a projection's handler does to its tables: the part a projection author reads
(docs/design.md, "Changing a projection").

A handler does not write SQL: it states row operations (insert this row, add 1 to that
column, delete that key) on a `Rows`, with the values of this module (`Add`, `Old`,
`AppendNew`, `JsonAppend`, `Computed`), on the tables it declares (`Table`, with the memory
indexes a replay keeps: `Ordered`, `Tally`; and how an append batches them: `Batching`).
The executors that run those operations are projections/engine/: live as SQL (`sql.py`), in a
replay on rows in memory (`memory.py`); every executor runs the same handler
(docs/design.md, "One handler, two executors").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, NamedTuple, Protocol

class Add(NamedTuple):
    """Add `amount` to the column (an inserted row starts at `amount`; its twin, with
    on_conflict="update", adds it to the row already there)."""
    amount: Any


class Old(NamedTuple):
    """The value another column of the row held before this update."""
    column: str


class AppendNew(NamedTuple):
    """Append `value` to a text[] column unless it is None or there already."""
    value: Any


class JsonAppend(NamedTuple):
    """Append these items to a jsonb array column."""
    items: list[Any]


class Computed(NamedTuple):
    """A value computed from other rows: `sql` (a scalar expression with %s parameters) live,
    `compute(memory)` in a replay.  The two must agree; the owner keeps them side by side.  A
    named tuple, as the other values of an operation are: one is made for each queued message."""
    sql: str
    params: tuple[Any, ...]
    compute: Callable[[Any], Any]  # given a replay's MemoryRows (projections/engine/memory.py)


@dataclass(frozen=True)
class Ordered:
    """A memory index: for each value of the `group` columns, the rows' keys sorted by
    `order` (only rows for which `where` holds).  Serves `delete_upto`; a `Computed` value asks
    a `Tally` for the lowest and highest."""
    name: str
    group: tuple[str, ...]
    order: str
    where: Callable[[dict[str, Any]], bool] | None = None


@dataclass(frozen=True)
class Tally:
    """A memory index that counts, for each value of the `group` columns, the rows holding each
    value of the integer column `order` (only rows for which `where` holds): it serves the lowest
    and highest value present (`Computed` values), not `delete_upto`.  It holds no row keys,
    about four bytes per integer between a group's lowest and highest value, so the rows of a
    table whose indexes are all tallies can leave memory (`SpillingRows`) while they still count."""
    name: str
    group: tuple[str, ...]
    order: str
    where: Callable[[dict[str, Any]], bool] | None = None


Key = tuple[Any, ...]


@dataclass(frozen=True)
class Batching:
    """How one append writes a table that several of its events touch (`AppendRows`; the other
    executors ignore it).  `lock`: a statement the append runs first when it inserts into the
    table.  `insert_many(cur, rows)`: the table's plain inserts wait, in order, and from
    `many_from` of them on go as this one statement.  `add_many(cur, sums)`: updates that only
    add (`Add`) are summed per row and written last, several rows in one statement."""
    lock: str | None = None
    insert_many: Callable[[Any, list[dict[str, Any]]], None] | None = None
    many_from: int = 2
    add_many: Callable[[Any, dict[Key, dict[str, Any]]], None] | None = None


@dataclass(frozen=True)
class Table:
    """A table as the executors need it: its primary key (none: rows are only inserted and
    deleted by range), the memory indexes its operations use, and how an append batches them."""
    name: str
    key: tuple[str, ...]
    ordered: tuple[Ordered | Tally, ...] = ()
    batching: Batching = Batching()


class Rows(Protocol):
    """What a handler may do to its tables (SqlRows live, MemoryRows in a replay), and `position`,
    the place in the log (notification id) of the event it handles, which the executor sets
    before each event.  Only a followed handler reads it: an append's events have no place in
    the log until it commits."""

    position: int | None

    def insert(self, table: str, row: dict[str, Any], *, on_conflict: str | None = None) -> None: ...
    def update(self, table: str, key: Key, changes: dict[str, Any]) -> None: ...
    def delete(self, table: str, key: Key, *, older: tuple[str, Any] | None = None) -> None: ...
    def delete_upto(self, table: str, index: str, group: Key, bound: Any) -> None: ...
    def get(self, table: str, key: Key, column: str) -> Any: ...
    def guard(self, sql: str, params: Iterable[Any] = ()) -> None: ...
