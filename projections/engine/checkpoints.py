"""Checkpoints of the read models (docs/operations.md, "Checkpoints"): each projection's tables
as a fold of the log made them up to a position, kept in schema `checkpoint_<name>`, so that
`sandesh replay --from-checkpoint` and `replay --check --since-checkpoint` fold only the events
after it.

Owns `sandesh_checkpoints` (one row per projection: its position, when it was made, how it was
verified) and the `checkpoint_*` schemas.  A checkpoint is made by a fold (projections/engine/replay.py,
`checkpoint`): from zero, or from the previous checkpoint on; one made from the previous one is
kept only once it equals, row for row, a fresh fold from zero up to the same position.
"""
from __future__ import annotations

from typing import Any

from psycopg.rows import dict_row, tuple_row

from sandesh.domain import release

from ..contract import Projection
from ..rows import Tally
from .memory import SpillingRows

DDL = """
CREATE TABLE IF NOT EXISTS sandesh_checkpoints (
    name text PRIMARY KEY, position bigint NOT NULL, made_at timestamptz NOT NULL DEFAULT now(),
    rows bigint NOT NULL, seconds double precision NOT NULL, verified text NOT NULL);
ALTER TABLE sandesh_checkpoints ADD COLUMN IF NOT EXISTS release text;
"""


def schema(name: str) -> str:
    return f"checkpoint_{name}"


def read(conn: Any) -> dict[str, dict[str, Any]]:
    """The checkpoint of each projection that has one, by name."""
    with conn.cursor(row_factory=dict_row) as cur:
        if not cur.execute("SELECT to_regclass('sandesh_checkpoints') IS NOT NULL AS present").fetchone()["present"]:
            return {}
        return {r["name"]: r for r in cur.execute(
            "SELECT name, position, made_at, rows, seconds, verified, release FROM sandesh_checkpoints ORDER BY name")}


def load(conn: Any, name: str, view: Projection, memory: SpillingRows, into: str) -> int:
    """The checkpoint's rows, as its handlers left them: those of the tables `memory` lets go of
    (memory.py, `SpillingRows`) copied by the server into the same tables in schema `into`, where
    they are taken back when an event changes them; the others into `memory`.  Returns how
    many rows."""
    total = 0
    with conn.cursor(row_factory=dict_row) as cur:
        for table in view.tables:
            source = f'"{schema(name)}"."{table}"'
            if table in memory.spillable:
                columns = ", ".join(f'"{r["column_name"]}"' for r in cur.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s"
                    " ORDER BY ordinal_position", (schema(name), table)).fetchall())
                total += cur.execute(f'INSERT INTO "{into}"."{table}" ({columns}) SELECT {columns} FROM {source}').rowcount
                key = ", ".join(f'"{column}"' for column in view.tables[table].key)
                # Their keys, for memory to know which rows are in the spill: from a cursor on the
                # server, 10,000 at a time, not all at once.
                with conn.transaction(), conn.cursor(name="checkpoint_keys", row_factory=tuple_row) as keys:
                    keys.execute(f"SELECT {key} FROM {source}")
                    while batch := keys.fetchmany(10_000):
                        memory.spilled_elsewhere(table, batch)
                if any(isinstance(index, Tally) for index in view.tables[table].ordered):  # they count where they are
                    cur.execute(f"SELECT * FROM {source}")
                    while batch := cur.fetchmany(10_000):
                        for row in batch:
                            memory.count(table, row)
                continue
            cur.execute(f"SELECT * FROM {source}")
            while batch := cur.fetchmany(10_000):
                for row in batch:
                    memory.insert(table, row)
                total += len(batch)
    return total


def differences(conn: Any, view: Projection, one: str, other: str) -> dict[str, int]:
    """Per table, the rows of schema `one` and schema `other` that the other lacks (as multisets)."""
    found = {}
    with conn.cursor(row_factory=tuple_row) as cur:
        for table in view.tables:
            columns = ", ".join(f'"{name}"' for (name,) in cur.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s"
                " ORDER BY ordinal_position", (one, table)).fetchall())
            a, b = f'"{one}"."{table}"', f'"{other}"."{table}"'
            found[table] = sum(cur.execute(f"SELECT count(*) FROM (SELECT {columns} FROM {left} EXCEPT ALL"
                                           f" SELECT {columns} FROM {right}) d").fetchone()[0]
                               for left, right in ((a, b), (b, a)))
    return found


def keep(conn: Any, name: str, made: str, position: int, rows: int, seconds: float, verified: str) -> None:
    """Make the tables in schema `made` the checkpoint of `name`, in place of the previous one."""
    conn.execute(f'DROP SCHEMA IF EXISTS "{schema(name)}" CASCADE')
    conn.execute(f'ALTER SCHEMA "{made}" RENAME TO "{schema(name)}"')
    conn.execute("INSERT INTO sandesh_checkpoints (name, position, rows, seconds, verified, release)"
                 " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (name) DO UPDATE SET position = excluded.position,"
                 " made_at = now(), rows = excluded.rows, seconds = excluded.seconds, verified = excluded.verified,"
                 " release = excluded.release", (name, position, rows, seconds, verified, release.VERSION))
