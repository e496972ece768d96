"""Followed read models: each applies the log's events exactly once, in log order.

Owns `projection_positions`.  A follower's position lives there and is updated in the
same transaction as what it did with a batch; the position row is locked first, so two
runners (or a runner and a replay) never handle the same event twice.  `positioned_step` is
that step for any follower: the followed projections below (`FOLLOWED`), and the webhook sender
(workers/webhooks.py), which turns its batches into deliveries.  Live runs and replays use the
same handlers (projections/contract.py, `Projection.apply`).  The projections worker also
forgets the rows a projection no longer keeps (`purge`, by its `retained`).
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

import psycopg
from psycopg.rows import tuple_row

from . import audit, campaigns, counters, feed, messages, otps
from .contract import Projection
from .storage.runtime import Runtime
from .storage.health import is_outage

logger = logging.getLogger("sandesh.projections")

FOLLOWED: dict[str, Projection] = {p.name: p for p in (messages.PROJECTION, counters.PROJECTION, otps.PROJECTION,
                                                        audit.PROJECTION, campaigns.PROJECTION, feed.PROJECTION)}
POSITIONS_DDL = "CREATE TABLE IF NOT EXISTS projection_positions (name text PRIMARY KEY, position bigint NOT NULL);"
BATCH = 1000


def read_batch(runtime: Runtime, topics: list[str], after: int, limit: int = BATCH,
               upto: int | None = None) -> list[Any]:
    """The next `limit` notifications of these topics after position `after` (and, given
    `upto`, not past it)."""
    return runtime.sandesh.log.recorder.select_notifications(start=after, limit=limit, stop=upto, topics=topics,
                                                      inclusive_of_start=False)


def apply_batch(runtime: Runtime, cur: Any, projection: Projection, notifications: list[Any]) -> None:
    """The batch's events, decoded, each with its position, written by the projection's live
    executor (`follow`)."""
    to_event = runtime.sandesh.log.mapper.to_domain_event
    projection.follow(cur, ((notification.id, to_event(notification)) for notification in notifications))


def lock_position(cur: Any, name: str) -> int:
    """The follower's position, its row locked until the transaction ends (created at 0)."""
    row = cur.execute("SELECT position FROM projection_positions WHERE name = %s FOR UPDATE", (name,),
                      prepare=True).fetchone()
    if row is not None:
        return row["position"]
    cur.execute("INSERT INTO projection_positions (name, position) VALUES (%s, 0) ON CONFLICT DO NOTHING", (name,))
    return cur.execute("SELECT position FROM projection_positions WHERE name = %s FOR UPDATE",
                       (name,)).fetchone()["position"]


def unpositioned(conn: Any) -> list[str]:
    """The followed projections without a position: read models this database never had."""
    with conn.cursor(row_factory=tuple_row) as cur:
        found = {name for (name,) in cur.execute("SELECT name FROM projection_positions").fetchall()}
    return [name for name in FOLLOWED if name not in found]


def read_position(cur: Any, name: str) -> int:
    """The follower's position, as the transaction's snapshot has it (0 before its first step)."""
    row = cur.execute("SELECT position FROM projection_positions WHERE name = %s", (name,)).fetchone()
    return row["position"] if row else 0


def lags(conn: Any, events_table: str, cap: int) -> dict[str, int]:
    """How many events each followed projection has still to apply: the committed events of its
    topics past its position, counted up to `cap` (cost bounded by the cap, not the log)."""
    found = {}
    for name, projection in FOLLOWED.items():
        found[name] = conn.execute(
            f'SELECT count(*) AS n FROM (SELECT 1 FROM "{events_table}" WHERE notification_id > %s'
            " AND topic = ANY(%s) ORDER BY notification_id LIMIT %s) waiting",
            (read_position(conn, name), projection.topics(), cap), prepare=True).fetchone()["n"]
    return found


def set_position(cur: Any, name: str, position: int) -> None:
    cur.execute("UPDATE projection_positions SET position = %s WHERE name = %s", (position, name), prepare=True)


def positioned_step(runtime: Runtime, name: str, topics: list[str], handle: Callable[[Any, list[Any]], None],
                    limit: int = BATCH) -> int:
    """One step of follower `name`: in one transaction, lock its position, read the next batch
    of notifications of `topics`, `handle(cursor, batch)`, and move the position past the batch.
    Returns how many notifications were handled.

    The batch is read up to the newest event committed when the step began.  A batch short of
    `limit` holds every event of `topics` up to there, so the position moves past the other
    topics' events too, once at least `SKIP_FROM` of them have gathered.  The next step reads
    only what came after, however many events of other topics lie beyond the last one it
    handled (docs/design.md, "Followers skip what they do not follow")."""
    with runtime.connection() as conn, conn.transaction(), conn.cursor() as cur:
        position = lock_position(cur, name)
        newest = _newest(runtime, cur)
        if newest <= position:
            return 0
        batch = read_batch(runtime, topics, position, limit, upto=newest)
        if batch:
            handle(cur, batch)
        moved = batch[-1].id if len(batch) == limit else newest
        if batch or moved - position >= SKIP_FROM:
            set_position(cur, name, moved)
        return len(batch)


SKIP_FROM = 200  # events of other topics a follower passes over before it writes its position past them


def _newest(runtime: Runtime, cur: Any) -> int:
    """The notification id of the newest committed event.  Ids are given in commit order (the
    events table lock; eventsourcing-facts), so every event up to it is committed or rolled back."""
    row = cur.execute(runtime.sandesh.log.recorder.max_notification_id_statement, prepare=True).fetchone()  # type: ignore[attr-defined]
    return row["max"] or 0


def step(runtime: Runtime, projection: Projection, limit: int = BATCH) -> int:
    """Apply the next batch of events; returns how many were applied."""
    return positioned_step(runtime, projection.name, projection.topics(),
                           lambda cur, batch: apply_batch(runtime, cur, projection, batch), limit)


def catch_up(runtime: Runtime) -> int:
    """Apply every followed projection's waiting events; returns how many were applied."""
    total = 0
    for projection in FOLLOWED.values():
        while True:
            applied = step(runtime, projection)
            total += applied
            if applied < BATCH:  # a batch short of full was the end of the log
                break
    return total


STEP_EVERY = 0.1  # seconds: while events keep coming, the projections take them this often, together
PURGE_EVERY = 60.0  # seconds between two purges that found nothing more to forget
PURGE_AT_ONCE = 10_000  # rows of a table a purge forgets in one statement: a step is never held up long


def purge(conn: Any, now: float, limit: int = PURGE_AT_ONCE) -> bool:
    """Forget up to `limit` rows of each table that a followed projection keeps only for a time,
    those outside its `retained(now)` (a replay makes them again, `sandesh replay --check` leaves
    them out).  Returns whether a table had more to forget."""
    more = False
    for projection in FOLLOWED.values():
        for table, retained in projection.retained.items():
            gone = conn.execute(f"DELETE FROM {table} WHERE ctid = ANY(ARRAY("
                                f"SELECT ctid FROM {table} WHERE NOT ({retained(now)}) LIMIT %s))", (limit,)).rowcount
            more = more or gone >= limit
    return more


def run(runtime: Runtime, stop: threading.Event) -> None:
    """Follow the log until `stop` is set (docs/design.md, "Followed projections in batches"),
    and purge once a minute, or at every step while a purge leaves more to forget."""
    purge_at = 0.0  # time.monotonic()

    def step() -> None:
        nonlocal purge_at
        catch_up(runtime)
        if time.monotonic() >= purge_at:
            with runtime.connection() as conn:
                more = purge(conn, runtime.clock.now())
            purge_at = time.monotonic() + (0.0 if more else PURGE_EVERY)

    follow(runtime, stop, step, idle_wait=1.0, every=STEP_EVERY)


def follow(runtime: Runtime, stop: threading.Event, step: Callable[[], None], *, idle_wait: float,
           every: float = 0.0) -> None:
    """The loop of every log follower (projections, webhooks): run `step` after every append
    (LISTEN on the events table's channel) and at least every `idle_wait` seconds, until `stop`;
    with `every`, no sooner than that after the previous step began, so that appends arriving
    meanwhile are taken in one step.

    It never exits on an error.  A database outage is told once (runtime.health) and waited out
    with capped backoff, the listener reconnecting; any other error is logged and retried."""
    channel = runtime.sandesh.log.recorder.channel_name  # type: ignore[attr-defined]
    delay = 0.5
    while not stop.is_set():
        try:
            with psycopg.connect(runtime.settings.database_url, autocommit=True, connect_timeout=2) as listener:
                listener.execute(f'LISTEN "{channel}"')
                while not stop.is_set():
                    began = time.monotonic()
                    step()
                    delay = 0.5
                    for _ in listener.notifies(timeout=idle_wait, stop_after=1):
                        pass
                    stop.wait(every - (time.monotonic() - began))
        except Exception as error:
            if is_outage(error):
                runtime.health.failed(error)
            else:
                logger.exception("follower step failed; retrying in %.1f s", delay)
            stop.wait(delay)
            delay = min(delay * 2, 2.0)
