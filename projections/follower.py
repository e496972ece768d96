"""Followed read models: each applies the log's events exactly once, in log order.

A projection's position lives in `projection_positions` and is updated in the same
transaction as its read-model rows; the position row is locked first, so two runners (or a
runner and a replay) never apply the same event twice.  Live runs and replays use the same
handlers (`apply_batch`).
"""
from __future__ import annotations

import logging
import threading
from types import ModuleType
from typing import Any, Callable

import psycopg

from sandesh.domain.topics import topics_of

from . import counters, messages, otps
from .runtime import Runtime
from .health import is_outage

log = logging.getLogger("sandesh.projections")

FOLLOWED: dict[str, ModuleType] = {messages.NAME: messages, counters.NAME: counters, otps.NAME: otps}
POSITIONS_DDL = "CREATE TABLE IF NOT EXISTS projection_positions (name text PRIMARY KEY, position bigint NOT NULL);"
BATCH = 1000


def topics(projection: ModuleType) -> list[str]:
    return topics_of(projection.HANDLERS)


def read_batch(runtime: Runtime, projection: ModuleType, after: int, limit: int = BATCH) -> list[Any]:
    return runtime.app.recorder.select_notifications(start=after, limit=limit, topics=topics(projection),
                                                      inclusive_of_start=False)


def apply_batch(runtime: Runtime, cur: Any, projection: ModuleType, notifications: list[Any]) -> None:
    for notification in notifications:
        event = runtime.app.mapper.to_domain_event(notification)
        projection.HANDLERS[type(event)](cur, event)


def step(runtime: Runtime, projection: ModuleType, limit: int = BATCH) -> int:
    """Apply the next batch of events; returns how many were applied."""
    with runtime.connection() as conn, conn.transaction(), conn.cursor() as cur:
        cur.execute("INSERT INTO projection_positions (name, position) VALUES (%s, 0) ON CONFLICT DO NOTHING",
                    (projection.NAME,))
        cur.execute("SELECT position FROM projection_positions WHERE name = %s FOR UPDATE", (projection.NAME,))
        position = cur.fetchone()["position"]
        batch = read_batch(runtime, projection, position, limit)
        if not batch:
            return 0
        apply_batch(runtime, cur, projection, batch)
        cur.execute("UPDATE projection_positions SET position = %s WHERE name = %s", (batch[-1].id, projection.NAME))
        return len(batch)


def catch_up(runtime: Runtime, names: list[str] | None = None) -> int:
    total = 0
    for name in names or list(FOLLOWED):
        while applied := step(runtime, FOLLOWED[name]):
            total += applied
    return total


def run(runtime: Runtime, stop: threading.Event, names: list[str] | None = None,
        on_idle: Callable[[], None] | None = None) -> None:
    """Follow the log until `stop` is set."""
    def step() -> None:
        catch_up(runtime, names)
        if on_idle:
            on_idle()

    follow(runtime, stop, step, idle_wait=1.0)


def follow(runtime: Runtime, stop: threading.Event, step: Callable[[], None], *, idle_wait: float) -> None:
    """The loop of every log follower (projections, webhooks): run `step` after every append
    (LISTEN on the events table's channel) and at least every `idle_wait` seconds, until `stop`.

    It never exits on an error.  A database outage is told once (runtime.health) and waited out
    with capped backoff, the listener reconnecting; any other error is logged and retried."""
    channel = runtime.app.recorder.channel_name  # type: ignore[attr-defined]
    delay = 0.5
    while not stop.is_set():
        try:
            with psycopg.connect(runtime.settings.database_url, autocommit=True, connect_timeout=2) as listener:
                listener.execute(f'LISTEN "{channel}"')
                while not stop.is_set():
                    step()
                    delay = 0.5
                    for _ in listener.notifies(timeout=idle_wait, stop_after=1):
                        pass
        except Exception as error:
            if is_outage(error):
                runtime.health.failed(error)
            else:
                log.exception("follower step failed; retrying in %.1f s", delay)
            stop.wait(delay)
            delay = min(delay * 2, 2.0)
