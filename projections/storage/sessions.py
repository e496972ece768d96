"""Dashboard sessions and failed sign-ins (docs/dashboard.md): state kept outside the log, on
the service clock, like the request rate (request_rate.py).

Owns `dashboard_sessions` (only the SHA-256 of a session id is kept; the id itself lives in the
person's cookie), `sign_in_failures` (one row per try and key, recorded before the try is
checked and taken back when it was right: the throttle of domain/signin.py) and `sign_in_pace`
(each paced account's next free turn).  Reads `people` (people.py) to know who a session
is and whether they are still enabled."""
from __future__ import annotations

import secrets
from typing import Any, Callable, ContextManager, Mapping

from sandesh.domain.credentials import sha256_hex
from sandesh.domain.signin import ACCOUNT_WINDOW, PACE, SESSION_ABSOLUTE, SESSION_IDLE, Turn, TryKeys, session_alive

DDL = """
CREATE TABLE IF NOT EXISTS dashboard_sessions (
    id_hash text PRIMARY KEY, person_id text NOT NULL,
    created_at double precision NOT NULL, last_seen double precision NOT NULL);
CREATE INDEX IF NOT EXISTS dashboard_sessions_person ON dashboard_sessions (person_id);
ALTER TABLE dashboard_sessions ADD COLUMN IF NOT EXISTS stage text NOT NULL DEFAULT 'signed_in';
CREATE TABLE IF NOT EXISTS sign_in_failures (key text NOT NULL, at double precision NOT NULL);
CREATE INDEX IF NOT EXISTS sign_in_failures_key ON sign_in_failures (key, at);
ALTER TABLE sign_in_failures ADD COLUMN IF NOT EXISTS try_id text;
CREATE INDEX IF NOT EXISTS sign_in_failures_try ON sign_in_failures (try_id);
CREATE TABLE IF NOT EXISTS sign_in_pace (account text PRIMARY KEY, next_turn double precision NOT NULL);
CREATE INDEX IF NOT EXISTS sign_in_failures_at ON sign_in_failures (at);
CREATE INDEX IF NOT EXISTS sign_in_pace_next_turn ON sign_in_pace (next_turn);
"""
# Rows past the throttle's longest window decide nothing: each try deletes up to this many of
# them, whatever their keys, so a spray of addresses or emails that are never tried again does
# not grow the tables without bound.
PURGE_BATCH = 500


SIGNED_IN = "signed_in"  # else the second factor the person still owes: "code" or "enroll" (usecases/people.py)


def begin(conn: Any, person_id: str, now: float, stage: str = SIGNED_IN) -> str:
    """A new session of the person, signed in or waiting for their second factor (`stage`);
    returns its id (shown once, in the cookie).  Ended sessions go."""
    session_id = secrets.token_urlsafe(32)
    conn.execute("DELETE FROM dashboard_sessions WHERE last_seen <= %s OR created_at <= %s",
                 (now - SESSION_IDLE, now - SESSION_ABSOLUTE))
    conn.execute("INSERT INTO dashboard_sessions (id_hash, person_id, created_at, last_seen, stage) "
                 "VALUES (%s, %s, %s, %s, %s)", (sha256_hex(session_id), person_id, now, now, stage))
    return session_id


def touch(conn: Any, session_id: str, now: float, used: bool = True) -> dict[str, Any] | None:
    """The session's person (their `people` row, with their workspace's name and the session's
    `stage`) while the session lives and they are enabled, its last use moved to now when the
    person `used` it (a page's own refresh is not a use); None otherwise (an ended session is
    deleted)."""
    id_hash = sha256_hex(session_id)
    row = conn.execute("SELECT p.*, w.name AS workspace_name, s.created_at AS session_began,"
                       " s.last_seen AS session_seen, s.stage FROM dashboard_sessions s JOIN people p ON p.id = s.person_id"
                       " LEFT JOIN workspaces w ON w.id = p.workspace_id WHERE s.id_hash = %s", (id_hash,)).fetchone()
    if row is None:
        return None
    if row["disabled"] or not session_alive(row["session_began"], row["session_seen"], now):
        conn.execute("DELETE FROM dashboard_sessions WHERE id_hash = %s", (id_hash,))
        return None
    if used:
        conn.execute("UPDATE dashboard_sessions SET last_seen = %s WHERE id_hash = %s", (now, id_hash))
    return row


def end(conn: Any, session_id: str) -> None:
    conn.execute("DELETE FROM dashboard_sessions WHERE id_hash = %s", (sha256_hex(session_id),))


def end_all(conn: Any, person_id: str) -> int:
    """"Sign out everywhere": every session of the person ends; returns how many."""
    return conn.execute("DELETE FROM dashboard_sessions WHERE person_id = %s", (person_id,)).rowcount


def purge(conn: Any, now: float) -> None:
    """Deletes failures and paces older than the throttle's longest window (ACCOUNT_WINDOW), at
    most PURGE_BATCH of each; rows another try holds are skipped, so two purges never wait on each other."""
    for table, column in (("sign_in_failures", "at"), ("sign_in_pace", "next_turn")):
        conn.execute(f"DELETE FROM {table} WHERE ctid IN (SELECT ctid FROM {table} WHERE {column} <= %s"
                     f" LIMIT {PURGE_BATCH} FOR UPDATE SKIP LOCKED)", (now - ACCOUNT_WINDOW,))


class Sessions:
    """The application's Sessions port (domain/ports.py) on pooled connections."""

    def __init__(self, connection: Callable[[], ContextManager[Any]]):
        self.connection = connection

    def end_all(self, person_id: str) -> int:
        with self.connection() as conn:
            return end_all(conn, person_id)


class SignInTries:
    """The application's SignInTries port (domain/ports.py) on pooled connections: one
    transaction per try, holding a lock per key, so concurrent tries are counted one by one."""

    def __init__(self, connection: Callable[[], ContextManager[Any]]):
        self.connection = connection

    def take(self, keys: TryKeys, now: float,
             turn: Callable[[Mapping[str, list[float]], float | None], Turn]) -> tuple[str, Turn]:
        names = keys.all()
        try_id = secrets.token_hex(16)
        with self.connection() as conn:
            purge(conn, now)
        with self.connection() as conn, conn.transaction():
            for name in sorted(names):  # always in one order: two tries never wait for each other's locks
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (name,))
            conn.execute("DELETE FROM sign_in_failures WHERE key = ANY(%s) AND at <= %s", (names, now - ACCOUNT_WINDOW))
            tries: dict[str, list[float]] = {name: [] for name in names}
            for row in conn.execute("SELECT key, at FROM sign_in_failures WHERE key = ANY(%s)", (names,)):
                tries[row["key"]].append(row["at"])
            paced = conn.execute("SELECT next_turn FROM sign_in_pace WHERE account = %s", (keys.account,)).fetchone()
            taken = turn(tries, paced["next_turn"] if paced else None)
            conn.execute("INSERT INTO sign_in_failures (key, at, try_id) SELECT unnest(%s::text[]), %s, %s",
                         (names, now, try_id))
            if taken.paced:
                conn.execute("INSERT INTO sign_in_pace (account, next_turn) VALUES (%s, %s) ON CONFLICT (account)"
                             " DO UPDATE SET next_turn = excluded.next_turn", (keys.account, taken.at + PACE))
        return try_id, taken

    def succeeded(self, try_id: str) -> None:
        with self.connection() as conn:
            conn.execute("DELETE FROM sign_in_failures WHERE try_id = %s", (try_id,))
