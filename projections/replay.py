"""`sandesh replay`: rebuild read models from the log beside the live ones, then swap.

Each projection is rebuilt in a scratch schema with the same handlers the live path uses
(search_path points the handlers' unqualified table names there), in batches of 1,000 events
per transaction.  The swap catches up the last events and moves the tables in one transaction
that holds what the live writer holds: for followed projections the position row; for the
inline registry the registry tables and then the events table lock (the order live appends take
them), so no event is missed or applied twice while the API runs.
"""
from __future__ import annotations

import sys
import time
from typing import Any

import psycopg
from sandesh.domain.topics import topics_of

from . import follower, registry
from .runtime import Runtime

NAMES = ("registry", *follower.FOLLOWED)


class _Registry:
    """The inline registry seen as a projection: its handlers, tables and DDL."""
    NAME = registry.NAME
    TABLES = registry.TABLES
    DDL = registry.DDL
    WORKING_COLUMNS = registry.WORKING_COLUMNS
    RETAINED = registry.RETAINED
    HANDLERS = registry.HANDLERS


def projection(name: str) -> Any:
    return _Registry if name == registry.NAME else follower.FOLLOWED[name]


class Progress:
    """A bar with count, rate and ETA on a terminal (tqdm); plain lines otherwise."""

    def __init__(self, name: str, total: int):
        self.name, self.total, self.done, self.started, self.last_line = name, total, 0, time.monotonic(), 0.0
        self.bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=f"replay {name}", unit="ev", file=sys.stderr)

    def advance(self, count: int) -> None:
        self.done += count
        if self.bar is not None:
            self.bar.update(count)
        elif time.monotonic() - self.last_line >= 1.0:
            self.last_line = time.monotonic()
            self._line()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        else:
            self._line()

    def _line(self) -> None:
        elapsed = max(time.monotonic() - self.started, 1e-6)
        rate = self.done / elapsed
        eta = (self.total - self.done) / rate if rate and self.total > self.done else 0
        sys.stderr.write(f"replay {self.name}: {self.done}/{self.total} events, {rate:,.0f} ev/s, ETA {eta:.0f} s\n")
        sys.stderr.flush()


def _apply_batch(runtime: Runtime, conn: Any, schema: str, view: Any, after: int,
                 upto: int | None = None) -> tuple[int, int]:
    """Apply the next batch of events after `after` (not past `upto`) into `schema`; returns
    (new position, count)."""
    batch = follower.read_batch(runtime, topics_of(view.HANDLERS), after, upto=upto)
    if not batch:
        return after, 0
    with conn.cursor() as cur:
        cur.execute(f'SET LOCAL search_path = "{schema}"')
        for notification in batch:
            event = runtime.app.mapper.to_domain_event(notification)
            view.HANDLERS[type(event)](cur, event)
        cur.execute("SET LOCAL search_path = public")
    return batch[-1].id, len(batch)


def _build(runtime: Runtime, conn: Any, schema: str, view: Any, progress: Progress) -> int:
    """The projection's tables rebuilt in `schema` from the whole log; returns the position."""
    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    conn.execute(f'CREATE SCHEMA "{schema}"')
    with conn.transaction():
        conn.execute(f'SET LOCAL search_path = "{schema}"')
        conn.execute(view.DDL)
    position, count = 0, 1
    while count:  # one transaction per batch, holding nothing the live path needs
        with conn.transaction():
            position, count = _apply_batch(runtime, conn, schema, view, position)
        progress.advance(count)
    return position


def rebuild(runtime: Runtime, name: str) -> dict[str, Any]:
    view = projection(name)
    schema = f"rebuild_{name}"
    started = time.monotonic()
    progress = Progress(name, runtime.app.recorder.max_notification_id() or 0)
    with runtime.connection() as conn:
        position = _build(runtime, conn, schema, view, progress)
        position = _swap(runtime, conn, name, schema, view, position, progress)
    progress.close()
    return {"events": progress.done, "seconds": round(time.monotonic() - started, 3), "position": position}


EXAMPLES = 3  # differing rows shown per table and side


def check(runtime: Runtime, names: list[str]) -> dict[str, Any]:
    """`sandesh replay --check`: rebuild beside the live tables and compare them row for row,
    without swapping anything.  `ok` is false when any table differs."""
    started = time.monotonic()
    results = {name: _check_one(runtime, name) for name in names}
    ok = all(t["differ"] == 0 for r in results.values() for t in r["tables"].values())
    return {"ok": ok, "seconds": round(time.monotonic() - started, 3), "projections": results}


def _check_one(runtime: Runtime, name: str) -> dict[str, Any]:
    """The live tables are read in one REPEATABLE READ snapshot, together with how far into the
    log they are (the log's head for the inline registry, whose rows commit with their events;
    the position row for a followed projection); the rebuilt tables are caught up to exactly
    that point inside the same transaction, compared, and dropped.  The live path is never
    blocked: nothing is locked but the rows the snapshot reads."""
    view = projection(name)
    schema = f"check_{name}"
    progress = Progress(f"{name} (check)", runtime.app.recorder.max_notification_id() or 0)
    with runtime.connection() as conn:
        position = _build(runtime, conn, schema, view, progress)
        try:
            with conn.transaction(force_rollback=True):
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                upto = (_log_head(runtime, conn) if name == registry.NAME
                        else follower.read_position(conn, name))
                count = 1
                while count and position < upto:
                    position, count = _apply_batch(runtime, conn, schema, view, position, upto=upto)
                    progress.advance(count)
                now = runtime.clock.now()
                working = getattr(view, "WORKING_COLUMNS", {})
                retained = getattr(view, "RETAINED", {})
                tables = {table: _compare(conn, schema, table, working.get(table, ()),
                                          retained[table](now) if table in retained else "true")
                          for table in view.TABLES}
        finally:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    progress.close()
    return {"position": upto, "tables": tables}


def _log_head(runtime: Runtime, conn: Any) -> int:
    table = runtime.app.recorder.events_table_name
    return conn.execute(f'SELECT coalesce(max(notification_id), 0) AS head FROM public."{table}"').fetchone()["head"]


def _compare(conn: Any, schema: str, table: str, working: tuple[str, ...], where: str) -> dict[str, Any]:
    """Rows compared and rows that differ, as a multiset over the columns the log decides
    (`working` columns, a worker's leases, are left out), among the rows `where` keeps."""
    columns = [r["column_name"] for r in conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = %s"
        " ORDER BY ordinal_position", (table,)).fetchall() if r["column_name"] not in working]
    listed = ", ".join(f'"{c}"' for c in columns)
    live, rebuilt = f"public.{table}", f'"{schema}".{table}'

    def only_in(a: str, b: str) -> tuple[int, list[Any]]:
        difference = f"SELECT {listed} FROM {a} WHERE {where} EXCEPT ALL SELECT {listed} FROM {b} WHERE {where}"
        count = conn.execute(f"SELECT count(*) AS n FROM ({difference}) d").fetchone()["n"]
        examples = [r["row"] for r in conn.execute(
            f"SELECT row_to_json(d) AS row FROM ({difference}) d LIMIT {EXAMPLES}").fetchall()]
        return count, examples

    only_live, live_examples = only_in(live, rebuilt)
    only_rebuilt, rebuilt_examples = only_in(rebuilt, live)
    rows = conn.execute(f"SELECT count(*) AS n FROM {live} WHERE {where}").fetchone()["n"]
    return {"rows": rows, "differ": only_live + only_rebuilt, "onlyLive": live_examples,
            "onlyReplayed": rebuilt_examples}


SWAP_ATTEMPTS = 5


def _swap(runtime: Runtime, conn: Any, name: str, schema: str, view: Any, position: int, progress: Progress) -> int:
    """Catch up under the live writer's locks and move the tables in.  A live append takes the
    registry tables in the order its events need them, so the swap can deadlock with one; the
    server then aborts the swap, which rolled back entirely, and it is tried again."""
    for attempt in range(1, SWAP_ATTEMPTS + 1):
        try:
            with conn.transaction():
                caught_up, applied = _swap_once(runtime, conn, name, schema, view, position)
            progress.advance(applied)  # counted once it committed
            return caught_up
        except (psycopg.errors.DeadlockDetected, psycopg.errors.LockNotAvailable):
            if attempt == SWAP_ATTEMPTS:
                raise
            time.sleep(0.1 * attempt)
    raise AssertionError("unreachable")


def _swap_once(runtime: Runtime, conn: Any, name: str, schema: str, view: Any, position: int) -> tuple[int, int]:
    if name == registry.NAME:
        tables = ", ".join(f"public.{t}" for t in view.TABLES)
        conn.execute(f"LOCK TABLE {tables} IN ACCESS EXCLUSIVE MODE")
        conn.execute(f"LOCK TABLE public.{runtime.app.recorder.events_table_name} IN EXCLUSIVE MODE")
    else:
        follower.lock_position(conn, name)
    count, applied = 1, 0
    while count:  # the events appended since, under the lock
        position, count = _apply_batch(runtime, conn, schema, view, position)
        applied += count
    for table in view.TABLES:
        conn.execute(f"DROP TABLE IF EXISTS public.{table}")
        conn.execute(f'ALTER TABLE "{schema}".{table} SET SCHEMA public')
    if name != registry.NAME:
        follower.set_position(conn, name, position)
    conn.execute(f'DROP SCHEMA "{schema}"')
    return position, applied


def replay(runtime: Runtime, names: list[str]) -> dict[str, Any]:
    started = time.monotonic()
    results = {name: rebuild(runtime, name) for name in names}
    return {"events": sum(r["events"] for r in results.values()), "seconds": round(time.monotonic() - started, 3),
            "projections": results}

