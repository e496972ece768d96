"""What a projection's handler does to its tables, said once and run two ways.

A handler does not write SQL: it states row operations (insert this row, add 1 to that
column, delete that key) on a `Rows`.  Live, `SqlRows` turns each into one statement on the
transaction's cursor, so the guards of an append (the balance CHECK, the idempotency key, the
OTP windows) still act inside PostgreSQL.  `sandesh replay`, `MemoryRows` applies them to rows
held in memory, one dict per table, and the result is copied into the scratch tables with COPY:
no statement per event, which is what lets a replay run at the speed it reads the log
(docs/design.md, "One handler, two executors").

Both executors see the same operations, so a projection has one definition; `sandesh replay
--check` compares what the two made.  Their variants only group operations: `BatchedSqlRows`
(a follower's batch) and `AppendRows` (the events of one append, per each table's `Batching`).
"""
from __future__ import annotations

import functools
import itertools
import operator
from array import array
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, NamedTuple, Protocol

from psycopg.types.json import Jsonb
from sortedcontainers import SortedList


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
    compute: Callable[["MemoryRows"], Any]


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


class SqlRows:
    """Each operation as one statement on `cur` (a cursor, or the append's StatementBuffer)."""

    position: int | None = None

    def __init__(self, cur: Any, tables: dict[str, Table]):
        self.cur, self.tables = cur, tables

    def insert(self, table: str, row: dict[str, Any], *, on_conflict: str | None = None) -> None:
        """`on_conflict`: None (the key refuses a twin), "nothing", or "update" (set plain
        columns, add `Add` ones)."""
        columns, values, params = [], [], []
        for column, value in row.items():
            columns.append(f'"{column}"')
            if isinstance(value, Computed):
                values.append(f"({value.sql})")
                params.extend(value.params)
            else:
                values.append("%s")
                params.append(value.amount if isinstance(value, Add) else value)
        sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(values)})"
        if on_conflict == "nothing":
            sql += " ON CONFLICT DO NOTHING"
        elif on_conflict == "update":
            key = self.tables[table].key
            sets = [f'"{c}" = {table}."{c}" + excluded."{c}"' if isinstance(v, Add) else f'"{c}" = excluded."{c}"'
                    for c, v in row.items() if c not in key]
            sql += f" ON CONFLICT ({', '.join(key)}) DO UPDATE SET {', '.join(sets)}"
        self.cur.execute(sql, params)

    def update(self, table: str, key: Key, changes: dict[str, Any]) -> None:
        sets, params = [], []
        for column, value in changes.items():
            if isinstance(value, Add):
                sets.append(f'"{column}" = "{column}" + %s')
                params.append(value.amount)
            elif isinstance(value, Old):
                sets.append(f'"{column}" = "{value.column}"')
            elif isinstance(value, AppendNew):
                sets.append(f'"{column}" = CASE WHEN %s::text IS NULL OR %s = ANY("{column}") THEN "{column}"'
                            f' ELSE array_append("{column}", %s) END')
                params += [value.value, value.value, value.value]
            elif isinstance(value, JsonAppend):
                sets.append(f'"{column}" = "{column}" || %s')
                params.append(Jsonb(value.items))
            elif isinstance(value, Computed):
                sets.append(f'"{column}" = ({value.sql})')
                params.extend(value.params)
            else:
                sets.append(f'"{column}" = %s')
                params.append(value)
        where, key_params = self._where(table, key)
        self.cur.execute(f"UPDATE {table} SET {', '.join(sets)} WHERE {where}", [*params, *key_params])

    def delete(self, table: str, key: Key, *, older: tuple[str, Any] | None = None) -> None:
        """Delete the row with this key (given `older` = (column, bound): only if its column is
        at most bound)."""
        where, params = self._where(table, key)
        if older is not None:
            where += f' AND "{older[0]}" <= %s'
            params = [*params, older[1]]
        self.cur.execute(f"DELETE FROM {table} WHERE {where}", params)

    def delete_upto(self, table: str, index: str, group: Key, bound: Any) -> None:
        """Delete the rows of `group` in memory index `index` whose order column is at most bound."""
        ordered = next(o for o in self.tables[table].ordered if o.name == index)
        where = " AND ".join(f'"{c}" = %s' for c in ordered.group)
        self.cur.execute(f'DELETE FROM {table} WHERE {where} AND "{ordered.order}" <= %s', [*group, bound])

    def get(self, table: str, key: Key, column: str) -> Any:
        where, params = self._where(table, key)
        row = self.cur.execute(f'SELECT "{column}" AS value FROM {table} WHERE {where}', params).fetchone()
        return None if row is None else row["value"]

    def guard(self, sql: str, params: Iterable[Any] = ()) -> None:
        """A check that only the live append makes (a replayed log has passed it already)."""
        self.cur.execute(sql, list(params))

    def _where(self, table: str, key: Key) -> tuple[str, list[Any]]:
        columns = self.tables[table].key
        return " AND ".join(f'"{c}" = %s' for c in columns), list(key)


MAX_CHUNK = 256  # rows of one multi-row INSERT (within PostgreSQL's 65,535 parameters)


@functools.lru_cache(maxsize=256)
def _multi_insert(table: str, columns: tuple[str, ...], on_conflict: str | None, rows: int) -> str:
    one = "(" + ", ".join(["%s"] * len(columns)) + ")"
    names = ", ".join(f'"{c}"' for c in columns)
    return (f"INSERT INTO {table} ({names}) VALUES " + ", ".join([one] * rows)
            + (" ON CONFLICT DO NOTHING" if on_conflict == "nothing" else ""))


class BatchedSqlRows(SqlRows):
    """SqlRows for a follower's batch of events: consecutive plain inserts into a table go out
    as one multi-row INSERT, and upserts that only add to a row's columns (counters) are summed
    per row, until an operation that may see them (an update, a delete, a read, a guard) or
    `flush`.  A batch of 200 acceptances then costs three statements, not 600."""

    def __init__(self, cur: Any, tables: dict[str, Table]):
        super().__init__(cur, tables)
        self._inserts: dict[tuple[str, tuple[str, ...], str | None], list[list[Any]]] = {}
        self._sums: dict[tuple[str, Key], dict[str, Any]] = {}

    def insert(self, table: str, row: dict[str, Any], *, on_conflict: str | None = None) -> None:
        values = list(row.values())
        if any(isinstance(v, Computed) for v in values):
            self.flush()
            return super().insert(table, row, on_conflict=on_conflict)
        if on_conflict == "update":
            key_columns = self.tables[table].key
            if all(isinstance(v, Add) for c, v in row.items() if c not in key_columns):
                key = tuple(row[c] for c in key_columns)
                summed = self._sums.get((table, key))
                if summed is None:
                    self._sums[(table, key)] = dict(row)
                else:
                    for column, value in row.items():
                        if column not in key_columns:
                            earlier = summed.get(column)
                            summed[column] = Add(value.amount + (earlier.amount if earlier is not None else 0))
                return
            self.flush()
            return super().insert(table, row, on_conflict=on_conflict)
        self._inserts.setdefault((table, tuple(row), on_conflict), []).append(values)

    def update(self, table: str, key: Key, changes: dict[str, Any]) -> None:
        self.flush()
        super().update(table, key, changes)

    def delete(self, table: str, key: Key, *, older: tuple[str, Any] | None = None) -> None:
        self.flush()
        super().delete(table, key, older=older)

    def delete_upto(self, table: str, index: str, group: Key, bound: Any) -> None:
        self.flush()
        super().delete_upto(table, index, group, bound)

    def get(self, table: str, key: Key, column: str) -> Any:
        self.flush()
        return super().get(table, key, column)

    def guard(self, sql: str, params: Iterable[Any] = ()) -> None:
        self.flush()
        super().guard(sql, params)

    def flush(self) -> None:
        inserts, self._inserts = self._inserts, {}
        for (table, columns, on_conflict), rows in inserts.items():
            start = 0
            while start < len(rows):
                # Chunks of 256, 128, ... 1 rows: few distinct statements, each parsed once by
                # psycopg (its cache), where a statement per batch size was parsed every time.
                size = min(MAX_CHUNK, 1 << (len(rows) - start).bit_length() - 1)
                self.cur.execute(_multi_insert(table, columns, on_conflict, size),
                                 [v for row in rows[start:start + size] for v in row])
                start += size
        sums, self._sums = self._sums, {}
        for (table, _), row in sums.items():
            super().insert(table, row, on_conflict="update")


class _Held:
    """A cursor that keeps the statements given to it, for `AppendRows` to pass on at its end."""

    def __init__(self) -> None:
        self.statements: list[tuple[Any, Any]] = []

    def execute(self, query: Any, params: Any = None) -> None:
        self.statements.append((query, params))


class AppendRows(SqlRows):
    """SqlRows for the events of one append, on its StatementBuffer (projections/storage/store.py), which
    records statements and never reads.  Each table's `Batching` applies: its lock is taken
    first; its waiting inserts go out before any operation that may see them (another on that
    table, a guard) or at `finish`; its summed additions are written at `finish`, last, so that
    the rows they lock (balances) are held for the shortest time and, several at once, locked in
    key order: two appends never wait on each other's rows in opposite orders.  No handler of an
    inline table reads a summed column.  The statements reach `cur` at `finish`."""

    def __init__(self, cur: Any, tables: dict[str, Table]):
        super().__init__(_Held(), tables)
        self._target = cur
        self._locks: list[str] = []
        self._waiting: dict[str, list[dict[str, Any]]] = {}
        self._sums: dict[str, dict[Key, dict[str, Any]]] = {}

    def insert(self, table: str, row: dict[str, Any], *, on_conflict: str | None = None) -> None:
        batching = self.tables[table].batching
        if batching.lock is not None and batching.lock not in self._locks:
            self._locks.append(batching.lock)
        if batching.insert_many is not None and on_conflict is None:
            self._waiting.setdefault(table, []).append(row)
            return
        self._flush(table)
        super().insert(table, row, on_conflict=on_conflict)

    def update(self, table: str, key: Key, changes: dict[str, Any]) -> None:
        if self.tables[table].batching.add_many is not None and all(type(v) is Add for v in changes.values()):
            row = self._sums.setdefault(table, {}).setdefault(key, {})
            for column, value in changes.items():
                row[column] = row.get(column, 0) + value.amount
            return
        self._flush(table)
        super().update(table, key, changes)

    def delete(self, table: str, key: Key, *, older: tuple[str, Any] | None = None) -> None:
        self._flush(table)
        super().delete(table, key, older=older)

    def delete_upto(self, table: str, index: str, group: Key, bound: Any) -> None:
        self._flush(table)
        super().delete_upto(table, index, group, bound)

    def get(self, table: str, key: Key, column: str) -> Any:
        raise TypeError("an append's inline writer only writes: it reads nothing back")

    @property  # type: ignore[override]
    def position(self) -> int:
        raise TypeError("an append's events have no place in the log until it commits")

    def guard(self, sql: str, params: Iterable[Any] = ()) -> None:
        for table in list(self._waiting):
            self._flush(table)
        super().guard(sql, params)

    def finish(self) -> None:
        for table in list(self._waiting):
            self._flush(table)
        sums, self._sums = self._sums, {}
        for table, rows in sums.items():
            if len(rows) == 1:
                [(key, amounts)] = rows.items()
                super().update(table, key, {column: Add(n) for column, n in amounts.items()})
            else:
                add_many = self.tables[table].batching.add_many
                assert add_many is not None
                add_many(self.cur, rows)
        held, self.cur.statements = self.cur.statements, []
        for lock in self._locks:
            self._target.execute(lock)
        for query, params in held:
            self._target.execute(query, params)

    def _flush(self, table: str) -> None:
        rows = self._waiting.pop(table, None)
        if not rows:
            return
        batching = self.tables[table].batching
        if len(rows) >= batching.many_from:
            assert batching.insert_many is not None
            batching.insert_many(self.cur, rows)
        else:
            for row in rows:
                super().insert(table, row)


@dataclass
class _Index:
    spec: Ordered
    groups: dict[Key, SortedList] = field(default_factory=dict)
    entries: dict[Key, tuple[Key, Any]] = field(default_factory=dict)  # row key -> (group, order value)

    def put(self, key: Key, row: dict[str, Any]) -> None:
        spec = self.spec
        if spec.where is None or spec.where(row):
            entry = (tuple([row[c] for c in spec.group]), row[spec.order])
            if self.entries.get(key) == entry:
                return
            self.drop(key)
            group, value = entry
            members = self.groups.get(group)
            if members is None:
                members = self.groups[group] = SortedList()
            members.add((value, key))
            self.entries[key] = entry
        else:
            self.drop(key)

    def drop(self, key: Key) -> None:
        entry = self.entries.pop(key, None)
        if entry is not None:
            group, value = entry
            members = self.groups[group]
            members.remove((value, key))
            if not members:
                del self.groups[group]


class _Counts:
    """How many rows hold each integer of one tally group: dense, `counts[i]` for `base + i`,
    while the group's values lie close together (a queue's turns do); a sorted list of the values
    once they spread out (`SPREAD`).  `lo` and `hi` bound the lowest and highest index held."""

    SPREAD = 4096  # entries a dense group may hold beyond four per row counted
    __slots__ = ("base", "counts", "total", "lo", "hi", "sparse")

    def __init__(self, value: int):
        self.base, self.counts, self.total, self.lo, self.hi = value, array("i", [0]), 0, 0, 0
        self.sparse: SortedList | None = None

    def add(self, value: int) -> None:
        self.total += 1
        if self.sparse is not None:
            self.sparse.add(value)
            return
        counts = self.counts
        i = value - self.base
        if i < 0 or i >= len(counts):
            width = max(self.base + len(counts), value + 1) - min(self.base, value)
            if width > 4 * self.total + self.SPREAD:
                self.sparse = SortedList(self._values())
                self.sparse.add(value)
                self.counts = array("i")
                return
            if i < 0:
                counts[0:0] = array("i", bytes(4 * -i))
                self.base, self.lo, self.hi, i = value, 0, self.hi - i, 0
            else:
                counts.frombytes(bytes(4 * (i + 1 - len(counts))))
        counts[i] += 1
        if i < self.lo:
            self.lo = i
        if i > self.hi:
            self.hi = i

    def remove(self, value: int) -> bool:
        """Count one row fewer; true when the group is empty."""
        self.total -= 1
        if self.sparse is not None:
            self.sparse.remove(value)
        else:
            self.counts[value - self.base] -= 1
        return not self.total

    def lowest(self) -> int:
        if self.sparse is not None:
            return self.sparse[0]
        counts, lo = self.counts, self.lo
        while not counts[lo]:
            lo += 1
        if lo > self.SPREAD and lo * 2 > len(counts):  # the front emptied: let it go
            del counts[:lo]
            self.base, self.hi, lo = self.base + lo, self.hi - lo, 0
        self.lo = lo
        return self.base + lo

    def highest(self) -> int:
        if self.sparse is not None:
            return self.sparse[-1]
        counts, hi = self.counts, self.hi
        while not counts[hi]:
            hi -= 1
        if len(counts) - hi > self.SPREAD and hi * 2 < len(counts):
            del counts[hi + 1:]
        self.hi = hi
        return self.base + hi

    def _values(self) -> Iterable[int]:
        for i, n in enumerate(self.counts):
            for _ in range(n):
                yield self.base + i


def _key_of(columns: tuple[str, ...]) -> Callable[[dict[str, Any]], Key]:
    """The function that gives a row's values of `columns` as a tuple."""
    if len(columns) == 1:
        column = columns[0]
        return lambda row: (row[column],)
    return operator.itemgetter(*columns)


class _Tally:
    def __init__(self, spec: Tally):
        self.spec = spec
        self.groups: dict[Key, _Counts] = {}
        self._where, self._group, self._order = spec.where, _key_of(spec.group), spec.order

    def entry(self, row: dict[str, Any]) -> tuple[Key, int] | None:
        """What the row counts for: its group and value, or nothing."""
        if self._where is not None and not self._where(row):
            return None
        return self._group(row), row[self._order]

    def add(self, entry: tuple[Key, int] | None) -> None:
        if entry is not None:
            group, value = entry
            counts = self.groups.get(group)
            if counts is None:
                counts = self.groups[group] = _Counts(value)
            counts.add(value)

    def remove(self, entry: tuple[Key, int] | None) -> None:
        if entry is not None:
            group, value = entry
            if self.groups[group].remove(value):
                del self.groups[group]

    def lowest(self, group: Key) -> int | None:
        counts = self.groups.get(group)
        return None if counts is None else counts.lowest()

    def highest(self, group: Key) -> int | None:
        counts = self.groups.get(group)
        return None if counts is None else counts.highest()


class MemoryRows:
    """The same operations on rows in memory: `rows[table]` maps key to a row dict (a table
    without a key numbers its rows).  `defaults[table]` gives each column's DEFAULT, so an
    inserted row is whole, as PostgreSQL would store it."""

    position: int | None = None

    def __init__(self, tables: dict[str, Table], defaults: dict[str, dict[str, Any]]):
        self.tables, self.defaults = tables, defaults
        self.rows: dict[str, dict[Key, dict[str, Any]]] = {name: {} for name in tables}
        self._keys = {name: t.key for name, t in tables.items()}
        self._key_of = {name: _key_of(t.key) for name, t in tables.items() if t.key}
        self._indexes = {name: [_Index(o) for o in t.ordered if isinstance(o, Ordered)] for name, t in tables.items()}
        self._tallies = {name: [_Tally(o) for o in t.ordered if isinstance(o, Tally)] for name, t in tables.items()}
        self._by_name: dict[tuple[str, str], _Index | _Tally] = {
            (table, index.spec.name): index for found in (self._indexes, self._tallies)
            for table, each in found.items() for index in each}
        self._serial = 0

    def insert(self, table: str, row: dict[str, Any], *, on_conflict: str | None = None) -> None:
        if self._keys[table]:
            key = self._key_of[table](row)
            current = self.rows[table].get(key)
            if current is not None:
                self._again(table, key, current, row, on_conflict)
                return
        else:
            self._serial += 1
            key = (self._serial,)
        self._add(table, key, row)

    def _again(self, table: str, key: Key, current: dict[str, Any], row: dict[str, Any],
               on_conflict: str | None) -> None:
        """An insert of a key the table holds."""
        if on_conflict == "update":
            key_columns = self._keys[table]
            self._change(table, key, current, {c: v for c, v in row.items() if c not in key_columns})
        elif on_conflict != "nothing":
            raise KeyError(f"{table}: a second row with key {key}")

    def _add(self, table: str, key: Key, row: dict[str, Any]) -> None:
        new = {**self.defaults[table], **row}
        if not _SPECIAL.isdisjoint(map(type, row.values())):
            for column, value in row.items():
                kind = type(value)
                if kind is Add:
                    new[column] = value.amount
                elif kind is Computed:
                    new[column] = value.compute(self)
                elif kind is Jsonb:
                    new[column] = value.obj
        self.rows[table][key] = new
        for index in self._indexes[table]:
            index.put(key, new)
        for tally in self._tallies[table]:
            tally.add(tally.entry(new))

    def update(self, table: str, key: Key, changes: dict[str, Any]) -> None:
        current = self.rows[table].get(key)
        if current is not None:  # like UPDATE ... WHERE: no row, nothing to do
            self._change(table, key, current, changes)

    def delete(self, table: str, key: Key, *, older: tuple[str, Any] | None = None) -> None:
        current = self.rows[table].get(key)
        if current is None or (older is not None and current[older[0]] > older[1]):
            return
        del self.rows[table][key]
        for index in self._indexes[table]:
            index.drop(key)
        for tally in self._tallies[table]:
            tally.remove(tally.entry(current))

    def delete_upto(self, table: str, index: str, group: Key, bound: Any) -> None:
        found = self.index(table, index)
        members = found.groups.get(tuple(group))
        if not members:
            return
        doomed = [key for value, key in members.irange(maximum=(bound, _TOP))]
        for key in doomed:
            gone = self.rows[table].pop(key)
            for each in self._indexes[table]:
                each.drop(key)
            for tally in self._tallies[table]:
                tally.remove(tally.entry(gone))

    def get(self, table: str, key: Key, column: str) -> Any:
        row = self.rows[table].get(key)
        return None if row is None else row[column]

    def guard(self, sql: str, params: Iterable[Any] = ()) -> None:
        pass

    # What Computed values ask

    def index(self, table: str, name: str) -> _Index:
        found = self._by_name[(table, name)]
        assert isinstance(found, _Index), f"{table}.{name} is a tally: it keeps no keys"
        return found

    def tally(self, table: str, name: str) -> _Tally:
        found = self._by_name[(table, name)]
        assert isinstance(found, _Tally), f"{table}.{name} is an index: ask a tally for its lowest and highest"
        return found

    def lowest(self, table: str, index: str, group: Key) -> Any:
        return self.tally(table, index).lowest(tuple(group))

    def highest(self, table: str, index: str, group: Key) -> Any:
        return self.tally(table, index).highest(tuple(group))

    def count(self, table: str, row: dict[str, Any]) -> None:
        """Count in the table's tallies a row that is kept elsewhere (a checkpoint's rows copied
        straight into the spill: projections/checkpoints.py)."""
        for tally in self._tallies[table]:
            tally.add(tally.entry(row))

    def _change(self, table: str, key: Key, current: dict[str, Any], changes: dict[str, Any]) -> None:
        tallies = self._tallies[table]
        if not (tallies or self._indexes[table]) and _BUT_ADD.isdisjoint(map(type, changes.values())):
            for column, value in changes.items():  # plain values and sums, on a table without memory indexes
                if type(value) is Add:
                    current[column] += value.amount
                else:
                    current[column] = value
            return
        counted = [tally.entry(current) for tally in tallies] if tallies else ()
        self._apply(table, key, current, changes)
        for tally, entry in zip(tallies, counted):
            now = tally.entry(current)
            if now != entry:
                tally.remove(entry)
                tally.add(now)

    def _apply(self, table: str, key: Key, current: dict[str, Any], changes: dict[str, Any]) -> None:
        if _SPECIAL.isdisjoint(map(type, changes.values())):
            current.update(changes)
            for index in self._indexes[table]:
                index.put(key, current)
            return
        before = None
        for column, value in changes.items():
            kind = type(value)
            if kind not in _SPECIAL:
                current[column] = value
            elif kind is Add:
                current[column] = current[column] + value.amount
            elif kind is Old:
                if before is None:
                    before = dict(current)
                current[column] = before[value.column]
            elif kind is AppendNew:
                if value.value is not None and value.value not in current[column]:
                    current[column] = [*current[column], value.value]
            elif kind is JsonAppend:
                current[column] = [*current[column], *value.items]
            elif kind is Computed:
                current[column] = value.compute(self)
            else:
                current[column] = value.obj  # Jsonb
        for index in self._indexes[table]:
            index.put(key, current)


class _Top:
    """Sorts after every row key, so (bound, _TOP) bounds a range inclusively."""

    def __lt__(self, other: Any) -> bool:
        return False

    def __gt__(self, other: Any) -> bool:
        return True


_TOP = _Top()


_SPECIAL = frozenset({Add, Old, AppendNew, JsonAppend, Computed, Jsonb})
_BUT_ADD = _SPECIAL - {Add}


class Spill(Protocol):
    """Where `SpillingRows` puts the rows it lets go of, and takes them back from: the tables a
    replay is building (projections/replay.py)."""

    def put(self, table: str, rows: list[dict[str, Any]], keys: list[Key]) -> None: ...
    def take(self, table: str, key: Key) -> dict[str, Any] | None: ...
    def take_many(self, table: str, keys: list[Any]) -> list[dict[str, Any]]: ...


class _LetGo:
    """The keys a table has let go of, as a Bloom filter: `may_hold(key)` is true for every key
    let go of (one taken back since stays in), and for few others.  Layers twice the size of the
    last are added as keys come, each 16 bits a key and two probes (the two halves of the key's
    hash): each layer answers true for about one key in 70 it never held."""

    FIRST = 1 << 16  # keys the first layer is made for
    BITS = 16  # bits a key
    __slots__ = ("layers", "room")

    def __init__(self) -> None:
        self.layers: list[tuple[bytearray, int]] = []
        self.room = 0

    def add(self, keys: list[Key]) -> None:
        if len(keys) > self.room:
            size = max(self.FIRST, 2 * (self.layers[-1][1] // self.BITS if self.layers else 0), len(keys))
            self.layers.append((bytearray(size * self.BITS // 8 + 1), size * self.BITS))
            self.room = size
        self.room -= len(keys)
        bits, m = self.layers[-1]
        for key in keys:
            h = hash(key)
            i, j = h % m, (h >> 32) % m
            bits[i >> 3] |= 1 << (i & 7)
            bits[j >> 3] |= 1 << (j & 7)

    def may_hold(self, key: Key) -> bool:
        h = hash(key)
        for bits, m in self.layers:
            i, j = h % m, (h >> 32) % m
            if bits[i >> 3] & (1 << (i & 7)) and bits[j >> 3] & (1 << (j & 7)):
                return True
        return False


class SpillingRows(MemoryRows):
    """MemoryRows within a memory budget.  The keyed tables (messages, audit lines, deliveries,
    the queue...) hold at most `limit` rows together: past it, the rows touched longest ago go to
    `spill`, the tables being built, and an operation on a key that is not in memory takes its
    row back first.  Rows are touched mostly soon after they are made (a message's life), so
    few come back; those that do, a replay asks for ahead, many in one statement (`take_back`).
    The limit is set when the process's resident memory (`resident()`, bytes) first reaches
    `high` of `budget`: the rows held then; it is lowered when the memory still rises (`_check`).
    A spilled row still counts in its table's tallies
    (`Tally`: the queue's turns).  A table with an `Ordered` index (OTP issues, whose window
    `delete_upto` trims by key) stays whole in memory: its size is a window's, not the log's."""

    CHECK_EVERY = 1000  # new rows between two reads of the resident memory

    def __init__(self, tables: dict[str, Table], defaults: dict[str, dict[str, Any]], spill: Spill, budget: int,
                 resident: Callable[[], int], high: float = 0.8):
        super().__init__(tables, defaults)
        self.spill, self.budget, self.resident, self.high = spill, budget, resident, high
        self.limit: int | None = None
        self._lowered_at = 0  # the resident memory when the limit was last set
        self._unchecked = 0
        self.spillable = {name for name, t in tables.items()
                          if t.key and not any(isinstance(o, Ordered) for o in t.ordered)}
        self.spilled = dict.fromkeys(self.spillable, 0)  # rows of each table now in `spill`
        self.taken_back = 0
        self._held = 0  # rows of the spillable tables in memory
        self._settled: set[Any] = set()  # ids `take_back` asked for, whose rows are in memory or nowhere
        self._let_go_of = {name: _LetGo() for name in self.spillable}

    def insert(self, table: str, row: dict[str, Any], *, on_conflict: str | None = None) -> None:
        if table not in self.spillable:
            return super().insert(table, row, on_conflict=on_conflict)
        rows = self.rows[table]
        key = self._key_of[table](row)
        current = rows.get(key)
        if current is None and on_conflict is not None and self.spilled[table] and self._take(table, key):
            current = rows[key]  # a plain insert is of a new key: the log never makes a twin
        if current is not None:
            self._again(table, key, current, row, on_conflict)
            rows[key] = rows.pop(key)  # touched now: the last to go
            return
        self._add(table, key, row)
        self._held += 1
        self._unchecked += 1
        if self._unchecked >= self.CHECK_EVERY:
            self._unchecked = 0
            self._check()
        if self.limit is not None and self._held > self.limit:
            self._let_go()

    def _check(self) -> None:
        """Set the limit when the resident memory first reaches `high` of the budget; lower it by a
        tenth whenever the memory rises past halfway from there to the budget, as what is not a
        row (the tallies, the filters of keys let go of) grows with the log."""
        resident = self.resident()
        if self.limit is None:
            if resident >= self.high * self.budget:
                self.limit = max(500, self._held)
                self._lowered_at = resident
        elif resident >= (1 + self.high) / 2 * self.budget and resident > self._lowered_at + self.budget // 100:
            self.limit = max(500, self.limit * 9 // 10)  # memory freed by rows let go is reused before it
            self._lowered_at = resident                    # grows again: lower it once for each rise

    def update(self, table: str, key: Key, changes: dict[str, Any]) -> None:
        rows = self.rows[table]
        current = rows.get(key)
        if table in self.spillable:
            if current is None:
                if not (self.spilled[table] and self._take(table, key)):
                    return  # like UPDATE ... WHERE: no row, nothing to do
            current = rows[key] = rows.pop(key)  # touched now: the last to go
        elif current is None:
            return
        self._change(table, key, current, changes)

    def delete(self, table: str, key: Key, *, older: tuple[str, Any] | None = None) -> None:
        if table in self.spillable and self._here(table, key):
            before = len(self.rows[table])
            super().delete(table, key, older=older)
            self._held -= before - len(self.rows[table])
            return
        super().delete(table, key, older=older)

    def get(self, table: str, key: Key, column: str) -> Any:
        if table in self.spillable:
            self._here(table, key)
        return super().get(table, key, column)

    def spilled_elsewhere(self, table: str, keys: list[Key]) -> None:
        """Rows of `table` were put in the spill directly, by the server (a checkpoint's:
        projections/checkpoints.py): their keys, to look for there as for the rows let go."""
        self.spilled[table] += len(keys)
        self._let_go_of[table].add(keys)

    def take_back(self, ids: Iterable[Any]) -> None:
        """Take back, one statement a table, the spilled rows keyed by one of `ids` in the tables
        keyed by one column: what the next events will touch (a replay's next batch of the log
        names the aggregates it continues).  An id that keys no spilled row costs an index probe,
        once: until the next call, a key of one of `ids` is not looked for in the spill again
        unless its row is let go meanwhile."""
        wanted = list(ids)
        self._settled = set(wanted)
        for table in self.spillable:
            if not self.spilled[table] or len(self.tables[table].key) != 1:
                continue
            rows, let_go = self.rows[table], self._let_go_of[table]
            missing = [i for i in wanted if (i,) not in rows and let_go.may_hold((i,))]
            if not missing:
                continue
            column = self.tables[table].key[0]
            found = self.spill.take_many(table, missing)
            for row in found:
                rows[(row[column],)] = row
            self._taken(table, len(found))

    def _here(self, table: str, key: Key) -> bool:
        """Whether the row is in memory, after taking it back from the spill if it is there."""
        if key in self.rows[table]:
            return True
        return bool(self.spilled[table]) and self._take(table, key)

    def _take(self, table: str, key: Key) -> bool:
        if (len(key) == 1 and key[0] in self._settled) or not self._let_go_of[table].may_hold(key):
            return False
        row = self.spill.take(table, key)
        if row is None:
            return False
        self.rows[table][key] = row
        self._taken(table, 1)
        return True

    def _taken(self, table: str, count: int) -> None:
        """`count` rows of `table` came back from the spill into memory."""
        self.spilled[table] -= count
        self.taken_back += count
        self._held += count

    def _let_go(self) -> None:
        """Spill the oldest-touched tenth of the held rows, from each table in proportion."""
        share = self.limit // 10
        for table in self.spillable:
            rows = self.rows[table]
            count = len(rows) * share // max(1, self._held)
            if not count:
                continue
            keys = list(itertools.islice(iter(rows), count))
            self.spill.put(table, [rows.pop(key) for key in keys], keys)
            self._let_go_of[table].add(keys)
            if self._settled and len(self.tables[table].key) == 1:
                self._settled.difference_update(key[0] for key in keys)
            self.spilled[table] += count
            self._held -= count
