"""The executors of a replay (`sandesh replay`): `MemoryRows` applies a handler's row operations
to rows held in memory, one dict per table, with the memory indexes its operations use, and the
result is copied into scratch tables with COPY, no statement an event; `SpillingRows` lets rows
go to disk past the replay's budget and takes them back when an event needs them."""
from __future__ import annotations

import itertools
import operator
from array import array
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Protocol

from psycopg.types.json import Jsonb
from sortedcontainers import SortedList

from ..rows import Add, AppendNew, Computed, JsonAppend, Key, Old, Ordered, Table, Tally



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
