"""One handler, two executors (projections/rows.py, projections/engine/): every row operation does the same to a
real PostgreSQL table (SqlRows, and BatchedSqlRows, which holds inserts and sums back until
something reads) as to rows in memory (MemoryRows), defaults, jsonb and text[] included; and the
memory indexes answer what the SQL subqueries answer."""
from __future__ import annotations

import psycopg
import pytest
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from sandesh.projections.rows import Add, AppendNew, Computed, JsonAppend, Old, Ordered, Table, Tally
from sandesh.projections.engine.sql import BatchedSqlRows, SqlRows
from sandesh.projections.engine.memory import MemoryRows

DDL = """
CREATE TABLE things (
    id text PRIMARY KEY, grp text NOT NULL, n bigint NOT NULL DEFAULT 0, turn integer NOT NULL DEFAULT 0,
    note text, previous text, tags text[] NOT NULL DEFAULT '{}', history jsonb NOT NULL DEFAULT '[]',
    waiting boolean NOT NULL DEFAULT true, at double precision);
CREATE TABLE hits (who text NOT NULL, at double precision NOT NULL);
CREATE TABLE tallies (k text PRIMARY KEY, n bigint NOT NULL DEFAULT 0);
"""
TABLES = {
    "things": Table("things", ("id",), (Tally("turns", ("grp",), "turn"),
                                        Tally("waiting", ("grp",), "turn", where=lambda r: r["waiting"]))),
    "hits": Table("hits", (), (Ordered("by_who", ("who",), "at"),)),
    "tallies": Table("tallies", ("k",)),
}


def next_turn(grp: str) -> Computed:
    def compute(memory: MemoryRows) -> int:
        last = memory.highest("things", "turns", (grp,))
        lowest_waiting = memory.lowest("things", "waiting", (grp,))
        return max(last + 1 if last is not None else 0, lowest_waiting or 0, 0)
    return Computed("greatest((SELECT max(turn) + 1 FROM things WHERE grp = %s),"
                    " (SELECT min(turn) FROM things WHERE grp = %s AND waiting), 0)", (grp, grp), compute)


def script(rows) -> list:
    """Every kind of operation, in an order where each one's effect matters to a later one."""
    seen = []
    rows.insert("things", {"id": "a", "grp": "g", "turn": next_turn("g"), "note": "first", "at": 1.0})
    rows.insert("things", {"id": "b", "grp": "g", "turn": next_turn("g"), "history": Jsonb([{"k": 1}])})
    rows.insert("things", {"id": "c", "grp": "h", "turn": next_turn("h"), "n": Add(5)})
    rows.insert("things", {"id": "a", "grp": "g", "note": "twin"}, on_conflict="nothing")
    rows.insert("things", {"id": "c", "grp": "h", "n": Add(3), "note": "upserted"}, on_conflict="update")
    rows.update("things", ("a",), {"n": Add(2), "previous": Old("note"), "note": "second"})
    rows.update("things", ("a",), {"tags": AppendNew("x")})
    rows.update("things", ("a",), {"tags": AppendNew("x")})  # already there
    rows.update("things", ("a",), {"tags": AppendNew(None)})  # nothing to add
    rows.update("things", ("a",), {"tags": AppendNew("y"), "history": JsonAppend([{"attempt": 1}])})
    rows.update("things", ("b",), {"history": JsonAppend([{"attempt": 2, "ok": True}]), "waiting": False})
    rows.update("things", ("nobody",), {"n": Add(1)})  # no row: nothing happens
    rows.insert("things", {"id": "d", "grp": "g", "turn": next_turn("g")})  # after a's turn, b not waiting
    rows.update("things", ("a",), {"waiting": False})
    rows.insert("things", {"id": "e", "grp": "g", "turn": next_turn("g")})
    seen.append(rows.get("things", ("c",), "n"))
    seen.append(rows.get("things", ("nobody",), "n"))
    rows.delete("things", ("d",), older=("turn", 1))  # d's turn is 2: kept
    rows.delete("things", ("b",), older=("turn", 1))  # b's turn is 1: gone
    rows.delete("things", ("zzz",))
    for at in (1.0, 2.0, 3.0, 4.0):
        rows.insert("hits", {"who": "p", "at": at})
    rows.insert("hits", {"who": "q", "at": 1.0})
    rows.delete_upto("hits", "by_who", ("p",), 2.0)
    rows.guard("SELECT 1 WHERE %s", (True,))
    rows.insert("tallies", {"k": "x", "n": Add(2)}, on_conflict="update")  # upserts that only add
    rows.insert("tallies", {"k": "x", "n": Add(3)}, on_conflict="update")
    seen.append(rows.get("tallies", ("x",), "n"))
    return seen


@pytest.mark.parametrize("executor", [SqlRows, BatchedSqlRows])
def test_sql_and_memory_executors_agree_on_every_operation(database_url, executor):
    """The script reads a summed column (`n` of c) after two upserts that add to it: the batched
    executor writes its held sums before any read, so it reads what the others do."""
    schema = f"rows_test_{executor.__name__.lower()}"
    with psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"SET search_path = {schema}")
        conn.execute(DDL)
        with conn.transaction(), conn.cursor() as cur, conn.pipeline():  # as a follower runs it
            rows = executor(cur, TABLES)
            sql_seen = script(rows)
            if isinstance(rows, BatchedSqlRows):
                rows.flush()
        defaults = {}
        for table in TABLES:
            columns = conn.execute("SELECT column_name, column_default FROM information_schema.columns"
                                   " WHERE table_schema = %s AND table_name = %s", (schema, table)).fetchall()
            given = [c for c in columns if c["column_default"]]
            values = conn.execute("SELECT " + ", ".join(f'{c["column_default"]} AS "{c["column_name"]}"'
                                                          for c in given)).fetchone() if given else {}
            defaults[table] = {c["column_name"]: values.get(c["column_name"]) for c in columns}
        memory = MemoryRows(TABLES, defaults)
        memory_seen = script(memory)
        live_things = {r["id"]: r for r in conn.execute("SELECT * FROM things").fetchall()}
        live_hits = sorted((r["who"], r["at"]) for r in conn.execute("SELECT * FROM hits").fetchall())
    assert sql_seen == memory_seen == [8, None, 5]
    assert {key[0]: row for key, row in memory.rows["things"].items()} == live_things
    assert sorted((r["who"], r["at"]) for r in memory.rows["hits"].values()) == live_hits
    # what the script was built to exercise, so an executor doing nothing would not pass
    assert set(live_things) == {"a", "c", "d", "e"}
    assert live_things["a"]["tags"] == ["x", "y"] and live_things["a"]["previous"] == "first"
    assert [live_things[k]["turn"] for k in "ade"] == [0, 2, 3] and live_things["c"]["note"] == "upserted"
    assert live_things["a"]["history"] == [{"attempt": 1}]
    assert live_hits == [("p", 3.0), ("p", 4.0), ("q", 1.0)]


def test_a_second_row_with_the_same_key_is_refused_by_both():
    memory = MemoryRows(TABLES, {"things": {"n": 0}, "hits": {}})
    memory.insert("things", {"id": "a", "grp": "g", "turn": 0, "waiting": True})
    with pytest.raises(KeyError, match="things"):
        memory.insert("things", {"id": "a", "grp": "g", "turn": 0, "waiting": True})


def batch(rows) -> None:
    """Inserts enough for a multi-row statement past psycopg's 50 cached parameters: the batched
    executor sends them as one JSON parameter, or, where a value has no faithful JSON form (a
    list for text[], a Jsonb of None), as VALUES."""
    for i in range(40):
        rows.insert("things", {"id": f"j{i}", "grp": "g", "n": 2 ** 40 + i, "turn": -i, "note": None if i % 3 else "é\"'\\n",
                               "history": Jsonb([{"i": i, "nested": {"x": 1.5}}]), "waiting": i % 2 == 0,
                               "at": 1_700_000_000.123456 + i / 7})
    for i in range(20):  # conflicts with the first ones: nothing done, as one insert a row does
        rows.insert("things", {"id": f"j{i * 2}", "grp": "other", "note": "twin"}, on_conflict="nothing")
    for i in range(20):
        rows.insert("things", {"id": f"t{i}", "grp": "g", "tags": ["a", str(i)], "history": Jsonb(None)})
    for i in range(30):
        rows.insert("hits", {"who": f"w{i % 4}", "at": float(i)})


def test_a_large_batch_writes_what_a_statement_a_row_writes(database_url):
    tables = {}
    with psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as conn:
        for executor in (SqlRows, BatchedSqlRows):
            schema = f"batch_test_{executor.__name__.lower()}"
            conn.execute(f"CREATE SCHEMA {schema}")
            conn.execute(f"SET search_path = {schema}")
            conn.execute(DDL)
            with conn.transaction(), conn.cursor() as cur, conn.pipeline():
                rows = executor(cur, TABLES)
                batch(rows)
                if isinstance(rows, BatchedSqlRows):
                    rows.flush()
            tables[executor] = (conn.execute("SELECT *, history::text AS raw FROM things ORDER BY id").fetchall(),
                                conn.execute("SELECT * FROM hits ORDER BY who, at").fetchall())
    assert tables[SqlRows] == tables[BatchedSqlRows]
    things, hits = tables[SqlRows]
    assert len(things) == 60 and len(hits) == 30
    assert [r["raw"] for r in things if r["id"] == "t0"] == ["null"]  # a Jsonb of None is JSON's null, not NULL
    assert {r["grp"] for r in things} == {"g"} and things[0]["history"] == [{"i": 0, "nested": {"x": 1.5}}]
