"""The executors that run a handler's row operations as SQL on a transaction's cursor: `SqlRows`,
a statement an operation, so the guards of an append (the balance CHECK, the idempotency key,
the OTP windows) act inside PostgreSQL; `BatchedSqlRows`, a follower's batch, which holds
inserts and sums back until something reads; `AppendRows`, the events of one append, gathered
per table by each table's `Batching`."""
from __future__ import annotations

import functools
import math
from typing import Any, Iterable

import orjson
from psycopg.types.json import Jsonb

from ..rows import Add, AppendNew, Computed, JsonAppend, Key, Old, Table


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


# psycopg parses a statement's placeholders in Python, and keeps the result only for statements
# of at most 50 parameters (psycopg/_queries.py, MAX_CACHED_STATEMENT_PARAMS).
CACHED_PARAMS = 50


@functools.lru_cache(maxsize=256)
def _json_insert(table: str, columns: tuple[str, ...], on_conflict: str | None) -> str:
    names = ", ".join(f'"{c}"' for c in columns)
    return (f"INSERT INTO {table} ({names}) SELECT {names} FROM json_populate_recordset(NULL::{table}, %s::json)"
            + (" ON CONFLICT DO NOTHING" if on_conflict == "nothing" else ""))


def _as_json(columns: tuple[str, ...], rows: list[list[Any]]) -> bytes | None:
    """The rows as a JSON array of objects, PostgreSQL then reading each field as its column's
    type; None where a Jsonb holds what JSON cannot."""
    try:
        return orjson.dumps([{c: v.obj if type(v) is Jsonb else v for c, v in zip(columns, row)} for row in rows])
    except TypeError:
        return None


def _json_safe(value: Any) -> bool:
    """Whether PostgreSQL reads the value from JSON as psycopg would send it: a str, int, bool,
    None, finite float, or a Jsonb of something other than None (JSON's null is SQL's NULL)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    return kind is Jsonb and value.obj is not None


class BatchedSqlRows(SqlRows):
    """SqlRows for a follower's batch of events: consecutive plain inserts into a table go out
    as one INSERT (its rows one JSON parameter, or a multi-row VALUES), and upserts that only add
    to a row's columns (counters) are summed per row, until an operation that may see them (an
    update, a delete, a read, a guard) or `flush`.  A batch of 200 acceptances then costs three statements, not 600."""

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
            if len(rows) > 1 and len(rows) * len(columns) > CACHED_PARAMS and all(
                    _json_safe(v) for row in rows for v in row):
                # One statement whose one parameter is the rows as JSON: parsed once, by
                # psycopg's cache, whatever the batch (a multi-row VALUES past 50 parameters is
                # parsed again each time, most of the follower's time).
                as_json = _as_json(columns, rows)
                if as_json is not None:
                    self.cur.execute(_json_insert(table, columns, on_conflict), [as_json.decode()])
                    continue
            start = 0
            while start < len(rows):
                # Chunks of 256, 128, ... 1 rows: few distinct statements, where a statement per
                # batch size was a new one every time.
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
