"""The PostgreSQL side of Sandesh: database creation, migrations, the test clock's offset.

Owns `clock_offset`.  `create_tables` creates every table, each from the DDL of the module
that owns it."""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from sandesh.domain.settings import Settings

from . import drafts, keys, releases, sessions, text_keys
from .. import device_cursors, dispatch, otp_limits, registry, request_rate, sim_health
from ..engine import checkpoints
from .health import DatabaseUnavailable


OWN_DDL = """
CREATE TABLE IF NOT EXISTS clock_offset (
    id boolean PRIMARY KEY DEFAULT true CHECK (id), offset_seconds double precision NOT NULL);
INSERT INTO clock_offset (id, offset_seconds) VALUES (true, 0) ON CONFLICT DO NOTHING;
"""

MIGRATION_LOCK = 0x5A4E_DE50  # advisory lock: concurrent `db migrate` runs wait for each other
# How long one try of the migration waits for a table's lock: below PostgreSQL's deadlock_timeout
# (1 s), so a migration that meets running transactions gives up first rather than one of them.
MIGRATION_LOCK_WAIT = "500ms"
MIGRATION_TRIES = 120


def connect(settings: Settings, **kwargs: Any) -> psycopg.Connection:
    try:
        return psycopg.connect(settings.database_url, autocommit=True, connect_timeout=5, **kwargs)
    except psycopg.OperationalError as error:
        raise DatabaseUnavailable(describe_unreachable(settings, error)) from error


def describe_unreachable(settings: Settings, error: Exception) -> str:
    params = conninfo_to_dict(settings.database_url)
    where = f"{params.get('host') or 'localhost'}:{params.get('port') or 5432}/{params.get('dbname') or ''}"
    return (
        f"cannot reach PostgreSQL at {where} ({str(error).strip().splitlines()[0]}).\n"
        "Set DATABASE_URL to a running server, or run `sandesh up`, which starts an embedded one under ./var."
    )


@contextmanager
def migration_lock(settings: Settings) -> Iterator[psycopg.Connection]:
    """A connection holding the migration lock: concurrent `db migrate` runs take turns."""
    with connect(settings) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
        try:
            yield conn
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))


def ensure_database(settings: Settings) -> None:
    """Create the database named in DATABASE_URL when it does not exist yet."""
    params = conninfo_to_dict(settings.database_url)
    dbname = params.get("dbname") or "sandesh"
    maintenance = make_conninfo(settings.database_url, dbname="postgres")
    try:
        with psycopg.connect(maintenance, autocommit=True, connect_timeout=5) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone()
            if not exists:
                try:
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
                except psycopg.errors.DuplicateDatabase:
                    pass
    except psycopg.OperationalError as error:
        raise DatabaseUnavailable(describe_unreachable(settings, error)) from error


def create_tables(conn: psycopg.Connection, waiting: Callable[[int], None] = lambda tries: None) -> None:
    """Every table, in one transaction. A migration under traffic takes each table's lock while
    running processes hold theirs: a try waits at most MIGRATION_LOCK_WAIT for one, so it holds
    no process longer than that, and a try that gave up is rolled back and made again a moment
    later (`waiting` is told how many have failed)."""
    for tries in range(1, MIGRATION_TRIES + 1):
        try:
            _create_tables(conn)
            return
        except (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected):
            if tries == MIGRATION_TRIES:
                raise
            waiting(tries)
            time.sleep(min(1.0, 0.05 * tries))


def _create_tables(conn: psycopg.Connection) -> None:
    from .. import follower

    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute(f"SET LOCAL lock_timeout = '{MIGRATION_LOCK_WAIT}'")
        conn.execute(OWN_DDL + request_rate.DDL + sim_health.DDL + sessions.DDL + releases.DDL + keys.DDL + checkpoints.DDL)
        conn.execute(otp_limits.DDL)
        conn.execute(device_cursors.DDL)
        conn.execute(registry.PROJECTION.ddl)
        conn.execute(dispatch.FUNCTIONS)
        conn.execute(follower.POSITIONS_DDL)
        conn.execute(text_keys.DDL)
        conn.execute(drafts.DDL)
        for projection in follower.FOLLOWED.values():
            conn.execute(projection.ddl)


def events_by_topic(conn: Any) -> dict[str, int]:
    """How many events of each topic the log holds (a corpus's manifest, scripts/devtools/corpus.py)."""
    rows = conn.execute("SELECT topic, count(*) FROM sandesh_events GROUP BY topic ORDER BY topic").fetchall()
    return {topic: count for topic, count in rows}


def read_clock_offset(conn: Any) -> float:
    row = conn.execute("SELECT offset_seconds FROM clock_offset").fetchone()
    if row is None:
        return 0.0
    return float(row["offset_seconds"] if isinstance(row, dict) else row[0])


def advance_clock(conn: Any, seconds: float) -> float:
    row = conn.execute(
        "UPDATE clock_offset SET offset_seconds = offset_seconds + %s RETURNING offset_seconds", (seconds,)
    ).fetchone()
    conn.execute(dispatch.NOTIFY_CLOCK)  # time moved: heartbeats aged, windows opened, messages expired
    return float(row["offset_seconds"] if isinstance(row, dict) else row[0])
