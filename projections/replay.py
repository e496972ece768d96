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


def _apply_batch(runtime: Runtime, conn: Any, schema: str, view: Any, after: int) -> tuple[int, int]:
    """Apply the next batch of events after `after` into `schema`; returns (new position, count)."""
    batch = follower.read_batch(runtime, topics_of(view.HANDLERS), after)
    if not batch:
        return after, 0
    with conn.cursor() as cur:
        cur.execute(f'SET LOCAL search_path = "{schema}"')
        for notification in batch:
            event = runtime.app.mapper.to_domain_event(notification)
            view.HANDLERS[type(event)](cur, event)
        cur.execute("SET LOCAL search_path = public")
    return batch[-1].id, len(batch)


def rebuild(runtime: Runtime, name: str) -> dict[str, Any]:
    view = projection(name)
    schema = f"rebuild_{name}"
    started = time.monotonic()
    progress = Progress(name, runtime.app.recorder.max_notification_id() or 0)
    with runtime.connection() as conn:
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
        position = _swap(runtime, conn, name, schema, view, position, progress)
    progress.close()
    return {"events": progress.done, "seconds": round(time.monotonic() - started, 3), "position": position}


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

